"""Run shardflow's benchmarks side by side with Ray Data and bare NumPy, in one command.

    python benchmarks/run.py                       # everything, full size
    python benchmarks/run.py --scale 0.05          # quick smoke run
    python benchmarks/run.py --only B2 --repeat 3  # one benchmark, median of three
    python benchmarks/run.py --systems shardflow-local,ray-data

Each measurement runs in its own fresh Python process, so imports and start-up are paid for
real and no run shares state with another. Each child prints one JSON line; this process
collects them and prints a table of times and ratios, the PASS/MISS verdict of each target,
and whether every system computed the same result (a disagreement exits with status 1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from monitor import TreeMonitor
from registry import DAFT, Benchmark, all_benchmarks, select
from report import (
    Measurement,
    check_results,
    format_markdown,
    format_text,
    load_line,
    summarize,
    table_rows,
    unavailable_lines,
    verdicts,
)
from systems import interpreter

CHILD = os.path.join(HERE, "child.py")
RESULT_PREFIX = '{"benchmark"'
SAMPLE_INTERVAL_S = 0.05


def child_env() -> dict[str, str]:
    """The child's environment: Ray on loopback only, a fresh Ray per child, no bars."""
    env = dict(os.environ)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"
    # "local" makes ray.init start its own instance rather than join one found on the machine.
    env["RAY_ADDRESS"] = "local"
    # Modules load from cached bytecode, as from an installed wheel (see compile_sources).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_sources() -> None:
    """Compile shardflow's modules to bytecode once, before any child runs.

    pip compiles an installed package's modules at install time; an editable install (or an
    environment with PYTHONDONTWRITEBYTECODE) would otherwise make every fresh child compile
    shardflow's sources again (tens of milliseconds no user pays twice).
    """
    import compileall
    import importlib.util

    for name in ("shardflow", "shardflow.engine", "shardflow.sdk", "shardflow.connectors"):
        try:
            spec = importlib.util.find_spec(name)
        except ImportError:
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, quiet=2)


