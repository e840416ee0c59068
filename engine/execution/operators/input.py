"""The input operator: the source items of a plan (read tasks, or blocks already in hand)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle


class InputOperator(PhysicalOperator):
    """Emits its source items, in order; runs no tasks and holds no budget.

    Args:
        name: The source's name.
        bundles: The items, each a read task or a block reference with its metadata.
    """

    shown_in_stats = False

    def __init__(self, name: str, bundles: Iterable[RefBundle]):
        super().__init__(name, [])
        self._items = deque(bundles)
        self.num_items = len(self._items)
        rows = [b.meta.num_rows if b.meta is not None else None for b in self._items]
        self.rows_total = None if None in rows else sum(rows)  # type: ignore[arg-type]

    def estimated_output_rows(self, input_rows: int | None) -> int | None:
        return self.rows_total

    def has_next(self) -> bool:
        return bool(self._items) and not self.cancelled

    def get_next(self) -> RefBundle:
        return self._items.popleft()

    def completed(self) -> bool:
        return self.cancelled or not self._items

    def cancel(self) -> None:
        super().cancel()
        self._items.clear()
