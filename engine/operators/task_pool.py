"""Running an operator's tasks: launching, memory gates, outputs in task order, retries.

Every operator that runs tasks (map, actor map, exchange) keeps one ``TaskPool``. The pool
launches tasks through the executor's runtime, gives each a gate on the memory budget,
collects the blocks each task produces, and hands them out in task order when order is
preserved. A task whose worker died (WorkerCrashedError) is queued for another attempt while
``max_retries`` allows; the new attempt keeps the task's place in the order and skips the
blocks the failed attempt had already delivered.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, Iterator, List, Optional, Set, Tuple

from shardflow.engine.backends.task_runner import BLOCK, DONE, ERROR
from shardflow.engine.operators.base import PhysicalOperator
from shardflow.engine.refs import RefBundle


@dataclass
class PoolTask:
    task_id: int
    index: int
    inputs: List[RefBundle]
    spilled: bool
    started: float = field(default_factory=time.perf_counter)
    attempts: int = 0  # retries so far
    delivered: int = 0  # blocks handed on (an attempt after a crash skips as many)
    skip: int = 0


def is_worker_crash(failure: Any) -> bool:
    """Whether a task failure (a TaskFailure) is the death of its worker, not a user error."""
    from shardflow.engine.errors import WorkerCrashedError

    original = failure.original() if hasattr(failure, "original") else None
    return isinstance(original, WorkerCrashedError)


class BudgetGate:
    """The gate of one task: room in the memory budget before each block it produces.

    Blocks are reserved at the size of the largest block the operator has produced so far.
    When order is preserved, the oldest running task (the head) may pass a full budget while
    the consumer has nothing to read, which guarantees progress; the others leave room for
    one block of the head.
    """

    def __init__(self, pool: "TaskPool", index: int):
        self._pool = pool
        self._index = index
        self._reserved = 0

    def _is_head(self) -> bool:
        return self._pool.ordered and self._pool.head == self._index

    def _exempt(self) -> bool:
        return self._is_head() and self._pool.runtime.output_waiting()

    def _cancelled(self) -> bool:
        return self._pool.runtime.cancelled.is_set() or self._pool.op.cancelled

    def acquire(self) -> bool:
        est = self._pool.est_block_bytes
        headroom = est if self._pool.ordered and not self._is_head() else 0
        budget = self._pool.runtime.budget
        ok = budget.reserve(est, self._exempt, self._cancelled, headroom)
        self._reserved = est if ok else 0
        return ok

    def produced(self, nbytes: int) -> None:
        self._pool.runtime.budget.commit(self._reserved, nbytes)
        self._reserved = 0
        if nbytes > self._pool.est_block_bytes:
            self._pool.est_block_bytes = nbytes

    def unused(self) -> None:
        if self._reserved:
            self._pool.runtime.budget.unreserve(self._reserved)
            self._reserved = 0


class SpillGate:
    """The gate of a task whose blocks go to disk: they take no room in the budget."""

    def __init__(self, pool: "TaskPool"):
        self._pool = pool

    def acquire(self) -> bool:
        return not (self._pool.runtime.cancelled.is_set() or self._pool.op.cancelled)

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
    """

    def __init__(
        self, op: PhysicalOperator, ordered: bool, counts_output: bool = True, max_retries: int = 0
    ):
        self.op = op
        self.ordered = ordered
        self.counts_output = counts_output
        self.max_retries = max_retries
        self.retry_queue: Deque[PoolTask] = deque()
        self.running: Dict[int, PoolTask] = {}
        self.outputs: Dict[int, Deque[RefBundle]] = {}
        self.finished: Set[int] = set()
        self.head = 0
        self.next_index = 0
        self.est_block_bytes = 0
        self.queued_bytes = 0

    @property
    def runtime(self) -> Any:
        return self.op.runtime

    def launch(
        self, transform: Any, inputs: List[RefBundle], kind: str, *, spill: bool = False,
        wait: bool = True, actor: Any = None, remote_args: Optional[Dict[str, Any]] = None,
    ) -> PoolTask:
        """Start a task of ``transform`` over ``inputs`` (their charges are released at its end).

        ``spill`` stores its blocks on local disk; ``wait=False`` lets it produce without
        waiting for room in the budget (its blocks still count); ``actor`` runs it on that
        actor; ``remote_args`` are its resources on Ray.
        """
        index = self.next_index
        self.next_index += 1
        task = PoolTask(-1, index, inputs, spill)
        self._start(task, transform, kind, wait, actor, remote_args)
        stats = self.op.stats
        stats.tasks += 1
        stats.mark_started()
        return task

    def relaunch(
        self, task: PoolTask, transform: Any, kind: str, *, wait: bool = True, actor: Any = None,
        remote_args: Optional[Dict[str, Any]] = None,
    ) -> PoolTask:
        """Start another attempt of a task taken from ``retry_queue``."""
        again = PoolTask(-1, task.index, task.inputs, task.spilled, attempts=task.attempts + 1,
                         delivered=task.delivered, skip=task.delivered)
        self._start(again, transform, kind, wait, actor, remote_args)
        return again

    def _start(self, task: PoolTask, transform: Any, kind: str, wait: bool, actor: Any,
               remote_args: Optional[Dict[str, Any]]) -> None:
        if task.spilled:
            gate: Any = SpillGate(self)
        elif not wait:
            gate = CountingGate(self)
        else:
            gate = BudgetGate(self, task.index)
        spill_dir = self.runtime.spill_dir() if task.spilled else None
        task.task_id = self.runtime.launch(
            self.op, transform, [b.ref for b in task.inputs], kind, gate, task.index, spill_dir,
            actor=actor, remote_args=remote_args,
        )
        self.running[task.task_id] = task
        self.outputs.setdefault(task.index, deque())

    def on_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        task = self.running.get(task_id)
        if task is None:
            return
        stats = self.op.stats
        if event == BLOCK:
            bundle = RefBundle(payload, meta, 0 if task.spilled else meta.size_bytes or 0)
            if self.op.cancelled or task.skip:
                task.skip = max(0, task.skip - 1)  # delivered by an attempt that crashed
                self.runtime.budget.release(bundle.charge)
                return
            task.delivered += 1
            self.outputs[task.index].append(bundle)
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
            self._finish(task)
        elif event == ERROR:
            if not self.op.cancelled and self.can_retry(task, payload):
                del self.running[task.task_id]
                self.runtime.task_finished(task.task_id)
                self.retry_queue.append(task)
                return
            self._finish(task)
            if not self.op.cancelled:
                raise payload.to_exception()

    def can_retry(self, task: PoolTask, failure: Any) -> bool:
        """Whether a failed task gets another attempt: its worker died and retries remain."""
        if not is_worker_crash(failure):
            return False
        return self.max_retries < 0 or task.attempts < self.max_retries

    def _finish(self, task: PoolTask) -> None:
        del self.running[task.task_id]
        self.runtime.task_finished(task.task_id)
        self.finished.add(task.index)
        for bundle in task.inputs:
            self.runtime.budget.release(bundle.charge)
        stats = self.op.stats
        stats.tasks_finished += 1
        stats.task_time_s += time.perf_counter() - task.started

    def pop_ready(self) -> Iterator[RefBundle]:
        """Blocks ready to go downstream: all of them, or in task order when ordered."""
        if not self.ordered:
            for index in list(self.outputs):
                queue_ = self.outputs[index]
                while queue_:
                    yield self._take(queue_)
                if index in self.finished:
                    del self.outputs[index]
            return
        while self.head in self.outputs:
            queue_ = self.outputs[self.head]
            while queue_:
                yield self._take(queue_)
            if self.head in self.finished:
                del self.outputs[self.head]
                self.head += 1
            else:
                break

    def pop_finished(self) -> List[Tuple[int, List[RefBundle]]]:
        """(task index, all its blocks) for every task that has finished since the last call."""
        done = []
        for index in sorted(i for i in self.outputs if i in self.finished):
            bundles = list(self.outputs.pop(index))
            for bundle in bundles:
                self.queued_bytes -= bundle.charge
            done.append((index, bundles))
        return done

    def _take(self, queue_: Deque[RefBundle]) -> RefBundle:
        bundle = queue_.popleft()
        self.queued_bytes -= bundle.charge
        return bundle

    @property
    def has_outputs(self) -> bool:
        return any(self.outputs.values()) or any(i in self.finished for i in self.outputs)

    @property
    def idle(self) -> bool:
        """No task running or waiting for a retry, and no block waiting."""
        return not self.running and not self.outputs and not self.retry_queue

    def cancel(self) -> None:
        """Cancel running tasks and release every block waiting here."""
        for task_id in list(self.running):
            self.runtime.cancel_task(task_id)
        while self.retry_queue:
            for bundle in self.retry_queue.popleft().inputs:
                self.runtime.budget.release(bundle.charge)
        for queue_ in self.outputs.values():
            for bundle in queue_:
                self.runtime.budget.release(bundle.charge)
        self.outputs = {i: deque() for i in self.outputs if i not in self.finished}
        self.queued_bytes = 0

    def held_bytes(self) -> int:
        waiting = list(self.running.values()) + list(self.retry_queue)
        return self.queued_bytes + sum(b.charge for t in waiting for b in t.inputs)


def peek_lazy(bundles: "Deque[RefBundle]") -> Optional[bool]:
    """Whether the next queued input is lazy (a read task), or None when none is queued."""
    return bundles[0].is_lazy if bundles else None
