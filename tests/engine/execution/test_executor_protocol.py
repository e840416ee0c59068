"""The executor driven through the operator protocol alone: fake operators, a fake backend,
no datasource. Checks routing, completion, fair slots, downstream-first dispatch, stopping
upstream work, errors, cancellation and shutdown."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import pyarrow as pa
import pytest

from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.backends.base import Backend
from shardflow.engine.execution.backends.task_runner import BLOCK, DONE, ERROR, drive_task
from shardflow.engine.execution.executor import StreamingExecutor
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle
from shardflow.engine.plan.physical import PhysicalPlan
from shardflow.sdk.block import BlockMetadata


def block(value: int, rows: int = 1) -> pa.Table:
    return pa.table({"v": [value] * rows})


class FreeGate:
    def acquire(self) -> bool:
        return True

    def produced(self, nbytes: int) -> None:
        pass

    def unused(self) -> None:
        pass

    def cancelled(self) -> bool:
        return False


class FakeBackend(Backend):
    """Runs each task in its own thread; records launches and cancellations."""

    name = "fake"

    def __init__(self, slots: int = 2, task_delay_s: float = 0.0):
        self.slots = slots
        self.task_delay_s = task_delay_s
        self.launched: list[str] = []
        self.cancelled: list[int] = []
        self.running = 0
        self.peak_running = 0
        self._lock = threading.Lock()

    def num_slots(self, kind: str) -> int:
        return self.slots

    def launch(self, spec: Any) -> None:
        with self._lock:
            self.launched.append(spec.op_name)
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)

        def run() -> None:
            time.sleep(self.task_delay_s)
            try:
                drive_task(spec, iter(spec.transform(spec.inputs, spec.ctx)), store=lambda b: b)
            finally:
                with self._lock:
                    self.running -= 1

        threading.Thread(target=run, daemon=True).start()

    def cancel(self, task_id: int) -> None:
        self.cancelled.append(task_id)

    def put(self, block: Any) -> Any:
        return block


class Source(PhysicalOperator):
    """Emits ``n`` one-row blocks, no tasks."""

    def __init__(self, n: int):
        super().__init__("Source", [])
        self.items = deque(RefBundle(block(i), BlockMetadata(1, 8), 0) for i in range(n))
        self.cancel_calls = 0
        self.shutdown_calls = 0

    def has_next(self) -> bool:
        return bool(self.items) and not self.cancelled

    def get_next(self) -> RefBundle:
        return self.items.popleft()

    def completed(self) -> bool:
        return self.cancelled or not self.items

    def cancel(self) -> None:
        super().cancel()
        self.cancel_calls += 1

    def shutdown(self) -> None:
        self.shutdown_calls += 1


class TaskOp(PhysicalOperator):
    """One task per input: ``fn(value)`` on the block's value; outputs as tasks finish."""

    def __init__(self, name: str, upstream: PhysicalOperator, fn=lambda v: v, kind: str = "thread"):
        super().__init__(name, [upstream])
        self.fn = fn
        self.kind = kind
        self.queue: deque = deque()
        self.running: dict = {}
        self.ready: deque = deque()
        self.shutdown_calls = 0

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.queue.append(bundle)

    def next_task_kind(self) -> str | None:
        return self.kind if self.queue and not self.cancelled else None

    def launch_next(self) -> None:
        bundle = self.queue.popleft()
        fn = self.fn

        def transform(inputs, ctx):
            yield block(fn(inputs[0].column("v")[0].as_py()))

        task_id = self.runtime.launch(self, transform, [bundle.ref], self.kind, FreeGate(), 0)
        self.running[task_id] = True

    def has_pending_work(self, kind: str) -> bool:
        return kind == self.kind and bool(self.queue or self.running)

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        if event == BLOCK:
            self.ready.append(RefBundle(payload, meta, 0))
        elif event == DONE:
            self.running.pop(task_id, None)
        elif event == ERROR:
            self.running.pop(task_id, None)
            if not self.cancelled:
                raise payload.to_exception()

    def has_next(self) -> bool:
        return bool(self.ready)

    def get_next(self) -> RefBundle:
        return self.ready.popleft()

    def completed(self) -> bool:
        if self.cancelled:
            return not self.running
        return self.inputs_complete and not self.queue and not self.running and not self.ready

    def cancel(self) -> None:
        super().cancel()
        for task_id in self.running:
            self.runtime.cancel_task(task_id)
        self.queue.clear()

    def shutdown(self) -> None:
        self.shutdown_calls += 1


class TakeFirst(PhysicalOperator):
    """Passes ``n`` bundles, then needs no more input."""

    def __init__(self, upstream: PhysicalOperator, n: int):
        super().__init__("TakeFirst", [upstream])
        self.n = n
        self.ready: deque = deque()

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        if self.n > 0:
            self.n -= 1
            self.ready.append(bundle)

    def needs_more_input(self) -> bool:
        return self.n > 0

    def has_next(self) -> bool:
        return bool(self.ready)

    def get_next(self) -> RefBundle:
        return self.ready.popleft()

    def completed(self) -> bool:
        return (self.inputs_complete or self.n <= 0) and not self.ready


