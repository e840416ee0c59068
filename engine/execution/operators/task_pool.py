"""Running an operator's tasks: launching, memory gates, and outputs in task order.

Every operator that runs tasks (map, actor map, exchange) keeps one ``TaskPool``. The pool launches tasks
through the executor's runtime, gives each a gate on the memory budget, collects the blocks
each task produces, and hands them out in task order when order is preserved.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shardflow.engine.execution.backends.base import Retries
from shardflow.engine.execution.backends.task_runner import BLOCK, DONE, ERROR
from shardflow.engine.execution.errors import WorkerCrashedError, is_retryable
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle
from shardflow.engine.execution.stats import TaskRecord

logger = logging.getLogger(__name__)


@dataclass
class PoolTask:
    task_id: int
    index: int
    inputs: list[RefBundle]
    spilled: bool
    started: float = field(default_factory=time.perf_counter)
    transform: Any = None
    kind: str = "thread"
    wait: bool = True
    name_index: int | None = None  # the index the task is known by (TaskContext.task_idx)
    attempt: int = 0
    skip: int = 0  # blocks a rerun produces again that its failed attempt already delivered
    actor: Any = None  # the actor it runs on (actor pools)
    remote_args: dict[str, Any] | None = None  # its resources on Ray
    retried_by_backend: bool = False  # the backend runs it again after failures, not the pool
    rows: int = 0  # what this attempt produced
    bytes: int = 0
    launched_at: float = field(default_factory=time.time)  # driver's clock, for the timeline


def is_worker_crash(failure: Any) -> bool:
    """Whether a task failure (a TaskFailure) is the death of its worker, not a user error."""
    original = failure.original() if hasattr(failure, "original") else None
    return isinstance(original, WorkerCrashedError)


class BudgetGate:
    """The gate of one task: room in the memory budget before each block it produces.

    Blocks are reserved at the size of the largest block the operator has produced so far.
    When order is preserved, the oldest running task (the head) may pass a full budget while
    its consumer waits with nothing it can work on and no block of the head is on its way:
    blocks of later tasks may fill the budget while they wait for the head, and only the head
    can break that. The others leave room for one block of the head.
    """

    def __init__(self, pool: TaskPool, task: PoolTask):
        self._pool = pool
        self._task = task
        self._index = task.index
        self._reserved = 0
        self._produced = 0

    @property
    def op(self) -> PhysicalOperator:
        """The operator whose task waits here (the executor grants the most downstream)."""
        return self._pool.op

    @property
    def index(self) -> int:
        """The task's position in its operator (the oldest is granted first)."""
        return self._index

    @property
    def task_id(self) -> int:
        """The backend's id of the task that waits here."""
        return self._task.task_id

    def _is_head(self) -> bool:
        return self._pool.ordered and self._pool.head == self._index

    def _exempt(self) -> bool:
        # A block of the head still on its way downstream feeds the consumer and frees room
        # when taken: until then the head waits like any other task.
        on_its_way = self._produced > self._pool.delivered.get(self._index, 0)
        return (
            self._is_head()
            and not on_its_way
            and self._pool.runtime.downstream_starved(self._pool.op)
        )

    def _cancelled(self) -> bool:
        return self._pool.runtime.cancelled.is_set() or self._pool.op.cancelled

    def cancelled(self) -> bool:
        """Whether the task should stop (handed to the task as TaskContext.cancelled)."""
        return self._cancelled()

    def acquire(self) -> bool:
        est = self._pool.est_block_bytes
        headroom = est if self._pool.ordered and not self._is_head() else 0
        budget = self._pool.runtime.budget
        ok = budget.reserve(est, self._exempt, self._cancelled, headroom, waiter=self)
        self._reserved = est if ok else 0
        return ok

    def produced(self, nbytes: int) -> None:
        self._pool.runtime.budget.commit(self._reserved, nbytes)
        self._reserved = 0
        self._produced += 1
        if nbytes > self._pool.est_block_bytes:
            self._pool.est_block_bytes = nbytes

    def unused(self) -> None:
        if self._reserved:
            self._pool.runtime.budget.unreserve(self._reserved)
            self._reserved = 0


