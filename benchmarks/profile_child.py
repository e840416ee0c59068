"""Profile one benchmark child with py-spy and print where its CPU time goes.

    python benchmarks/profile_child.py B4                       # shardflow-local, full size
    python benchmarks/profile_child.py B11-CSV --scale 0.5 --native --top 30
    python benchmarks/profile_child.py B4 --system ray-data --raw /tmp/b4.txt

The child is the one ``run.py`` spawns (``child.py BENCH SYSTEM SCALE``), sampled on every
thread (``py-spy record --threads``; ``--native`` adds C/C++ frames such as Arrow's readers).
py-spy leaves out idle threads, so a sample is a thread on a CPU. Samples from the child's
start-up (imports, starting the system) and from the read-back after the clock stops are left
out; what remains is the measured pipeline. The summary gives, per function, the share of
those samples in which it is on the stack (inclusive) and at the top (self), and how many
cores were busy on average. py-spy comes with the bench extra (``make bench``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from registry import SHARDFLOW_LOCAL, all_benchmarks
from run import CHILD, RESULT_PREFIX, child_env
from systems import interpreter

# Main-thread frames that are not the measured pipeline: start-up before the clock, checks after.
OUTSIDE_PIPELINE = (
    "start_shardflow",
    "start_ray_data",
    "import_engine",
    "summarize_output",
    "summarize_shuffled",
    "prepare (",
    "ensure_input",
    "shutdown (",
    "warm_up (",
)
# The family's ``run`` function: main-thread samples count only beneath it.
FAMILY_RUN = re.compile(r"^run \(.*b\d+_\w+\.py")
FRAME_LINE = re.compile(r":\d+\)$")
# A stack whose innermost frame outside libc is one of these is a thread waiting (for a lock,
# the GIL, a queue or Arrow's executor), not computing; with --native py-spy counts those too.
WAITING = (
    "PyThread_acquire_lock_timed",
    "condition_variable::wait",
    "Condition.wait (",
    "sem_wait",
    "SimpleQueue_get_impl",
    "take_gil",
)


def parse_raw(lines: Iterable[str]) -> list[tuple[str, list[str], int]]:
    """py-spy's raw format: ``process PID:"cmd";thread (TID): name;frame;...;frame COUNT`` per
    line. Returns ``(thread name, frames outermost first, count)``; the main thread is always
    named ``MainThread`` (py-spy leaves it unnamed in some modes; its TID is the PID)."""
    samples = []
    for line in lines:
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        thread_index = next((i for i, p in enumerate(parts) if p.startswith("thread (")), None)
        if thread_index is None:
            continue
        head, _, name = parts[thread_index].partition(": ")
        pid = re.match(r"process (\d+)", parts[0])
        tid = re.match(r"thread \((?:0x[0-9a-f]+ )?(\d+)\)", head)
        if pid and tid and pid.group(1) == tid.group(1):
            name = "MainThread"
        samples.append((name or head, parts[thread_index + 1 :], int(count)))
    return samples


def in_pipeline(thread: str, frames: Sequence[str]) -> bool:
    if thread != "MainThread":
        return True  # the engine's threads only ever run the pipeline
    if not any(FAMILY_RUN.match(f) for f in frames):
        return False  # start-up before ``run``, or the interpreter shutting down
    return not any(marker in f for f in frames for marker in OUTSIDE_PIPELINE)


def _name(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``: one entry per function."""
    frame = FRAME_LINE.sub(")", frame)
    head, sep, where = frame.partition(" (")
    return f"{head} ({where.rsplit('/', 1)[-1]}" if sep else frame


def is_waiting(frames: Sequence[str]) -> bool:
    inner = next((f for f in reversed(frames) if "(libc.so" not in f), "")
    return any(marker in inner for marker in WAITING)


def summarize(samples: list[tuple[str, list[str], int]], top: int) -> dict:
    pipeline = [(t, f, c) for t, f, c in samples if in_pipeline(t, f)]
    kept = [(t, f, c) for t, f, c in pipeline if not is_waiting(f)]
    waiting = sum(c for _, _, c in pipeline) - sum(c for _, _, c in kept)
    total = sum(c for _, _, c in kept) or 1
    inclusive: collections.Counter = collections.Counter()
    self_time: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    for thread, frames, count in kept:
        names = [_name(f) for f in frames]
        for name in set(names):
            inclusive[name] += count
        if names:
            self_time[names[-1]] += count
        threads[re.sub(r"_\d+$", "_N", thread)] += count

    def share(counter: collections.Counter) -> list[tuple[str, float]]:
        return [(name, round(100 * n / total, 1)) for name, n in counter.most_common(top)]

    return {
        "samples": total,
        "waiting": waiting,
        "dropped": sum(c for _, _, c in samples) - total - waiting,
        "threads": share(threads),
        "inclusive": share(inclusive),
        "self": share(self_time),
    }


def record(bench: str, system: str, scale: float, rate: int, native: bool, raw_path: str) -> dict:
    """Run the child under py-spy; returns the child's result line."""
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(py_spy):
        raise SystemExit("py-spy is not installed: run `make bench` or pip install py-spy")
    command = [
        py_spy,
        "record",
        "--format",
        "raw",
        "--threads",
        "--rate",
        str(rate),
        "--output",
        raw_path,
        "--subprocesses",
    ]
    # Without --native, py-spy need not pause the child for each sample.
    command.append("--native" if native else "--nonblocking")
    command += ["--", interpreter(system), CHILD, bench, system, repr(scale)]
    done = subprocess.run(
        command, capture_output=True, text=True, env=child_env(), cwd=HERE, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the profiled child failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", help="e.g. B4, B11-CSV")
    parser.add_argument("--system", default=SHARDFLOW_LOCAL)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rate", type=int, default=100, help="samples per second per thread")
    parser.add_argument("--native", action="store_true", help="include C/C++ frames")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--raw", help="keep py-spy's raw output at this path")
    parser.add_argument(
        "--summarize", metavar="RAW", help="only summarize a raw file kept earlier with --raw"
    )
    args = parser.parse_args(argv)
    name = args.benchmark.upper()
    if name not in all_benchmarks():
        parser.error(f"unknown benchmark {name!r}; choose from {sorted(all_benchmarks())}")
    with tempfile.TemporaryDirectory() as tmp:
        raw_path = args.summarize or args.raw or os.path.join(tmp, "profile.txt")
        result = (
            {}
            if args.summarize
            else record(name, args.system, args.scale, args.rate, args.native, raw_path)
        )
        with open(raw_path) as f:
            summary = summarize(parse_raw(f), args.top)
    seconds = result.get("seconds") or 0.0
    cores = summary["samples"] / (args.rate * seconds) if seconds else 0.0
    print(
        f"{name} {args.system} scale {args.scale:g}: {seconds:.3f} s under py-spy, "
        f"{summary['samples']} samples computing in the pipeline (~{cores:.2f} cores), "
        f"{summary['waiting']} waiting, {summary['dropped']} outside it"
    )
    for title in ("threads", "inclusive", "self"):
        print(f"\n{title} (% of pipeline samples):")
        for entry, pct in summary[title]:
            print(f"  {pct:5.1f}  {entry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
