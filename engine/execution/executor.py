"""The streaming executor: a generic loop over physical operators under a memory budget.

One scheduling thread per execution repeats three steps until the last operator completes:
move every ready output bundle to the operator that consumes it (or to the user), grant free
worker slots to operators that have a task to start (downstream operators first, and no
operator takes every slot while another has work), then hand each task event to the operator
that launched the task. The loop never looks at an operator's kind: operators follow the
protocol in engine/execution/operators/base.py.

Memory is bounded by the budget (engine/execution/memory.py): operators that start new work
check it, and every task waits at its gate before producing each block (backpressure). When the
consumer waits and nothing can move (every running task waits at its gate, and no operator
can start one), the most downstream blocked operator is let through once, so no budget,
however small, makes an execution wait forever.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.backends.base import THREAD, Backend
from shardflow.engine.execution.backends.task_runner import DONE, ERROR
from shardflow.engine.execution.memory import MemoryBudget
from shardflow.engine.execution.operators.base import OperatorRuntime, PhysicalOperator
from shardflow.engine.execution.progress import ProgressReporter
from shardflow.engine.execution.refs import RefBundle
from shardflow.engine.execution.stats import ExecutionStats
from shardflow.engine.execution.task_timing import peak_rss
from shardflow.engine.plan.physical import PhysicalPlan
from shardflow.sdk.block import BlockMetadata

_END = object()
_WAIT_S = 0.05
#: After a cancellation, how long to wait for running tasks before abandoning them. Process
#: tasks are killed at once; a thread task cannot be interrupted, so it is left to stop at
#: its next block and its results are dropped.
ABANDON_AFTER_S = 1.0
#: A backend that queues tasks beyond its CPUs (Ray) may hold tasks that cannot start while
#: parked ones keep every CPU; such a standstill is declared after this long without events.
QUEUED_STANDSTILL_AFTER_S = 0.5


class StreamingExecutor:
    """Executes a physical plan, yielding ``(reference, metadata)`` of its output blocks.

    Iterate it once; ``stats`` is filled as it runs. Closing the iterator early (or an error)
    cancels outstanding work.
    """

    def __init__(self, plan: PhysicalPlan, backend: Backend, context: DataContext):
        context.validate()
        self.plan = plan
        self.backend = backend
        self.context = context
        self.budget = MemoryBudget(context.memory_budget_bytes)
        self.cancelled = threading.Event()
        self._events: queue.Queue = queue.Queue()
        self._out: queue.Queue = queue.Queue()
        # Bytes of blocks put in ``_out`` (by the scheduling thread) and taken from it (by
        # the consumer): one writer each, so their difference needs no lock.
        self._out_bytes_put = 0
        self._out_bytes_taken = 0
        self._ops: list[PhysicalOperator] = plan.operators
        self._consumer: dict[int, tuple[PhysicalOperator, int]] = {}
        for op in self._ops:
            for index, upstream in enumerate(op.input_ops):
                self._consumer[id(upstream)] = (op, index)
        self._done: set = set()
        self._stopped: set = set()
        self._consumer_waiting = False
        self._refused_for_slots: set[int] = set()
        self.runtime = OperatorRuntime(
            backend,
            self.budget,
            context,
            self._events,
            self._starved,
            self.cancelled,
            output_backlog=self._output_backlog,
        )
        shown = [op for op in self._ops if op.shown_in_stats]
        self.stats = ExecutionStats(
            backend.name, context.memory_budget_bytes, [op.stats for op in shown]
        )
        self._thread: threading.Thread | None = None
        self._started_at = 0.0
        self._progress: ProgressReporter | None = None
        self._finished_ok = False
        self._shown = shown

    # -- consumer side ------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[Any, BlockMetadata]]:
        self._start()
        held: RefBundle | None = None
        try:
            while True:
                # Asking for the next block moves past the one held: its room goes to the
                # block that is awaited (often the head task's next one), within the budget.
                self._consumer_waiting = True
                if held is not None:
                    self.budget.release_held(held.charge)
                    held = None
                try:
                    item = self._out.get()
                finally:
                    self._consumer_waiting = False
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                held = item
                self._out_bytes_taken += held.charge
                self.budget.hold(held.charge)
                self.stats.rows_out += item.meta.num_rows or 0
                yield item.ref, item.meta
        finally:
            if held is not None:
                self.budget.release_held(held.charge)
            self.shutdown()

    def cancel(self) -> None:
        """Stop all work; safe from any thread. A reader waiting for the next block wakes up
        and the stream ends."""
        self.cancelled.set()
        self.budget.wake()

    def shutdown(self) -> None:
        """Stop all work, wait for the scheduling thread, and remove temporary files."""
        self.cancelled.set()
        self.budget.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._finish_stats()

    def _finish_stats(self) -> None:
        self.stats.peak_bytes_in_flight = self.budget.peak
        self.stats.bytes_spilled = sum(op.stats.bytes_spilled for op in self._ops)
        if self._started_at:
            self.stats.wall_time_s = time.perf_counter() - self._started_at
        self.stats.driver_peak_rss = peak_rss()
        if self._progress is not None:
            self._progress.close(self._finished_ok)
            self._progress = None

    # -- scheduling thread --------------------------------------------------------------

    def _start(self) -> None:
        self._started_at = time.perf_counter()
        self.stats.started_at_epoch = time.time()
        for op in self._ops:
            op.start(self.runtime)
        self._progress = ProgressReporter(self._ops, self._shown, self.stats, self.context)
        self._thread = threading.Thread(target=self._run, name="shardflow-executor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        ended = False
        cancelled_at = None
        self._last_progress = self._last_event = time.monotonic()
        try:
            while True:
                if self.cancelled.is_set():
                    self._cancel_all()
                    cancelled_at = cancelled_at or time.monotonic()
                    if self._may_return(cancelled_at):
                        return
                if self._route():
                    if not ended:
                        ended = True
                        self._finished_ok = not self.cancelled.is_set()
                        self._out.put(_END)
                    # Tasks of operators stopped by a limit may still be finishing.
                    cancelled_at = cancelled_at or time.monotonic()
                    if self._may_return(cancelled_at):
                        return
                else:
                    self._dispatch()
                    self._break_standstill()
                if self._progress is not None:
                    self._progress.update()
                try:
                    event = self._events.get(timeout=_WAIT_S)
                except queue.Empty:
                    self._check_progress()
                    continue
                self._last_progress = self._last_event = time.monotonic()
                self._handle(event)
                while True:
                    try:
                        self._handle(self._events.get_nowait())
                    except queue.Empty:
                        break
        except BaseException as exc:
            self.cancelled.set()
            self._cancel_all()
            self._wait_for_running(timeout_s=ABANDON_AFTER_S)
            if not ended:
                self._out.put(exc)
        finally:
            for op in self._ops:
                try:
                    op.shutdown()
                except Exception:
                    pass
            self.runtime.remove_spill_dir()
            if not ended:  # cancelled: wake a reader still waiting for blocks
                self._out.put(_END)

    def _check_progress(self) -> None:
        """Fail when nothing happened for DataContext.no_progress_timeout_s while the
        consumer waited (a consumer that does not read is not a stalled stage)."""
        limit = self.context.no_progress_timeout_s
        if not limit or not self._out.empty():
            self._last_progress = time.monotonic()
            return
        idle = time.monotonic() - self._last_progress
        if idle < limit:
            return
        waiting = []
        for op in self._ops:
            running = self.runtime.num_running(op=op)
            if running:
                waiting.append(
                    f"{op.name} waits for {running} running task(s) that produced nothing"
                )
            elif id(op) not in self._done and op.input_ops and not op.inputs_complete:
                waiting.append(f"{op.name} waits for input")
        detail = "; ".join(waiting) or "no operator has work it can start"
        raise TimeoutError(
            f"The execution made no progress for {idle:.0f} s (DataContext.no_progress_timeout_s"
            f"={limit}): {detail}."
        )

    def _output_backlog(self) -> int:
        """Bytes of output blocks waiting for the consumer to take them."""
        return self._out_bytes_put - self._out_bytes_taken

    def _starved(self, op: PhysicalOperator) -> bool:
        """Whether ``op``'s consumer has nothing it can work on (see BudgetGate)."""
        consumer = self._consumer.get(id(op))
        if consumer is None:
            # a consumer busy with its block is not starved: the block it asks for next
            # takes the room of the one it holds
            return self._consumer_waiting and self._out.empty()
        ready = consumer[0].ready_input_bytes()
        return self._starved(consumer[0]) if ready is None else ready == 0

    def _may_return(self, cancelled_at: float) -> bool:
        """After a cancellation: once no task runs, or after a grace period once only tasks
        that may be abandoned run."""
        if not self.runtime.num_running():
            return True
        waited = time.monotonic() - cancelled_at
        return waited > ABANDON_AFTER_S and not self.runtime.num_unabandonable()

    def _route(self) -> bool:
        """Move ready outputs downstream and propagate completion; True when all is done."""
        moved = True
        while moved:
            moved = False
            for op in self._ops:
                consumer = self._consumer.get(id(op))
                while op.has_next():
                    bundle = op.get_next()
                    moved = True
                    if consumer is None:
                        self._out_bytes_put += bundle.charge
                        self._out.put(bundle)
                    elif consumer[0].needs_more_input() and not consumer[0].cancelled:
                        consumer[0].add_input(bundle, consumer[1])
                    else:
                        self.budget.release(bundle.charge)
                if id(op) not in self._done and op.completed():
                    self._done.add(id(op))
                    op.stats.mark_finished()
                    self._update_bar(op)
                    moved = True
                    if consumer is not None:
                        consumer[0].input_done(consumer[1])
                if id(op) not in self._stopped and not op.needs_more_input():
                    self._stopped.add(id(op))
                    self._stop_upstream(op)
                    moved = True
        return id(self._ops[-1]) in self._done

    def _stop_upstream(self, op: PhysicalOperator) -> None:
        """``op`` needs no more input: cancel everything that only feeds it."""
        for index, upstream in enumerate(op.input_ops):
            for node in _ancestors(upstream):
                if not node.cancelled and id(node) not in self._done:
                    node.cancel()
            op.input_done(index)
        self.budget.wake()

    def _dispatch(self) -> None:
        active = [op for op in self._ops if not op.cancelled and id(op) not in self._done]
        self._refused_for_slots.clear()
        self.runtime.refused_for_room.clear()
        for op in reversed(active):
            while True:
                kind = op.next_task_kind()
                if kind is None:
                    break
                slots = op.slot_capacity(kind)
                if slots is None:
                    slots = self.backend.max_in_flight(kind)
                others = sum(1 for o in active if o is not op and o.has_pending_work(kind))
                cap = max(1, slots - others)
                if (
                    self.runtime.num_running(kind) >= slots
                    or self.runtime.num_running(kind, op) >= cap
                ):
                    if op.slot_capacity(kind) is None:  # an actor pool's actors are real limits
                        self._refused_for_slots.add(id(op))
                    break
                op.launch_next()

    def _break_standstill(self) -> None:
        """Let the most downstream blocked operator move once when nothing else can.

        A standstill: the consumer waits for a block, no event is pending, every running
        task waits at its gate and none of them fits the budget. Then no release can ever
        come, so the most downstream operator that is held back either has its oldest waiting
        task granted one block, or starts one task beyond its slots or the budget (it was
        refused one; never beyond the actors of an actor pool). Each such step moves a block
        towards the consumer; at a budget smaller than a block, blocks are admitted one at a
        time this way.
        """
        if not self._consumer_waiting or not self._out.empty() or not self._events.empty():
            return
        parked = self.budget.stuck_waiters()
        if parked is None:
            return
        if len(parked) != self.runtime.num_running() and not self._queued_behind(parked):
            return
        for op in reversed(self._ops):
            if op.cancelled or id(op) in self._done:
                continue
            waiting = [w for w in parked if getattr(w, "op", None) is op]
            if waiting:
                self.budget.grant(min(waiting, key=lambda w: w.index))
                return
            if id(op) in self._refused_for_slots or id(op) in self.runtime.refused_for_room:
                self.runtime.room_granted = op
                kind = op.next_task_kind()
                self.runtime.room_granted = None
                if kind is not None:
                    op.launch_next()
                    return

    def _queued_behind(self, parked: list) -> bool:
        """Whether the running tasks that are not parked wait in the backend's queue behind
        the parked ones: nothing has happened for a while, and parked tasks that have not
        ended where they run hold every CPU (Ray runs at most that many at once, and
        queues the rest)."""
        slots = self.backend.num_slots(THREAD)
        if self.backend.max_in_flight(THREAD) <= slots or len(parked) < slots:
            return False
        if time.monotonic() - self._last_event < QUEUED_STANDSTILL_AFTER_S:
            return False
        holding = [w for w in parked if self.backend.holds_slot(getattr(w, "task_id", -1))]
        return len(holding) >= slots

    def _handle(self, event: tuple) -> None:
        kind, task_id, payload, meta = event
        op = self.runtime.owner(task_id)
        if op is None:
            return
        try:
            op.on_task_event(task_id, kind, payload, meta)
        finally:
            if kind in (DONE, ERROR):
                self.runtime.task_finished(task_id)
                self._update_bar(op)

    def _update_bar(self, op: PhysicalOperator) -> None:
        if self._progress is not None:
            self._progress.update()

    def _cancel_all(self) -> None:
        for op in self._ops:
            if not op.cancelled:
                op.cancel()
        self.budget.wake()

    def _wait_for_running(self, timeout_s: float) -> None:
        start = time.monotonic()
        while not self._may_return(start) and time.monotonic() - start < max(timeout_s, 600):
            try:
                event = self._events.get(timeout=_WAIT_S)
            except queue.Empty:
                continue
            try:
                self._handle(event)
            except BaseException:
                pass


def _ancestors(op: PhysicalOperator) -> list[PhysicalOperator]:
    """``op`` and every operator upstream of it."""
    found = [op]
    for upstream in op.input_ops:
        found.extend(_ancestors(upstream))
    return found