class SpillGate:
    """The gate of a task whose blocks go to disk: they take no room in the budget."""

    def __init__(self, pool: TaskPool):
        self._pool = pool

    def cancelled(self) -> bool:
        return self._pool.runtime.cancelled.is_set() or self._pool.op.cancelled

    def acquire(self) -> bool:
        return not self.cancelled()

    def produced(self, nbytes: int) -> None:
        pass

    def unused(self) -> None:
        pass


class CountingGate(SpillGate):
    """The gate of a task that replaces its input with an output of about the same size (an
    exchange's prepare task): it never waits, but its blocks count in the budget. Waiting
    there could deadlock, because its input is only released when it ends."""

    def produced(self, nbytes: int) -> None:
        self._pool.runtime.budget.add(nbytes)


class TaskPool:
    """The running tasks of one operator and the blocks they produced.

    Args:
        op: The operator owning the tasks (their events name it).
        ordered: Hand out blocks in task order (else as they come).
        counts_output: Whether its blocks are the operator's output in stats (an exchange's
            prepared runs are not).
        relaunch_by_operator: A task to run again goes to ``retry_queue``, for the operator
            to launch (on an actor of its choice), instead of being started at once.
    """

    def __init__(
        self,
        op: PhysicalOperator,
        ordered: bool,
        counts_output: bool = True,
        relaunch_by_operator: bool = False,
        phase: str = "",
    ):
        self.op = op
        self.phase = phase
        self.ordered = ordered
        self.counts_output = counts_output
        self.relaunch_by_operator = relaunch_by_operator
        self.retry_queue: deque[PoolTask] = deque()
        self.running: dict[int, PoolTask] = {}
        self.outputs: dict[int, deque[RefBundle]] = {}
        self.finished: set[int] = set()
        self.head = 0
        self.next_index = 0
        self.est_block_bytes = 0
        self.queued_bytes = 0
        self.delivered: dict[int, int] = {}

    @property
    def runtime(self) -> Any:
        return self.op.runtime

    def launch(
        self,
        transform: Any,
        inputs: list[RefBundle],
        kind: str,
        *,
        spill: bool = False,
        wait: bool = True,
        name_index: int | None = None,
        actor: Any = None,
        remote_args: dict[str, Any] | None = None,
    ) -> PoolTask:
        """Start a task of ``transform`` over ``inputs`` (their charges are released at its end).

        ``spill`` stores its blocks on local disk; ``wait=False`` lets it produce without
        waiting for room in the budget (its blocks still count); ``name_index`` is the index
        the task is known by (``TaskContext.task_idx``; its launch order when None);
        ``actor`` runs it on that actor; ``remote_args`` are its resources on Ray.
        """
        index = self.next_index
        self.next_index += 1
        task = PoolTask(
            -1,
            index,
            inputs,
            spill,
            transform=transform,
            kind=kind,
            wait=wait,
            name_index=name_index,
            actor=actor,
            remote_args=remote_args,
        )
        task = self._start(task)
        self.outputs.setdefault(index, deque())
        stats = self.op.stats
        stats.tasks += 1
        stats.phase(self.phase).tasks += 1
        stats.mark_started()
        return task

    def relaunch(self, task: PoolTask, actor: Any = None) -> PoolTask:
        """Start another attempt of a task taken from ``retry_queue`` (on ``actor``)."""
        task.actor = actor
        return self._start(task)

    def _start(self, task: PoolTask) -> PoolTask:
        if task.spilled:
            gate: Any = SpillGate(self)
        elif not task.wait:
            gate = CountingGate(self)
        else:
            gate = BudgetGate(self, task)
        spill_dir = self.runtime.spill_dir() if task.spilled else None
        name = task.index if task.name_index is None else task.name_index
        task.retried_by_backend = self.runtime.backend.retries_failed_tasks(task.kind, task.actor)
        task.task_id = self.runtime.launch(
            self.op,
            task.transform,
            [b.ref for b in task.inputs],
            task.kind,
            gate,
            name,
            spill_dir,
            actor=task.actor,
            remote_args=task.remote_args,
            retries=self._retries_left(task),
        )
        task.started = time.perf_counter()
        task.launched_at = time.time()
        task.rows = task.bytes = 0
        self.running[task.task_id] = task
        return task

    def on_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        task = self.running.get(task_id)
        if task is None:
            return
        stats = self.op.stats
        if event == BLOCK:
            bundle = RefBundle(payload, meta, 0 if task.spilled else meta.size_bytes or 0)
            if self.op.cancelled or task.skip:
                task.skip = max(0, task.skip - 1)  # a rerun's block its failed attempt delivered
                self.runtime.budget.release(bundle.charge)
                return
            self.outputs[task.index].append(bundle)
            task.rows += meta.num_rows or 0
            task.bytes += meta.size_bytes or 0
            stats.phase(self.phase).rows += meta.num_rows or 0
            self.queued_bytes += bundle.charge
            stats.peak_queued_bytes = max(stats.peak_queued_bytes, self.queued_bytes)
            if self.counts_output:
                stats.rows_out += meta.num_rows or 0
                stats.bytes_out += meta.size_bytes or 0
            if task.spilled:
                stats.bytes_spilled += meta.size_bytes or 0
        elif event == DONE:
            if payload:  # per-task counters (sdk.task_stats), e.g. files skipped as unreadable
                stats.skipped_files += payload.get("skipped_files", 0)
                stats.tasks_retried += payload.get("task_retries", 0)  # by the backend
                if "node" in payload:  # the Ray node it ran on
                    stats.tasks_per_node[payload["node"]] += 1
            self._finish(task, (payload or {}).get("timing"))
        elif event == ERROR:
            if self.op.cancelled:
                self._finish(task)
            elif self._retry(task, payload):
                return
            elif self._skip_errored(task, payload):
                self._finish(task)
            else:
                self._finish(task)
                raise payload.to_exception()

    # -- failures -------------------------------------------------------------------------

    def _retry(self, task: PoolTask, failure: Any) -> bool:
        """Run a failed task again on the same inputs, when its error allows and attempts
        remain; the blocks its failed attempt already delivered are dropped from the rerun.

        A task its backend retries itself (Ray tasks) failed for good: it is never run again
        here, so that a failure is retried once, not by both.
        """
        if task.retried_by_backend:
            return False
        error = failure.original() if hasattr(failure, "original") else None
        if task.attempt >= self._max_retries() or not self._retryable(error):
            return False
        del self.running[task.task_id]
        self.runtime.task_finished(task.task_id)
        for bundle in self.outputs.get(task.index, ()):
            self.queued_bytes -= bundle.charge
            self.runtime.budget.release(bundle.charge)
        self.outputs[task.index] = deque()
        task.attempt += 1
        task.skip = self.delivered.get(task.index, 0)
        self.op.stats.tasks_retried += 1
        most = self._max_retries()
        logger.warning(
            "%s: a task failed (%s: %s); running it again (attempt %d of %s).",
            self.op.name,
            type(error).__name__,
            error,
            task.attempt + 1,
            "unbounded" if most == float("inf") else int(most) + 1,
        )
        if self.relaunch_by_operator:
            self.retry_queue.append(task)
        else:
            self._start(task)
        return True

    def _max_retries(self) -> float:
        own = getattr(self.op, "max_task_retries", None)
        most = self.runtime.context.max_task_retries if own is None else own
        return float("inf") if most < 0 else most

    def _retryable(self, error: BaseException | None) -> bool:
        return is_retryable(error, getattr(self.op, "retry_exceptions", False))

    def _retries_left(self, task: PoolTask) -> Retries:
        """What a backend that retries tasks itself may still do for ``task``."""
        most = self._max_retries()
        left = -1 if most == float("inf") else max(0, int(most) - task.attempt)
        allowed = getattr(self.op, "retry_exceptions", False)
        if isinstance(allowed, list):
            allowed = tuple(allowed)
        return Retries(left, allowed)

    def _skip_errored(self, task: PoolTask, failure: Any) -> bool:
        """With DataContext.max_errored_blocks, a failed task's blocks are skipped (and
        counted) instead of failing the whole execution."""
        limit = self.runtime.context.max_errored_blocks
        if limit == 0 or (limit > 0 and self.runtime.errored_blocks >= limit):
            return False
        self.runtime.errored_blocks += 1
        self.op.stats.errored_blocks += 1
        for bundle in self.outputs.get(task.index, ()):
            self.queued_bytes -= bundle.charge
            self.runtime.budget.release(bundle.charge)
        self.outputs[task.index] = deque()
        logger.warning(
            "%s: skipping a failed task (%s).", self.op.name, failure.message.splitlines()[0]
        )
        return True

    def _finish(self, task: PoolTask, timing: dict[str, Any] | None = None) -> None:
        if timing is not None or not self.op.cancelled:
            self._record(task, timing)
        del self.running[task.task_id]
        self.runtime.task_finished(task.task_id)
        self.finished.add(task.index)
        for bundle in task.inputs:
            self.runtime.budget.release(bundle.charge)
        stats = self.op.stats
        stats.tasks_finished += 1
        stats.phase(self.phase).finished += 1
        stats.task_time_s += time.perf_counter() - task.started

    def _record(self, task: PoolTask, timing: dict[str, Any] | None) -> None:
        """Keep the task for stats() and the timeline: as the worker measured it, or as the
        driver saw it when the worker reported nothing."""
        timing = timing or {}
        record = TaskRecord(
            operator=self.op.name,
            index=task.index if task.name_index is None else task.name_index,
            start=timing.get("start", task.launched_at),
            end=timing.get("end", time.time()),
            cpu_s=timing.get("cpu_s"),
            rows=task.rows,
            bytes=task.bytes,
            pid=timing.get("pid"),
            thread=timing.get("thread", 0),
            worker=_worker_name(timing, task),
            node=timing.get("node", ""),
            peak_rss=timing.get("peak_rss"),
            phase=self.phase,
            attempt=task.attempt,
        )
        self.op.stats.task_records.append(record)

    def pop_ready(self) -> Iterator[RefBundle]:
        """Blocks ready to go downstream: all of them, or in task order when ordered."""
        if not self.ordered:
            for index in list(self.outputs):
                queue_ = self.outputs[index]
                while queue_:
                    yield self._take(queue_, index)
                if index in self.finished:
                    del self.outputs[index]
            return
        while self.head in self.outputs:
            queue_ = self.outputs[self.head]
            while queue_:
                yield self._take(queue_, self.head)
            if self.head in self.finished:
                del self.outputs[self.head]
                self.head += 1
            else:
                break

    def pop_finished(self) -> list[tuple[int, list[RefBundle]]]:
        """(task index, all its blocks) for every task that has finished since the last call."""
        done = []
        for index in sorted(i for i in self.outputs if i in self.finished):
            bundles = list(self.outputs.pop(index))
            for bundle in bundles:
                self.queued_bytes -= bundle.charge
            done.append((index, bundles))
        return done

    def _take(self, queue_: deque[RefBundle], index: int) -> RefBundle:
        bundle = queue_.popleft()
        self.queued_bytes -= bundle.charge
        self.delivered[index] = self.delivered.get(index, 0) + 1
        return bundle

    @property
    def has_outputs(self) -> bool:
        return any(self.outputs.values()) or any(i in self.finished for i in self.outputs)

    @property
    def idle(self) -> bool:
        """No task running and no block waiting."""
        return not self.running and not self.outputs

    def cancel(self) -> None:
        """Cancel running tasks and release every block waiting here."""
        for task_id in list(self.running):
            self.runtime.cancel_task(task_id)
        for queue_ in self.outputs.values():
            for bundle in queue_:
                self.runtime.budget.release(bundle.charge)
        self.outputs = {i: deque() for i in self.outputs if i not in self.finished}
        self.queued_bytes = 0

    def held_bytes(self) -> int:
        return self.queued_bytes + sum(b.charge for t in self.running.values() for b in t.inputs)


def _worker_name(timing: dict[str, Any], task: PoolTask) -> str:
    if not timing:
        return "driver"
    kind = "actor" if task.actor is not None else task.kind
    return f"{kind} {timing.get('thread_name', '')} (pid {timing.get('pid')})".replace("  ", " ")


def peek_lazy(bundles: deque[RefBundle]) -> bool | None:
    """Whether the next queued input is lazy (a read task), or None when none is queued."""
    return bundles[0].is_lazy if bundles else None
