"""The zip operator: the columns of several inputs side by side, row by row (streaming)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.backends.base import THREAD
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.pooled import PooledOperator
from shardflow.engine.execution.refs import RefBundle, resolve, slice_metadata, slice_ref


class ZipColumns:
    """Task: one row range of every input, their columns joined (duplicates renamed)."""

    def __call__(self, inputs: list[Any], ctx: Any) -> Any:
        columns: dict = {}
        repeats: dict = {}
        for item in inputs:
            block = resolve(item)
            for name in block.column_names:
                out = name
                if name in columns or name in repeats:
                    repeats[name] = repeats.get(name, 0) + 1
                    out = f"{name}_{repeats[name]}"
                columns[out] = block.column(name)
        yield pa.table(columns)


class ZipOperator(PooledOperator):
    """Zips its inputs' streams; each output block covers the rows where no input block ends.

    Raises ValueError naming the row counts when the inputs differ in length.
    """

    always_ordered = True  # rows of all inputs line up only in order

    def __init__(self, name: str, inputs: list[PhysicalOperator]):
        super().__init__(name, inputs)
        self._pending: list[deque[RefBundle]] = [deque() for _ in inputs]
        self._offsets = [0] * len(inputs)
        self._rows = [0] * len(inputs)
        self.inputs_received = 0

    def _input_drained(self) -> bool:
        return not any(self._pending)

    def _pending_input(self) -> Iterable[RefBundle]:
        return [b for queue_ in self._pending for b in queue_]

    def _clear_input(self) -> None:
        for queue_ in self._pending:
            queue_.clear()

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.inputs_received += 1
        self._rows[input_index] += bundle.num_rows
        if bundle.num_rows == 0:
            self.runtime.budget.release(bundle.charge)
            return
        self._pending[input_index].append(bundle)

    def all_inputs_done(self) -> None:
        if len(set(self._rows)) > 1:
            counts = ", ".join(str(r) for r in self._rows)
            raise ValueError(f"Cannot zip datasets of different number of rows: {counts}")

    def next_task_kind(self) -> str | None:
        if self.cancelled or not all(self._pending):
            return None
        return THREAD

    def launch_next(self) -> None:
        length = min(q[0].num_rows - off for q, off in zip(self._pending, self._offsets))
        pieces = []
        for i, queue_ in enumerate(self._pending):
            head = queue_[0]
            piece = RefBundle(
                slice_ref(head.ref, self._offsets[i], length),
                slice_metadata(head.meta, self._offsets[i], length),
                0,
            )
            self._offsets[i] += length
            if self._offsets[i] == head.num_rows:
                queue_.popleft()
                self._offsets[i] = 0
                piece.charge = head.charge  # released when the task using its last rows ends
            pieces.append(piece)
        self._pool.launch(ZipColumns(), pieces, THREAD)

    def ready_input_bytes(self) -> int:
        if not all(self._pending):
            return 0
        return sum(b.charge for q in self._pending for b in q) or 1

    def has_pending_work(self, kind: str) -> bool:
        return kind == THREAD and (bool(self._pool.running) or all(self._pending))
