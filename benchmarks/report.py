"""Turning measurements into the printed table, the target verdicts and the result checks."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from registry import RAY_DATA, Benchmark


@dataclass
class Measurement:
    """One child's outcome."""

    benchmark: str
    system: str
    repeat: int
    seconds: float | None = None
    spawn_to_result_s: float | None = None
    result: Any = None
    error: str | None = None


@dataclass
class Summary:
    """Median over the successful repeats of one (benchmark, system)."""

    benchmark: str
    system: str
    seconds: float | None
    spawn_to_result_s: float | None
    runs: int
    failures: int
    all_seconds: list[float] = field(default_factory=list)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(bench: Benchmark, systems: Sequence[str],
              measurements: Sequence[Measurement]) -> list[Summary]:
    out = []
    for system in systems:
        mine = [m for m in measurements if m.benchmark == bench.name and m.system == system]
        ok = [m for m in mine if m.error is None]
        out.append(Summary(
            benchmark=bench.name,
            system=system,
            seconds=_median([m.seconds for m in ok]),
            spawn_to_result_s=_median([m.spawn_to_result_s for m in ok]),
            runs=len(ok),
            failures=len(mine) - len(ok),
            all_seconds=[m.seconds for m in ok],
        ))
    return out


def _fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _fmt_rate(rows: int | None, seconds: float | None) -> str:
    if rows is None or not seconds:
        return "-"
    rate = rows / seconds
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= size:
            return f"{rate / size:.1f}{unit}"
    return f"{rate:.0f}"


def table_rows(bench: Benchmark, summaries: Sequence[Summary], scale: float) -> list[tuple[str, ...]]:
    """Cells of the table for one benchmark: one row per system."""
    rows = bench.rows(scale) if bench.rows else None
    ray_time = next((s.seconds for s in summaries if s.system == RAY_DATA), None)
    cells = []
    for s in summaries:
        vs_ray = "-"
        if ray_time is not None and s.seconds:
            vs_ray = f"{ray_time / s.seconds:.2f}x"
        runs = f"{s.runs}" + (f" ({s.failures} failed)" if s.failures else "")
        cells.append((
            bench.name,
            s.system,
            _fmt_s(s.seconds),
            _fmt_rate(rows, s.seconds),
            _fmt_s(s.spawn_to_result_s),
            vs_ray,
            runs,
        ))
    return cells


HEADER = ("bench", "system", "time s", "rows/s", "spawn->result s", "vs ray-data", "runs")


def format_text(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [HEADER, *rows]) for i in range(len(HEADER))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(HEADER, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def format_markdown(rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def verdicts(bench: Benchmark, summaries: Sequence[Summary]) -> list[tuple[str, str]]:
    """``(PASS|MISS|SKIP, sentence)`` for each target of ``bench``."""
    times = {s.system: s.seconds for s in summaries if s.seconds is not None}
    out = []
    for target in bench.targets:
        ratio = target.ratio(times)
        if ratio is None:
            missing = f"{target.system} and {target.reference} both needed"
            out.append(("SKIP", f"{target.label}: not measured ({missing})"))
            continue
        out.append(("PASS" if target.passed(ratio) else "MISS",
                    f"{target.label}: {target.describe(ratio)}"))
    return out


def check_results(bench: Benchmark, measurements: Sequence[Measurement], scale: float) -> list[str]:
    """Error messages from the benchmark's check, run once per repeat over its systems."""
    if bench.check is None:
        return []
    errors = []
    repeats = sorted({m.repeat for m in measurements if m.benchmark == bench.name})
    for repeat in repeats:
        results = {m.system: m.result for m in measurements
                   if m.benchmark == bench.name and m.repeat == repeat and m.error is None}
        if results:
            message = bench.check(results, scale)
            if message:
                errors.append(f"repeat {repeat + 1}: {message}")
    return errors
