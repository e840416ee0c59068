"""The map operator: one task per input (a read task or a block) through fused stages."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Iterable, List, Optional

from shardflow.engine.operators.base import PhysicalOperator
from shardflow.engine.operators.pooled import PooledOperator
from shardflow.engine.refs import RefBundle


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
    """

    def __init__(
        self,
        name: str,
        input_op: PhysicalOperator,
        transform: Any,
        kind: str = "thread",
        min_rows_per_task: Optional[int] = None,
    ):
        super().__init__(name, [input_op])
        self.transform = transform
        self.kind = kind
        self.min_rows_per_task = min_rows_per_task
        self._queue: Deque[RefBundle] = deque()
        self._queued_rows = 0
        self.inputs_received = 0

    def _input_drained(self) -> bool:
        return not self._queue

    def _pending_input(self) -> Iterable[RefBundle]:
        return self._queue

    def _clear_input(self) -> None:
        self._queue.clear()
        self._queued_rows = 0

    # -- inputs -------------------------------------------------------------------------

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        if self.cancelled:
            self.runtime.budget.release(bundle.charge)
            return
        self._queue.append(bundle)
        self._queued_rows += bundle.num_rows
        self.inputs_received += 1

    def next_task_kind(self) -> Optional[str]:
        if not self._queue or self.cancelled:
            return None
        need = self.min_rows_per_task
        if need and not self.inputs_complete and self._queued_rows < need:
            return None
        # A read task makes new data: start one only while the budget has room for a block.
        if self._queue[0].is_lazy and not self.runtime.budget.has_room(self._pool.est_block_bytes):
            return None
        return self.kind

    def launch_next(self) -> None:
        taken = [self._queue.popleft()]
        rows = taken[0].num_rows
        need = self.min_rows_per_task
        while need and rows < need and self._queue:
            taken.append(self._queue.popleft())
            rows += taken[-1].num_rows
        self._queued_rows -= rows
        # A task over one source item is known by that item's index (stable across runs).
        name = taken[0].source_index if len(taken) == 1 else None
        self._pool.launch(self.transform, taken, self.kind, name_index=name)

    def has_pending_work(self, kind: str) -> bool:
        return kind == self.kind and (bool(self._queue) or bool(self._pool.running))

    def ready_input_bytes(self) -> int:
        need = self.min_rows_per_task
        if need and not self.inputs_complete and self._queued_rows < need:
            return 0
        return sum(b.charge for b in self._queue) or (1 if self._queue else 0)

    @property
    def stages(self) -> List[Any]:
        return list(getattr(self.transform, "stages", []))
