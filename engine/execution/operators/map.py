"""The map operator: one task per input (a read task or a block) through fused stages."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from shardflow.engine.api.compute import DEFAULT_MAP_OPTIONS, MapOptions
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.pooled import PooledOperator
from shardflow.engine.execution.refs import RefBundle


class MapOperator(PooledOperator):
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
        options: The stage's MapOptions (engine/api/compute.py): resources of each task on Ray;
            ``max_retries`` and ``retry_exceptions`` of its Ray remote arguments bound the
            retries of a failed task (else ``DataContext.max_task_retries``, worker crashes
            only), by its pool or, for Ray tasks, by Ray (see TaskPool._retry).
    """

    def __init__(
        self,
        name: str,
        input_op: PhysicalOperator,
        transform: Any,
        kind: str = "thread",
        min_rows_per_task: int | None = None,
        max_concurrency: int | None = None,
        options: MapOptions | None = None,
    ):
        super().__init__(name, [input_op])
        self.transform = transform
        self.kind = kind
        self.min_rows_per_task = min_rows_per_task
        self.max_concurrency = max_concurrency
        self.options = options or DEFAULT_MAP_OPTIONS
        remote = self.options.ray_remote_args
        self.max_task_retries: int | None = remote.get("max_retries")
        self.retry_exceptions = remote.get("retry_exceptions", False)
        self._queue: deque[RefBundle] = deque()
        self._queued_rows = 0
        self._queued_charge = 0  # a running total: asked for every scheduling round
        self.inputs_received = 0

    def _input_drained(self) -> bool:
        return not self._queue

    def _pending_input(self) -> Iterable[RefBundle]:
        return self._queue

    def _clear_input(self) -> None:
        self._queue.clear()
        self._queued_rows = 0
        self._queued_charge = 0

    # -- inputs -------------------------------------------------------------------------

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        if self.cancelled:
            self.runtime.budget.release(bundle.charge)
            return
        self._queue.append(bundle)
        self._queued_rows += bundle.num_rows
        self._queued_charge += bundle.charge
        self.inputs_received += 1

    def next_task_kind(self) -> str | None:
        if self.cancelled or not self._has_task_ready():
            return None
        if self.max_concurrency is not None and len(self._pool.running) >= self.max_concurrency:
            return None
        return self.kind

    def _has_task_ready(self) -> bool:
        """Whether inputs for a task (or a task to run again) are waiting, within the budget."""
        if self._pool.retry_queue:
            return True
        if not self._queue:
            return False
        need = self.min_rows_per_task
        if need and not self.inputs_complete and self._queued_rows < need:
            return False
        # A read task makes new data: start one only while the budget has room for a block.
        lazy = self._queue[0].is_lazy
        return not (lazy and not self.runtime.has_room(self, self._pool.est_block_bytes))

    def _take_inputs(self) -> list[RefBundle]:
        """The input bundles of the next task (enough rows for ``min_rows_per_task``)."""
        taken = [self._queue.popleft()]
        rows = taken[0].num_rows
        need = self.min_rows_per_task
        while need and rows < need and self._queue:
            taken.append(self._queue.popleft())
            rows += taken[-1].num_rows
        self._queued_rows -= rows
        self._queued_charge -= sum(b.charge for b in taken)
        return taken

    def launch_next(self) -> None:
        taken = self._take_inputs()
        # A task over one source item is known by that item's index (stable across runs).
        name = taken[0].source_index if len(taken) == 1 else None
        remote_args = self.options.remote_args() if self.runtime.backend.name == "ray" else None
        self._pool.launch(
            self.transform, taken, self.kind, name_index=name, remote_args=remote_args
        )

    def has_pending_work(self, kind: str) -> bool:
        return kind == self.kind and (
            bool(self._queue) or bool(self._pool.running) or bool(self._pool.retry_queue)
        )

    def ready_input_bytes(self) -> int:
        need = self.min_rows_per_task
        if need and not self.inputs_complete and self._queued_rows < need:
            return 0
        return self._queued_charge or (1 if self._queue else 0)

    # -- progress -----------------------------------------------------------------------

    def expected_tasks(self) -> int | None:
        if self.min_rows_per_task:
            return None
        if self.inputs_complete:
            return self.inputs_received
        upstream = self.input_ops[0]
        return getattr(upstream, "num_items", None) if not upstream.input_ops else None

    def progress_detail(self) -> str:
        expected = self.expected_tasks()
        running = len(self._pool.running) if self._pool is not None else 0
        done = self.stats.tasks_finished
        return f"{running} running, {done}/{expected if expected is not None else '?'} tasks"

    @property
    def stages(self) -> list[Any]:
        return list(getattr(self.transform, "stages", []))