class Interleave(PhysicalOperator):
    """Two inputs; records (input index, value) and which inputs ended, passes all through."""

    def __init__(self, a: PhysicalOperator, b: PhysicalOperator):
        super().__init__("Interleave", [a, b])
        self.seen: list[tuple] = []
        self.done_order: list[int] = []
        self.ready: deque = deque()

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.seen.append((input_index, bundle.ref.column("v")[0].as_py()))
        self.ready.append(bundle)

    def input_done(self, input_index: int) -> None:
        self.done_order.append(input_index)
        super().input_done(input_index)

    def has_next(self) -> bool:
        return bool(self.ready)

    def get_next(self) -> RefBundle:
        return self.ready.popleft()

    def completed(self) -> bool:
        return self.inputs_complete and not self.ready


def run(operators: list[PhysicalOperator], backend: Backend) -> list[int]:
    executor = StreamingExecutor(PhysicalPlan(operators), backend, DataContext())
    return [ref.column("v")[0].as_py() for ref, _ in executor]


def test_blocks_flow_through_a_chain_of_operators():
    source = Source(10)
    double = TaskOp("Double", source, lambda v: v * 2)
    plus = TaskOp("Plus", double, lambda v: v + 1)
    backend = FakeBackend()
    out = run([source, double, plus], backend)
    assert sorted(out) == [2 * i + 1 for i in range(10)]
    assert backend.launched.count("Double") == 10 and backend.launched.count("Plus") == 10
    assert source.shutdown_calls == 1 and double.shutdown_calls == 1 and plus.shutdown_calls == 1


def test_an_operator_that_runs_no_tasks_alone():
    assert run([Source(3)], FakeBackend()) == [0, 1, 2]
    assert run([Source(0)], FakeBackend()) == []


def test_slots_are_never_exceeded_and_shared():
    source = Source(20)
    first = TaskOp("First", source)
    second = TaskOp("Second", first)
    backend = FakeBackend(slots=3, task_delay_s=0.01)
    assert sorted(run([source, first, second], backend)) == list(range(20))
    assert backend.peak_running <= 3


def test_downstream_operators_are_served_first():
    source = Source(6)
    first = TaskOp("First", source)
    second = TaskOp("Second", first)
    backend = FakeBackend(slots=1, task_delay_s=0.01)
    run([source, first, second], backend)
    # With one slot, a block ready for Second is processed before First starts another:
    # First and Second alternate instead of First running all six tasks first.
    assert backend.launched[:4] == ["First", "Second", "First", "Second"]


def test_an_operator_that_needs_no_more_input_stops_everything_upstream():
    source = Source(1000)
    work = TaskOp("Work", source)
    take = TakeFirst(work, 3)
    backend = FakeBackend(slots=2, task_delay_s=0.005)
    out = run([source, work, take], backend)
    assert len(out) == 3
    assert work.cancelled  # the source had already handed over every input: it ended by itself
    assert source.cancel_calls <= 1
    assert backend.launched.count("Work") < 100  # it stopped long before the 1000 inputs


def test_every_input_of_a_multi_input_operator_is_routed_by_index():
    a, b = Source(3), Source(2)
    join = Interleave(a, b)
    out = run([a, b, join], FakeBackend())
    assert sorted(out) == [0, 0, 1, 1, 2]
    assert sorted(join.seen) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert sorted(join.done_order) == [0, 1]


def test_a_task_error_fails_the_execution_and_cancels_the_rest():
    def boom(v):
        if v == 5:
            raise ZeroDivisionError("five")
        time.sleep(0.01)
        return v

    source = Source(50)
    work = TaskOp("Work", source, boom)
    executor = StreamingExecutor(PhysicalPlan([source, work]), FakeBackend(slots=2), DataContext())
    with pytest.raises(ZeroDivisionError, match="five"):
        list(executor)
    assert work.cancelled and source.cancelled
    assert work.shutdown_calls == 1


def test_closing_the_output_early_cancels_running_tasks_and_shuts_down():
    source = Source(100)
    work = TaskOp("Work", source, lambda v: (time.sleep(0.02), v)[1])
    backend = FakeBackend(slots=2)
    executor = StreamingExecutor(PhysicalPlan([source, work]), backend, DataContext())
    stream = iter(executor)
    next(stream)
    stream.close()
    assert work.cancelled and source.cancelled
    assert work.shutdown_calls == 1
    assert backend.launched.count("Work") < 100


def test_an_operator_kind_without_slots_of_its_own_waits_for_them():
    source = Source(4)
    on_driver = TaskOp("Driver", source, kind="driver")
    backend = FakeBackend(slots=1, task_delay_s=0.01)
    assert sorted(run([source, on_driver], backend)) == [0, 1, 2, 3]
    assert backend.peak_running == 1


class CountingDatasource:
    """Rows unknown until read; counts how often it is asked for read tasks."""

    def __new__(cls, *args, **kwargs):
        import shardflow as sf

        class _Source(sf.Datasource):
            def __init__(self):
                self.calls = 0

            def get_read_tasks(self, parallelism, **kwargs):
                self.calls += 1
                tasks = []
                for t in range(3):

                    def read(t=t):
                        yield pa.table({"v": list(range(t * 10, t * 10 + 10))})

                    tasks.append(sf.ReadTask(read, BlockMetadata(num_rows=None, size_bytes=None)))
                return tasks

        return _Source()


def test_read_tasks_are_planned_once_per_execution():
    import shardflow as sf

    source = CountingDatasource()
    ds = sf.read_datasource(source)
    assert ds.count() == 30  # metadata does not know: it runs, with the same read tasks
    assert source.calls == 1
    assert ds.schema().names == ["v"]
    assert source.calls == 2
    assert ds.map_batches(lambda b: b).count() == 30
    assert source.calls == 3
