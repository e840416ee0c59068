"""The limit operator: passes the first ``limit`` rows, then needs no more input."""

from __future__ import annotations

from collections import deque

from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle, slice_metadata, slice_ref


class LimitOperator(PhysicalOperator):
    """Truncates the stream on the driver; the block that crosses the limit is cut lazily.

    Once the limit is reached ``needs_more_input`` turns False, and the executor stops every
    operator upstream.
    """

    def __init__(self, name: str, input_op: PhysicalOperator, limit: int):
        super().__init__(name, [input_op])
        self.limit = limit
        self.remaining = limit
        self._ready: deque[RefBundle] = deque()
        self._emitted = False

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.stats.mark_started()
        if self.remaining <= 0:
            if not self._emitted:  # ``limit(0)``: one empty block still carries the schema
                self._emitted = True
                self._ready.append(
                    RefBundle(
                        slice_ref(bundle.ref, 0, 0),
                        slice_metadata(bundle.meta, 0, 0),
                        bundle.charge,
                    )
                )
                return
            self.runtime.budget.release(bundle.charge)
            return
        rows = bundle.num_rows
        if rows > self.remaining:
            # The slice keeps the whole block alive, so it keeps the whole charge.
            bundle = RefBundle(
                slice_ref(bundle.ref, 0, self.remaining),
                slice_metadata(bundle.meta, 0, self.remaining),
                bundle.charge,
            )
            rows = self.remaining
        self.remaining -= rows
        self.stats.rows_out += rows
        self.stats.bytes_out += bundle.meta.size_bytes or 0
        self._emitted = True
        self._ready.append(bundle)

    def needs_more_input(self) -> bool:
        return self.remaining > 0 or not self._emitted

    def has_next(self) -> bool:
        return bool(self._ready)

    def get_next(self) -> RefBundle:
        return self._ready.popleft()

    def completed(self) -> bool:
        done = self.inputs_complete or self.cancelled or not self.needs_more_input()
        return done and not self._ready

    def held_bytes(self) -> int:
        return sum(b.charge for b in self._ready)

    def cancel(self) -> None:
        super().cancel()
        for bundle in self._ready:
            self.runtime.budget.release(bundle.charge)
        self._ready.clear()

    def estimated_output_rows(self, input_rows: int | None) -> int | None:
        if self.stats.finished_at is not None:
            return self.stats.rows_out
        return self.limit if input_rows is None else min(self.limit, input_rows)
