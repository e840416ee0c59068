"""The streaming executor: pulls blocks through a chain of operators under a memory budget.

A scheduling thread launches tasks on the backend, routes produced blocks to the next
operator (in input order when ``preserve_order``), and hands final blocks to the consumer.
Memory is bounded two ways: new read tasks start only while the budget has room, and every
task waits at its gate before producing each block (backpressure). Downstream operators are
served first, and no operator takes every worker slot while another has work, so reads are
never starved and memory drains before more is read.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, NamedTuple, Optional, Tuple

from shardflow.engine.backends.base import Backend, TaskSpec
from shardflow.engine.backends.task_runner import BLOCK, DONE, ERROR
from shardflow.engine.context import DataContext
from shardflow.engine.memory import MemoryBudget
from shardflow.engine.physical import LimitOperator, MapOperator, PhysicalPlan
from shardflow.engine.progress import ProgressBars
from shardflow.engine.stats import ExecutionStats, OperatorStats
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasink import TaskContext
from shardflow.sdk.datasource import ReadTask

_END = object()
_task_ids = itertools.count()


class Bundle(NamedTuple):
    """A block reference with its metadata; ``charge`` is what it counts in the budget."""

    ref: Any
    meta: BlockMetadata
    charge: int


class _Task:
    def __init__(self, op: "_OpState", index: int, inputs: List[Bundle]):
        self.id = next(_task_ids)
        self.op = op
        self.index = index
        self.inputs = inputs
        self.started = time.perf_counter()


class _OpState:
    def __init__(self, position: int, op: Any):
        self.position = position
        self.op = op
        self.stats = OperatorStats(op.name)
        self.inputs: Deque[Bundle] = deque()
        self.inputs_done = False
        self.running: Dict[int, _Task] = {}
        self.next_index = 0
        self.outputs: Dict[int, Deque[Bundle]] = {}
        self.finished: set = set()
        self.head = 0
        self.cancelled = False
        self.done = False
        self.queued_bytes = 0
        self.est_block_bytes = 0
        self.remaining = op.limit if isinstance(op, LimitOperator) else None
        self.total_inputs: Optional[int] = None

    @property
    def is_map(self) -> bool:
        return isinstance(self.op, MapOperator)

    def has_work(self) -> bool:
        return bool(self.inputs) or bool(self.running)


class _Gate:
    """The per-task gate handed to the backend (see backends.base.Gate)."""

    def __init__(self, executor: "StreamingExecutor", task: _Task):
        self._executor = executor
        self._task = task
        self._reserved = 0

    def _is_head(self) -> bool:
        return self._executor.preserve_order and self._task.op.head == self._task.index

    def _exempt(self) -> bool:
        # The head of an ordered stream may pass a full budget only when nothing delivered
        # waits for the consumer; otherwise the consumer frees room as it reads.
        return self._is_head() and self._executor._out.empty()

    def _cancelled(self) -> bool:
        return self._executor.cancelled.is_set() or self._task.op.cancelled

    def acquire(self) -> bool:
        est = self._task.op.est_block_bytes
        # Tasks behind the head leave room for one block of the head, which ordered output
        # waits for, so that the head rarely needs its exemption.
        headroom = est if self._executor.preserve_order and not self._is_head() else 0
        ok = self._executor.budget.reserve(est, self._exempt, self._cancelled, headroom)
        self._reserved = est if ok else 0
        return ok

    def produced(self, nbytes: int) -> None:
        self._executor.budget.commit(self._reserved, nbytes)
        self._reserved = 0
        op = self._task.op
        if nbytes > op.est_block_bytes:
            op.est_block_bytes = nbytes

    def unused(self) -> None:
        if self._reserved:
            self._executor.budget.unreserve(self._reserved)
            self._reserved = 0


class StreamingExecutor:
    """Executes a physical plan, yielding output bundles in order.

    Iterate it once; ``stats`` is filled as it runs. Closing the iterator early (or an
    error) cancels outstanding work.
    """

    def __init__(self, plan: PhysicalPlan, backend: Backend, context: DataContext):
        context.validate()
        self.plan = plan
        self.backend = backend
        self.context = context
        self.preserve_order = context.preserve_order
        self.budget = MemoryBudget(context.memory_budget_bytes)
        self.cancelled = threading.Event()
        self._events: "queue.Queue" = queue.Queue()
        self._out: "queue.Queue" = queue.Queue()
        self._ops = [_OpState(i, op) for i, op in enumerate(plan.operators)]
        self.stats = ExecutionStats(backend.name, context.memory_budget_bytes, [s.stats for s in self._ops])
        self._thread: Optional[threading.Thread] = None
        self._started_at = 0.0
        self._bars: Optional[ProgressBars] = None
        self._source_bundles: Optional[List[Bundle]] = None

    # -- consumer side ------------------------------------------------------------------

    def __iter__(self) -> Iterator[Tuple[Any, BlockMetadata]]:
        self._start()
        held: Optional[Bundle] = None
        try:
            while True:
                item = self._out.get()
                if held is not None:
                    self.budget.release_held(held.charge)
                    held = None
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                held = item
                self.budget.hold(held.charge)
                self.stats.rows_out += item.meta.num_rows or 0
                yield item.ref, item.meta
        finally:
            if held is not None:
                self.budget.release_held(held.charge)
            self.shutdown()

    def shutdown(self) -> None:
        """Stop all work and wait for the scheduling thread."""
        self.cancelled.set()
        self.budget.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._finish_stats()

    def _finish_stats(self) -> None:
        self.stats.peak_bytes_in_flight = self.budget.peak
        if self._started_at:
            self.stats.wall_time_s = time.perf_counter() - self._started_at
        if self._bars is not None:
            self._bars.close()

    # -- scheduling thread --------------------------------------------------------------

    def _start(self) -> None:
        self._started_at = time.perf_counter()
        first = self._ops[0] if self._ops else None
        metas = self.plan.source_metadata or [_meta_of_source(i) for i in self.plan.source_items]
        items = [(self.backend.prepare_source_item(i), m) for i, m in zip(self.plan.source_items, metas)]
        if first is None:
            for item, meta in items:
                self._out.put(Bundle(item, meta, 0))
            self._out.put(_END)
            return
        if first.is_map:
            for item, meta in items:
                first.inputs.append(Bundle(item, meta, 0))
            first.inputs_done = True
        else:
            self._source_bundles = [Bundle(item, meta, 0) for item, meta in items]
        first.total_inputs = len(items)
        self._bars = ProgressBars(
            [s.stats for s in self._ops],
            [first.total_inputs] + [None] * (len(self._ops) - 1),
            self.context.progress_bars_enabled(),
            [s.is_map for s in self._ops],
        )
        self._thread = threading.Thread(target=self._run, name="shardflow-executor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self._source_bundles is not None:
                for bundle in self._source_bundles:
                    self._deliver(0, bundle)
                self._ops[0].inputs_done = True
                self._source_bundles = None
            while not self._all_done():
                if self.cancelled.is_set():
                    self._cancel_running()
                    if not any(s.running for s in self._ops):
                        return
                self._dispatch()
                try:
                    event = self._events.get(timeout=0.05)
                except queue.Empty:
                    continue
                self._handle(event)
                while True:
                    try:
                        self._handle(self._events.get_nowait())
                    except queue.Empty:
                        break
            self._out.put(_END)
        except BaseException as exc:
            self.cancelled.set()
            self._cancel_running()
            self._wait_for_running(timeout_s=10)
            self._out.put(exc)

    def _all_done(self) -> bool:
        self._route()
        for state in self._ops:
            if not state.done:
                if state.cancelled and not state.running:
                    state.done = True
                    state.stats.mark_finished()
                elif state.inputs_done and not state.inputs and not state.running and not state.outputs:
                    state.done = True
                    state.stats.mark_finished()
                    if state.position + 1 < len(self._ops):
                        self._ops[state.position + 1].inputs_done = True
                    if state.is_map and self._bars is not None:
                        self._bars.update(state.position, state.stats, state.next_index)
            if not state.done:
                return False
        return True

    def _dispatch(self) -> None:
        maps = [s for s in self._ops if s.is_map]
        for state in reversed(maps):
            kind = state.op.kind
            slots = self.backend.num_slots(kind)
            others = sum(1 for s in maps if s is not state and s.op.kind == kind and s.has_work() and not s.cancelled)
            cap = max(1, slots - others)
            while state.inputs and not state.cancelled and self._enough_input(state):
                busy = sum(len(s.running) for s in maps if s.op.kind == kind)
                if busy >= slots or len(state.running) >= cap:
                    break
                if state.position == 0 and not self._source_has_room(state):
                    break
                self._launch(state)

    def _enough_input(self, state: _OpState) -> bool:
        """An operator with ``min_rows_per_task`` waits until its queued inputs reach it."""
        need = state.op.min_rows_per_task
        if not need or state.inputs_done:
            return True
        return sum(b.meta.num_rows or 0 for b in state.inputs) >= need

    def _take_inputs(self, state: _OpState) -> List[Bundle]:
        need = state.op.min_rows_per_task
        taken = [state.inputs.popleft()]
        rows = taken[0].meta.num_rows or 0
        while need and rows < need and state.inputs:
            bundle = state.inputs.popleft()
            taken.append(bundle)
            rows += bundle.meta.num_rows or 0
        return taken

    def _source_has_room(self, state: _OpState) -> bool:
        return self.budget.has_room(state.est_block_bytes)

    def _launch(self, state: _OpState) -> None:
        bundles = self._take_inputs(state)
        task = _Task(state, state.next_index, bundles)
        state.next_index += 1
        state.running[task.id] = task
        state.outputs.setdefault(task.index, deque())
        state.stats.tasks += 1
        state.stats.mark_started()
        spec = TaskSpec(
            task_id=task.id,
            op_name=state.op.name,
            transform=state.op.transform,
            inputs=[bundle.ref for bundle in bundles],
            ctx=TaskContext(task_idx=task.index, op_name=state.op.name),
            kind=state.op.kind,
            events=self._events,
            gate=_Gate(self, task),
        )
        self.backend.launch(spec)

    def _handle(self, event: tuple) -> None:
        kind, task_id, payload, meta = event
        task = self._find_task(task_id)
        if task is None:
            return
        state = task.op
        if kind == BLOCK:
            bundle = Bundle(payload, meta, meta.size_bytes or 0)
            if state.cancelled:
                self.budget.release(bundle.charge)
                return
            state.outputs[task.index].append(bundle)
            state.queued_bytes += bundle.charge
            state.stats.peak_queued_bytes = max(state.stats.peak_queued_bytes, state.queued_bytes)
            state.stats.rows_out += meta.num_rows or 0
            state.stats.bytes_out += meta.size_bytes or 0
        elif kind == DONE:
            if payload:  # per-task counters (sdk.task_stats), e.g. files skipped as unreadable
                state.stats.skipped_files += payload.get("skipped_files", 0)
            self._task_finished(task)
        elif kind == ERROR:
            self._task_finished(task)
            if state.cancelled:
                return
            raise payload.to_exception()

    def _find_task(self, task_id: int) -> Optional[_Task]:
        for state in self._ops:
            task = state.running.get(task_id)
            if task is not None:
                return task
        return None

    def _task_finished(self, task: _Task) -> None:
        state = task.op
        del state.running[task.id]
        state.finished.add(task.index)
        for bundle in task.inputs:
            self.budget.release(bundle.charge)
        state.stats.tasks_finished += 1
        state.stats.task_time_s += time.perf_counter() - task.started
        if self._bars is not None:
            self._bars.update(state.position, state.stats, state.total_inputs)

    # -- routing ------------------------------------------------------------------------

    def _route(self) -> None:
        for state in self._ops:
            if not state.is_map:
                continue
            for bundle in list(self._ready_outputs(state)):
                state.queued_bytes -= bundle.charge
                self._deliver(state.position + 1, bundle)

    def _ready_outputs(self, state: _OpState) -> Iterator[Bundle]:
        if not self.preserve_order:
            for index in list(state.outputs):
                queue_ = state.outputs[index]
                while queue_:
                    yield queue_.popleft()
                if index in state.finished:
                    del state.outputs[index]
            return
        while state.head in state.outputs:
            queue_ = state.outputs[state.head]
            while queue_:
                yield queue_.popleft()
            if state.head in state.finished:
                del state.outputs[state.head]
                state.head += 1
            else:
                break

    def _deliver(self, position: int, bundle: Bundle) -> None:
        if position >= len(self._ops):
            self._out.put(bundle)
            return
        state = self._ops[position]
        if state.is_map:
            if state.cancelled:
                self.budget.release(bundle.charge)
                return
            state.inputs.append(bundle)
            if state.total_inputs is None:
                state.total_inputs = 0
            state.total_inputs += 1
            return
        self._apply_limit(state, bundle)

    def _apply_limit(self, state: _OpState, bundle: Bundle) -> None:
        state.stats.mark_started()
        if state.remaining <= 0:
            self.budget.release(bundle.charge)
            return
        rows = bundle.meta.num_rows or 0
        if rows > state.remaining:
            block = self.backend.get(bundle.ref).slice(0, state.remaining)
            self.budget.release(bundle.charge)
            bundle = Bundle(self.backend.put(block), BlockMetadata.of(block), block.nbytes)
            self.budget.add(bundle.charge)
            rows = block.num_rows
        state.remaining -= rows
        state.stats.rows_out += rows
        state.stats.bytes_out += bundle.meta.size_bytes or 0
        self._deliver(state.position + 1, bundle)
        if state.remaining <= 0:
            self._stop_upstream(state.position)
            state.inputs_done = True

    def _stop_upstream(self, position: int) -> None:
        for state in self._ops[:position]:
            if state.cancelled or state.done:
                continue
            state.cancelled = True
            for bundle in state.inputs:
                self.budget.release(bundle.charge)
            state.inputs.clear()
            for queue_ in state.outputs.values():
                for bundle in queue_:
                    self.budget.release(bundle.charge)
            state.outputs.clear()
            state.queued_bytes = 0
            for task_id in list(state.running):
                self.backend.cancel(task_id)
        self.budget.wake()

    def _cancel_running(self) -> None:
        for state in self._ops:
            if not state.cancelled:
                state.cancelled = True
                for task_id in list(state.running):
                    self.backend.cancel(task_id)
        self.budget.wake()

    def _wait_for_running(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while any(s.running for s in self._ops) and time.monotonic() < deadline:
            try:
                event = self._events.get(timeout=0.05)
            except queue.Empty:
                continue
            task = self._find_task(event[1])
            if task is not None and event[0] in (DONE, ERROR):
                self._task_finished(task)


def _meta_of_source(item: Any) -> BlockMetadata:
    if isinstance(item, ReadTask):
        return item.metadata
    return BlockMetadata(getattr(item, "num_rows", None), getattr(item, "nbytes", None))
