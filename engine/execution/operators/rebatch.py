"""The rebatch operator: blocks of exactly ``rows`` rows, cut from the stream as it flows.

Used by ``repartition(target_num_rows_per_block=...)``. It is streaming, not a barrier: as soon
as enough rows have arrived, a task joins the pieces of one output block (inputs are cut with
zero-copy slice references).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from shardflow.engine.execution.backends.base import THREAD
from shardflow.engine.execution.exchange.base import gather
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.pooled import PooledOperator
from shardflow.engine.execution.refs import RefBundle, slice_metadata, slice_ref


class _Join:
    def __call__(self, inputs: list[Any], ctx: Any) -> Any:
        yield gather(inputs)


class RebatchOperator(PooledOperator):
    """Re-cuts its input into blocks of ``rows`` rows (the last may be smaller)."""

    def __init__(self, name: str, input_op: PhysicalOperator, rows: int):
        super().__init__(name, [input_op])
        self.rows = rows
        self._pending: deque[RefBundle] = deque()
        self._pending_rows = 0
        self._offset = 0  # rows of the first pending bundle already used
        self.inputs_received = 0

    def _input_drained(self) -> bool:
        return not self._pending

    def _pending_input(self) -> Iterable[RefBundle]:
        return self._pending

    def _clear_input(self) -> None:
        self._pending.clear()
        self._pending_rows = 0

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.inputs_received += 1
        if bundle.num_rows == 0:
            self.runtime.budget.release(bundle.charge)
            return
        self._pending.append(bundle)
        self._pending_rows += bundle.num_rows

    def next_task_kind(self) -> str | None:
        if self.cancelled:
            return None
        if self._pending_rows >= self.rows or (self.inputs_complete and self._pending_rows):
            return THREAD
        return None

    def launch_next(self) -> None:
        want = min(self.rows, self._pending_rows)
        pieces: list[RefBundle] = []
        consumed: list[RefBundle] = []
        while want:
            head = self._pending[0]
            take = min(want, head.num_rows - self._offset)
            pieces.append(
                RefBundle(
                    slice_ref(head.ref, self._offset, take),
                    slice_metadata(head.meta, self._offset, take),
                    0,
                )
            )
            self._offset += take
            want -= take
            self._pending_rows -= take
            if self._offset == head.num_rows:
                consumed.append(self._pending.popleft())
                self._offset = 0
        # A consumed block's charge is released when the task using its last rows ends.
        pieces[-1].charge = sum(b.charge for b in consumed)
        self._pool.launch(_Join(), pieces, THREAD)

    def ready_input_bytes(self) -> int:
        if self.next_task_kind() is None:
            return 0
        return sum(b.charge for b in self._pending) or 1

    def has_pending_work(self, kind: str) -> bool:
        return kind == THREAD and (bool(self._pending) or bool(self._pool.running))
