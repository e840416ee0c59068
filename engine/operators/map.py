"""The map operator: one task per input (a read task or a block) through fused stages."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, List, Optional

from shardflow.engine.compute import DEFAULT_MAP_OPTIONS, MapOptions
from shardflow.engine.operators.base import PhysicalOperator
from shardflow.engine.operators.task_pool import TaskPool
from shardflow.engine.refs import RefBundle


class MapOperator(PhysicalOperator):
    """Runs ``transform`` over each input in its own task.

    Args:
        name: Shown in progress bars, stats and error messages.
        input_op: The operator feeding this one.
        transform: What each task runs: ``transform(inputs, ctx)`` yields blocks.
        kind: The worker slot tasks need: ``"thread"`` or ``"process"`` (local backend; Ray runs
            both as Ray tasks), or ``"driver"`` for work that must run in the driver process.
        min_rows_per_task: When set, each task takes input blocks until it has this many rows
            (the last task may have fewer).
        max_concurrency: The most tasks of this operator running at once (``concurrency=n``).
        options: The stage's MapOptions (engine/compute.py): resources of each task on Ray,
            retries of a crashed worker's inputs.
    """

    runs_tasks = True

    def __init__(
        self,
        name: str,
        input_op: PhysicalOperator,
        transform: Any,
        kind: str = "thread",
        min_rows_per_task: Optional[int] = None,
        max_concurrency: Optional[int] = None,
        options: Optional[MapOptions] = None,
    ):
        super().__init__(name, [input_op])
        self.transform = transform
        self.kind = kind
        self.min_rows_per_task = min_rows_per_task
        self.max_concurrency = max_concurrency
        self.options = options or DEFAULT_MAP_OPTIONS
        self._queue: Deque[RefBundle] = deque()
        self._queued_rows = 0
        self._ready: Deque[RefBundle] = deque()
        self._pool: Optional[TaskPool] = None
        self.inputs_received = 0

    def start(self, runtime: Any) -> None:
        self._pool = TaskPool(self, runtime.preserve_order, max_retries=self.options.max_retries)
        super().start(runtime)

    # -- inputs -------------------------------------------------------------------------

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        if self.cancelled:
            self.runtime.budget.release(bundle.charge)
            return
        self._queue.append(bundle)
        self._queued_rows += bundle.num_rows
        self.inputs_received += 1

    def next_task_kind(self) -> Optional[str]:
        if self.cancelled or not self._has_task_ready():
            return None
        if self.max_concurrency is not None and len(self._pool.running) >= self.max_concurrency:
            return None
        return self.kind

    def _has_task_ready(self) -> bool:
        """Whether inputs for a task (or a task to retry) are waiting, within the budget."""
        if self._pool.retry_queue:
            return True
        if not self._queue:
            return False
        need = self.min_rows_per_task
        if need and not self.inputs_complete and self._queued_rows < need:
            return False
        # A read task makes new data: start one only while the budget has room for a block.
        lazy = self._queue[0].is_lazy
        return not (lazy and not self.runtime.budget.has_room(self._pool.est_block_bytes))

    def _take_inputs(self) -> List[RefBundle]:
        """The input bundles of the next task (enough rows for ``min_rows_per_task``)."""
        taken = [self._queue.popleft()]
        rows = taken[0].num_rows
        need = self.min_rows_per_task
        while need and rows < need and self._queue:
            taken.append(self._queue.popleft())
            rows += taken[-1].num_rows
        self._queued_rows -= rows
        return taken

    def launch_next(self) -> None:
        remote_args = self.options.remote_args() if self.runtime.backend.name == "ray" else None
        if self._pool.retry_queue:
            self._pool.relaunch(self._pool.retry_queue.popleft(), self.transform, self.kind,
                                remote_args=remote_args)
            return
        self._pool.launch(self.transform, self._take_inputs(), self.kind, remote_args=remote_args)

    def has_pending_work(self, kind: str) -> bool:
        return kind == self.kind and (
            bool(self._queue) or bool(self._pool.running) or bool(self._pool.retry_queue)
        )

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        self._pool.on_event(task_id, event, payload, meta)

    # -- outputs ------------------------------------------------------------------------

    def has_next(self) -> bool:
        if not self._ready:
            self._ready.extend(self._pool.pop_ready())
        return bool(self._ready)

    def get_next(self) -> RefBundle:
        return self._ready.popleft()

    def completed(self) -> bool:
        if self.cancelled:
            return not self._pool.running
        return (
            self.inputs_complete and not self._queue and not self._ready and self._pool.idle
        )

    def held_bytes(self) -> int:
        return sum(b.charge for b in self._queue) + sum(b.charge for b in self._ready) + self._pool.held_bytes()

    def cancel(self) -> None:
        super().cancel()
        for bundle in list(self._queue) + list(self._ready):
            self.runtime.budget.release(bundle.charge)
        self._queue.clear()
        self._ready.clear()
        self._queued_rows = 0
        self._pool.cancel()

    @property
    def stages(self) -> List[Any]:
        return list(getattr(self.transform, "stages", []))
