"""Progress of an execution: tqdm bars on a terminal, a log line every few seconds elsewhere.

One bar for the dataset (rows delivered against the rows expected) and, with
``ExecutionOptions.verbose_progress`` (the default), one per operator: rows out against an
estimated total, bytes out, and the operator's state (its tasks; an actor pool's actors
starting, running and idle and the inputs waiting for them; an exchange's map and reduce
steps). Without ``verbose_progress`` only exchanges get bars of their own, as in Ray Data.
Totals are estimated from what is known before running (row counts of read tasks and
blocks) and from the tasks finished so far; an operator's bar ends at its true count.

When stderr is not a terminal (a batch job, a CI log), nothing is drawn: every
``DataContext.progress_log_interval_s`` seconds one progress report is logged on the logger
``shardflow.progress`` (to stderr unless logging is configured), and a last one when the
execution ends, if it ran long enough to report at all.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from shardflow.engine.execution.stats import ExecutionStats, fmt_bytes

logger = logging.getLogger("shardflow.progress")
#: Shortest time between two redraws of the bars.
_REDRAW_S = 0.2


def estimated_rows(op: Any, memo: dict[int, int | None] | None = None) -> int | None:
    """The rows ``op`` will output in all, estimated from its inputs and finished tasks."""
    memo = {} if memo is None else memo
    key = id(op)
    if key not in memo:
        memo[key] = None  # a cycle cannot happen in a DAG; this guards the recursion anyway
        inputs = [estimated_rows(upstream, memo) for upstream in op.input_ops]
        known = None if any(v is None for v in inputs) or not inputs else sum(inputs)
        memo[key] = op.estimated_output_rows(known)
    return memo[key]


class ProgressReporter:
    """Shows the progress of one execution; ``update()`` from the scheduling thread.

    Args:
        operators: Every operator of the plan, upstream first.
        shown: The operators that appear in stats (the last one's rows are the dataset's).
        stats: The execution's statistics (rows delivered to the consumer).
        context: The execution's DataContext.
        terminal: Draw bars (None: when stderr is a terminal).
    """

    def __init__(
        self,
        operators: list[Any],
        shown: list[Any],
        stats: ExecutionStats,
        context: Any,
        terminal: bool | None = None,
    ):
        self._operators = operators
        self._stats = stats
        self._enabled = context.progress_bars_enabled() and bool(operators)
        self._terminal = _stderr_is_terminal() if terminal is None else terminal
        verbose = context.execution_options.verbose_progress
        per_operator = context.enable_operator_progress_bars
        self._bar_ops = [
            op
            for op in shown
            if per_operator and getattr(op, "runs_tasks", False) and (verbose or op.phased_progress)
        ]
        self._interval = float(context.progress_log_interval_s)
        self._started = time.monotonic()
        self._last = 0.0
        self._last_log = self._started
        self._logged = False
        self._bars: list[Any] = []
        self._overall: Any = None
        if self._enabled and self._terminal:
            self._open_bars()

    # -- terminal -------------------------------------------------------------------------

    def _open_bars(self) -> None:
        from tqdm.auto import tqdm

        common = {"unit": " row", "unit_scale": True, "dynamic_ncols": True, "file": sys.stderr}
        self._overall = tqdm(desc="Running", position=0, leave=True, **common)
        for position, op in enumerate(self._bar_ops, 1):
            self._bars.append(tqdm(desc=f"- {op.name}", position=position, leave=True, **common))

    def update(self, force: bool = False) -> None:
        """Redraw the bars (at most every 0.2 s unless ``force``), or log a report when its
        interval has passed."""
        if not self._enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < _REDRAW_S:
            return
        self._last = now
        if self._terminal:
            self._draw()
        elif now - self._last_log >= self._interval:
            self._last_log = now
            self._log()

    def _draw(self) -> None:
        memo: dict[int, int | None] = {}
        total = estimated_rows(self._operators[-1], memo)
        _set(self._overall, self._stats.rows_out, total, "")
        for bar, op in zip(self._bars, self._bar_ops):
            stats = op.stats
            state = op.progress_detail()
            detail = f"{fmt_bytes(stats.bytes_out)}" + (f", {state}" if state else "")
            _set(bar, stats.rows_out, estimated_rows(op, memo), detail)

    def report(self) -> str:
        """The progress as text: the dataset's line, then one line per operator."""
        memo: dict[int, int | None] = {}
        elapsed = time.monotonic() - self._started
        total = estimated_rows(self._operators[-1], memo)
        lines = [f"Running dataset: {_rows(self._stats.rows_out, total)} rows in {elapsed:.1f}s"]
        for op in self._bar_ops:
            stats = op.stats
            state = op.progress_detail()
            line = (
                f"  - {op.name}: {_rows(stats.rows_out, estimated_rows(op, memo))} rows, "
                f"{fmt_bytes(stats.bytes_out)}"
            )
            lines.append(line + (f", {state}" if state else ""))
        return "\n".join(lines)

    def _log(self) -> None:
        _ensure_visible(logger)
        logger.info("%s", self.report())
        self._logged = True

    def close(self, finished: bool) -> None:
        """End the display: bars are completed (or left where they stopped); a logged
        execution gets a last report."""
        if not self._enabled:
            return
        if self._terminal:
            if finished:
                self._draw()
                for bar, op in zip([self._overall, *self._bars], [None, *self._bar_ops]):
                    done = self._stats.rows_out if op is None else op.stats.rows_out
                    _set(bar, done, done, None)
            for bar in [self._overall, *self._bars]:
                if bar is not None:
                    bar.close()
            self._bars, self._overall = [], None
        elif self._logged:
            _ensure_visible(logger)
            word = "finished" if finished else "stopped"
            logger.info("%s\nExecution %s.", self.report(), word)


def _set(bar: Any, n: int, total: int | None, detail: str | None) -> None:
    if bar is None:
        return
    if total is not None and total < n:
        total = n  # an estimate already passed: the true count is at least n
    if bar.total != total:
        bar.total = total
    bar.n = n
    if detail is not None:
        bar.set_postfix_str(detail, refresh=False)
    bar.refresh()


def _rows(n: int, total: int | None) -> str:
    if total is None:
        return f"{n:,}"
    total = max(total, n)
    percent = 100.0 * n / total if total else 100.0
    return f"{n:,}/{total:,} ({percent:.0f}%)"


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _ensure_visible(log: logging.Logger) -> None:
    """Progress reports are INFO records: make sure they reach stderr when the application
    configured no logging at all (then Python would print only warnings)."""
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s shardflow: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
