"""The union operator: the rows of several inputs, one after the other."""

from __future__ import annotations

from collections import deque

from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle


class UnionOperator(PhysicalOperator):
    """Concatenates its inputs' streams.

    When order is preserved, every block of input 0 comes first, then input 1, and so on
    (later inputs run meanwhile and wait here); otherwise blocks pass as they come.
    """

    def __init__(self, name: str, inputs: list[PhysicalOperator]):
        super().__init__(name, inputs)
        self._buffers: list[deque[RefBundle]] = [deque() for _ in inputs]
        self._current = 0

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.stats.mark_started()
        self.stats.rows_out += bundle.num_rows
        self.stats.bytes_out += bundle.meta.size_bytes or 0
        self._buffers[input_index].append(bundle)

    def _advance(self) -> None:
        while (
            self._current < len(self._buffers) - 1
            and not self._buffers[self._current]
            and self._inputs_done[self._current]
        ):
            self._current += 1

    def has_next(self) -> bool:
        if not self.runtime.preserve_order:
            return any(self._buffers)
        self._advance()
        return bool(self._buffers[self._current])

    def get_next(self) -> RefBundle:
        if not self.runtime.preserve_order:
            return next(b for b in self._buffers if b).popleft()
        return self._buffers[self._current].popleft()

    def completed(self) -> bool:
        return (self.cancelled or self.inputs_complete) and not any(self._buffers)

    def held_bytes(self) -> int:
        return sum(b.charge for buf in self._buffers for b in buf)

    def cancel(self) -> None:
        super().cancel()
        for buf in self._buffers:
            for bundle in buf:
                self.runtime.budget.release(bundle.charge)
            buf.clear()
