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
    peak_rss: int | None = None  # bytes, whole process tree, over the measured span
    other_cores: float | None = None  # cores busy with other work while the child ran
    unavailable: str | None = None  # why the system cannot run this benchmark
    warning: str | None = None  # e.g. the child crashed at exit after printing its result


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
    peak_rss: float | None = None
    unavailable: str | None = None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(
    bench: Benchmark, systems: Sequence[str], measurements: Sequence[Measurement]
) -> list[Summary]:
    out = []
    for system in systems:
        mine = [m for m in measurements if m.benchmark == bench.name and m.system == system]
        ok = [m for m in mine if m.error is None and m.unavailable is None]
        missing = next((m.unavailable for m in mine if m.unavailable), None)
        out.append(
            Summary(
                benchmark=bench.name,
                system=system,
                seconds=_median([m.seconds for m in ok]),
                spawn_to_result_s=_median([m.spawn_to_result_s for m in ok]),
                runs=len(ok),
                failures=len([m for m in mine if m.error is not None]),
                all_seconds=[m.seconds for m in ok],
                peak_rss=_median([m.peak_rss for m in ok]),
                unavailable=missing,
            )
        )
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


def _fastest(summaries: Sequence[Summary], systems: Sequence[str]) -> float | None:
    times = [s.seconds for s in summaries if s.system in systems and s.seconds]
    return min(times) if times else None


def table_rows(
    bench: Benchmark, summaries: Sequence[Summary], scale: float
) -> list[tuple[str, ...]]:
    """Cells of the table for one benchmark: one row per system."""
    rows = bench.rows(scale) if bench.rows else None
    ray_time = next((s.seconds for s in summaries if s.system == RAY_DATA), None)
    peer_time = _fastest(summaries, bench.peers)
    cells = []
    for s in summaries:
        vs_ray = vs_peer = "-"
        if ray_time is not None and s.seconds:
            vs_ray = f"{ray_time / s.seconds:.2f}x"
        if peer_time is not None and s.seconds:
            vs_peer = f"{s.seconds / peer_time:.2f}"
        runs = f"{s.runs}" + (f" ({s.failures} failed)" if s.failures else "")
        if s.unavailable and not s.runs:
            runs = "n/a"
        cells.append(
            (
                bench.name,
                s.system,
                _fmt_s(s.seconds),
                _fmt_s(min(s.all_seconds) if s.all_seconds else None),
                "-" if s.peak_rss is None else f"{s.peak_rss / 2**20:.0f}",
                _fmt_rate(rows, s.seconds),
                _fmt_s(s.spawn_to_result_s),
                vs_peer,
                vs_ray,
                runs,
            )
        )
    return cells


HEADER = (
    "bench",
    "system",
    "time s",
    "best s",
    "peak RSS MiB",
    "rows/s",
    "spawn->result s",
    "time/best peer",
    "vs ray-data",
    "runs",
)


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
    by_metric = {
        "time": {s.system: s.seconds for s in summaries if s.seconds is not None},
        "rss": {s.system: s.peak_rss for s in summaries if s.peak_rss is not None},
    }
    unavailable = {s.system: s.unavailable for s in summaries if s.unavailable and not s.runs}
    out = []
    for target in bench.targets:
        values = by_metric[target.metric]
        ratio = target.ratio(values)
        if ratio is None:
            if target.system in values:  # every reference is missing
                blamed = [s for s in target.references() if s in unavailable]
            else:
                blamed = [target.system] if target.system in unavailable else []
            if blamed:
                why = "; ".join(f"{s} not available ({unavailable[s]})" for s in blamed)
            else:
                needed = " or ".join(target.references())
                why = f"{target.system} and {needed} both needed"
            out.append(("SKIP", f"{target.label}: not measured ({why})"))
            continue
        out.append(
            (
                "PASS" if target.passed(ratio) else "MISS",
                f"{target.label}: {target.describe(ratio, values)}",
            )
        )
    return out


def unavailable_lines(measurements: Sequence[Measurement]) -> list[str]:
    """One ``N/A`` line per (benchmark, system) that could not run, with the reason, and one
    ``WARN`` line per run that completed but ended badly."""
    seen: dict[tuple[str, str], str] = {}
    for m in measurements:
        if m.unavailable:
            seen.setdefault((m.benchmark, m.system), m.unavailable)
    lines = [f"N/A {bench} {system}: {why}" for (bench, system), why in seen.items()]
    lines += [
        f"WARN {m.benchmark} {m.system} run {m.repeat + 1}: {m.warning}"
        for m in measurements
        if m.warning
    ]
    return lines


def load_line(measurements: Sequence[Measurement]) -> str:
    """How busy the machine was with other work while the children ran."""
    loads = [m.other_cores for m in measurements if m.other_cores is not None]
    if not loads:
        return "machine: no load measured"
    return (
        f"machine: other work kept {statistics.mean(loads):.2f} cores busy on average "
        f"while the children ran (max {max(loads):.2f} over one run)"
    )


def check_results(bench: Benchmark, measurements: Sequence[Measurement], scale: float) -> list[str]:
    """Error messages from the benchmark's check, run once per repeat over its systems."""
    if bench.check is None:
        return []
    errors = []
    repeats = sorted({m.repeat for m in measurements if m.benchmark == bench.name})
    for repeat in repeats:
        results = {
            m.system: m.result
            for m in measurements
            if m.benchmark == bench.name
            and m.repeat == repeat
            and m.error is None
            and m.unavailable is None
        }
        if results:
            message = bench.check(results, scale)
            if message:
                errors.append(f"repeat {repeat + 1}: {message}")
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table and verdicts again from a ``run.py --json`` file."""
    import argparse
    import json

    from registry import all_benchmarks

    parser = argparse.ArgumentParser(description="Re-print the table of a run.py --json file.")
    parser.add_argument("path")
    parser.add_argument("--scale", type=float, default=1.0, help="the scale of that run")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    with open(args.path) as f:
        measurements = [Measurement(**m) for m in json.load(f)]
    registry = all_benchmarks()
    rows, lines = [], []
    for name in dict.fromkeys(m.benchmark for m in measurements):
        bench = registry[name]
        systems = [
            s
            for s in bench.systems
            if any(m.system == s and m.benchmark == name for m in measurements)
        ]
        summaries = summarize(bench, systems, measurements)
        rows += table_rows(bench, summaries, args.scale)
        lines += [f"{verdict} {text}" for verdict, text in verdicts(bench, summaries)]
        lines += [f"WRONG {e}" for e in check_results(bench, measurements, args.scale)]
    lines += unavailable_lines(measurements)
    print(format_markdown(rows) if args.markdown else format_text(rows))
    print("\n".join(["", *lines, load_line(measurements)]))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
