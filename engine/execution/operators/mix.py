"""The mix operator: blocks of several inputs interleaved toward target row ratios."""

from __future__ import annotations

from collections import deque

from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.refs import RefBundle


class MixOperator(PhysicalOperator):
    """Passes whole blocks, always from the input furthest behind its share of the rows.

    The choice depends only on the rows passed so far, never on which input's block arrives
    first: when the input that is furthest behind has no block yet, the operator waits for
    it rather than take another input's. So the output is the same on every run and on both
    backends (as in Ray Data, which chooses the same way: ties go to the larger weight, then
    to the earlier input).

    Args:
        name: The operator's name.
        inputs: The input operators, in the order of ``weights``.
        weights: Positive target ratios of rows, one per input (normalized here).
        stop_on_shortest: Stop when the input whose turn it is has run out (its stream
            ended and every block it sent was passed); otherwise an exhausted input drops
            out and the others go on until all are exhausted. Either way the output does
            not depend on when an input's end is noticed: Ray Data stops as soon as it
            notices that any input has run out, which gives the same rows when the inputs'
            blocks are ready before their ends are noticed (data in memory) and may stop
            earlier otherwise.
    """

    def __init__(
        self,
        name: str,
        inputs: list[PhysicalOperator],
        weights: list[float],
        stop_on_shortest: bool,
    ):
        super().__init__(name, inputs)
        total = float(sum(weights))
        self._weights = [w / total for w in weights]
        self._stop_on_shortest = stop_on_shortest
        self._buffers: list[deque[RefBundle]] = [deque() for _ in inputs]
        self._rows_passed = [0] * len(inputs)
        self._ready: deque[RefBundle] = deque()
        self._stopped = False

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        self.stats.mark_started()
        if self._stopped:
            self.runtime.budget.release(bundle.charge)
            return
        self._buffers[input_index].append(bundle)
        self._move()

    def input_done(self, input_index: int) -> None:
        super().input_done(input_index)
        self._move()

    def _exhausted(self, index: int) -> bool:
        return self._inputs_done[index] and not self._buffers[index]

    def _furthest_behind(self) -> int | None:
        """The input that is furthest behind its share of the rows passed so far (among
        those not exhausted, unless stopping on the shortest); None when none is left."""
        total = sum(self._rows_passed)
        best: int | None = None
        best_gap = 0.0
        for index, weight in enumerate(self._weights):
            if not self._stop_on_shortest and self._exhausted(index):
                continue
            gap = weight * total - self._rows_passed[index]
            if best is None or gap > best_gap or (gap == best_gap and weight > self._weights[best]):
                best, best_gap = index, gap
        return best

    def _move(self) -> None:
        while not self._stopped:
            index = self._furthest_behind()
            if index is None:
                return  # every input is exhausted
            if not self._buffers[index]:
                if self._stop_on_shortest and self._inputs_done[index]:
                    self._stop()
                return  # else wait for the input whose turn it is
            bundle = self._buffers[index].popleft()
            self._rows_passed[index] += bundle.num_rows
            self.stats.rows_out += bundle.num_rows
            self.stats.bytes_out += bundle.meta.size_bytes or 0
            self._ready.append(bundle)

    def _stop(self) -> None:
        """Stop on the shortest input: what the other inputs hold or send is dropped."""
        self._stopped = True
        for buffer in self._buffers:
            for bundle in buffer:
                self.runtime.budget.release(bundle.charge)
            buffer.clear()

    def needs_more_input(self) -> bool:
        return not self._stopped

    def has_next(self) -> bool:
        return bool(self._ready)

    def get_next(self) -> RefBundle:
        return self._ready.popleft()

    def completed(self) -> bool:
        done = (
            self.cancelled
            or self._stopped
            or all(self._exhausted(i) for i in range(len(self._buffers)))
        )
        return done and not self._ready

    def held_bytes(self) -> int:
        queued = sum(b.charge for buffer in self._buffers for b in buffer)
        return queued + sum(b.charge for b in self._ready)

    def cancel(self) -> None:
        super().cancel()
        for bundle in self._ready:
            self.runtime.budget.release(bundle.charge)
        self._ready.clear()
        for buffer in self._buffers:
            for bundle in buffer:
                self.runtime.budget.release(bundle.charge)
            buffer.clear()