def _stop_group(proc: subprocess.Popen) -> None:
    """End the child we started and everything in its process group (its Ray, its workers)."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def measure(
    bench: Benchmark, system: str, scale: float, repeat: int, timeout_s: float
) -> Measurement:
    """Spawn one child for ``(bench, system)``, sample its process tree, and read its JSON line."""
    m = Measurement(bench.name, system, repeat)
    spawned = time.time()
    proc = subprocess.Popen(
        [interpreter(system), CHILD, bench.name, system, repr(scale)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
        start_new_session=True,
    )
    monitor = TreeMonitor(proc.pid, interval_s=SAMPLE_INTERVAL_S)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        out, err = proc.communicate()
        m.error = f"timed out after {timeout_s:g} s"
        return m
    finally:
        usage = monitor.stop()
        m.other_cores = usage.other_cores
    lines = [line for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        tail = "\n".join(err.strip().splitlines()[-15:])
        m.error = f"exit code {proc.returncode}, no result line\n{tail}"
        return m
    if proc.returncode != 0:
        # The measurement is complete; the crash came while the process shut down.
        m.warning = f"exit code {proc.returncode} after printing its result"
    data = json.loads(lines[-1])
    if data.get("unavailable"):
        m.unavailable = data["unavailable"]
        return m
    m.result = data.get("result")
    m.spawn_to_result_s = data["t_result"] - spawned
    m.seconds = m.spawn_to_result_s if bench.from_spawn else data["seconds"]
    # Peak memory over the measured span only (not over imports before it nor read-backs after).
    start = spawned if bench.from_spawn else data["t_result"] - data["seconds"]
    peaks = [
        usage.peak_rss(start, data["t_result"], slack_s=2 * SAMPLE_INTERVAL_S),
        data.get("peak_rss_self"),
    ]
    m.peak_rss = max((p for p in peaks if p), default=None)
    return m


def _versions(systems: set[str]) -> str:
    parts = []
    for dist in ("shardflow", "ray", "pyarrow", "numpy", "pandas", "polars", "duckdb"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} (not installed)")
    if DAFT in systems:
        parts.append(f"daft {_daft_version()}")
    return ", ".join(parts)


def _daft_version() -> str:
    """Daft's version in the interpreter that runs it (it may live in a venv of its own)."""
    code = (
        "from importlib import metadata as m\n"
        "try: print(m.version('daft'), 'with pyarrow', m.version('pyarrow'))\n"
        "except m.PackageNotFoundError: print('(not installed)')"
    )
    try:
        done = subprocess.run(
            [interpreter(DAFT), "-c", code], capture_output=True, text=True, timeout=60, check=False
        )
        return done.stdout.strip() or "(unknown)"
    except (OSError, subprocess.SubprocessError):
        return "(unknown)"


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    registry = all_benchmarks()
    systems = sorted({s for b in registry.values() for s in b.systems})
    parser = argparse.ArgumentParser(
        description="shardflow benchmarks against Ray Data and bare NumPy, each run in a fresh process.",
        epilog="benchmarks: " + "; ".join(f"{b.name}: {b.title}" for b in registry.values()),
    )
    parser.add_argument(
        "--only", default="", help="comma-separated benchmarks, e.g. B1,B2 (default: all)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="multiply the data sizes (0.05 for a smoke run; B1 is fixed)",
    )
    parser.add_argument(
        "--systems",
        default="",
        help=f"comma-separated systems to run (default: all); from {', '.join(systems)}",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="fresh runs per measurement; the table shows the median",
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per child")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--json", metavar="PATH", help="write every measurement to PATH as JSON")
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error(f"--scale must be > 0, got {args.scale}")
    if args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    if not args.timeout > 0:
        parser.error(f"--timeout must be > 0, got {args.timeout}")
    try:
        args.benchmarks = select(args.only.split(","))
    except ValueError as exc:
        parser.error(str(exc))
    args.system_filter = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in args.system_filter if s not in systems]
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {systems}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = [
        (b, [s for s in b.systems if not args.system_filter or s in args.system_filter])
        for b in args.benchmarks
    ]
    started = datetime.datetime.now().astimezone()
    print(
        f"shardflow benchmarks, {started:%Y-%m-%d %H:%M %Z}; machine: {_cores()} cores, "
        f"load average {os.getloadavg()[0]:.2f}; Python {platform.python_version()}"
    )
    print(
        f"{_versions({s for _, systems in plan for s in systems})}; "
        f"scale {args.scale:g}, repeat {args.repeat}"
    )
    print()
    compile_sources()

    for bench, systems in plan:
        if bench.prepare is not None and systems:
            print(f"[{bench.name} preparing input data ...]", end="", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            bench.prepare(args.scale)
            print(f" {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)

    measurements: list[Measurement] = []
    for repeat in range(args.repeat):
        for bench, systems in plan:
            for system in systems:
                label = f"[{bench.name} {system} run {repeat + 1}/{args.repeat}]"
                print(f"{label} ...", end="", file=sys.stderr, flush=True)
                m = measure(bench, system, args.scale, repeat, args.timeout)
                measurements.append(m)
                shown = (
                    "FAILED"
                    if m.error
                    else "not available"
                    if m.unavailable
                    else f"{m.seconds:.3f} s"
                )
                print(f" {shown}", file=sys.stderr, flush=True)

    rows, lines, failed = [], [], False
    for bench, systems in plan:
        summaries = summarize(bench, systems, measurements)
        rows += table_rows(bench, summaries, args.scale)
        lines += [f"{verdict} {text}" for verdict, text in verdicts(bench, summaries)]
        for error in check_results(bench, measurements, args.scale):
            lines.append(f"WRONG {error}")
            failed = True
    for m in measurements:
        if m.error:
            lines.append(f"ERROR {m.benchmark} {m.system} run {m.repeat + 1}: {m.error}")
            failed = True
    lines += unavailable_lines(measurements)

    print()
    for bench, _ in plan:
        peers = f" [peers: {', '.join(bench.peers)}]" if bench.peers else ""
        print(f"{bench.name}: {bench.title}{peers}")
    print()
    print(format_text(rows))
    if args.markdown:
        print()
        print(format_markdown(rows))
    print()
    print("\n".join(lines) if lines else "(no targets)")
    if not failed:
        print("results: every system returned the same, correct result")
    print(load_line(measurements))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([m.__dict__ for m in measurements], f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
