"""Per-operator progress bars, shown only on a terminal and when not turned off."""

from __future__ import annotations

import sys

from shardflow.engine.execution.stats import OperatorStats


class ProgressBars:
    """One bar per operator, counting finished tasks and rows out."""

    def __init__(
        self,
        operators: list[OperatorStats],
        totals: list[int | None],
        enabled: bool,
        shown: list[bool] | None = None,
    ):
        self._bars: dict = {}
        if not (enabled and sys.stderr.isatty()):
            return
        from tqdm.auto import tqdm

        shown = shown or [True] * len(operators)
        visible = [i for i, show in enumerate(shown) if show]
        for position, index in enumerate(visible):
            op, total = operators[index], totals[index]
            self._bars[index] = tqdm(
                total=total,
                desc=f"- {op.name}",
                position=position,
                unit=" tasks",
                leave=True,
                dynamic_ncols=True,
                file=sys.stderr,
            )

    def update(self, index: int, op: OperatorStats, total: int | None = None) -> None:
        bar = self._bars.get(index)
        if bar is None:
            return
        if total is not None and bar.total != total:
            bar.total = total
        bar.n = op.tasks_finished
        bar.set_postfix_str(f"{op.rows_out} rows", refresh=False)
        bar.refresh()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars = {}
