"""Timing checks: properties measured in seconds, kept out of the test suite.

The test suite asserts no elapsed time, so that it passes on a loaded machine; what used to
be timed there is measured here, against the thresholds those tests had. Run it on a quiet
machine; every line shows the load average it ran under.

    .venv/bin/python benchmarks/timing_checks.py            # the local backend
    .venv/bin/python benchmarks/timing_checks.py --ray      # and the Ray backend

Exit code 0 when every check met its threshold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import shardflow as sf


@dataclass
class Result:
    name: str
    value: float
    threshold: float
    unit: str

    @property
    def ok(self) -> bool:
        return self.value < self.threshold


def training_loop_wait_fraction() -> float:
    """Share of a training loop's time spent waiting for iter_torch_batches (10 ms steps)."""
    import torch

    def normalize(batch):
        images = batch["data"].astype(np.float32) / 255.0
        return {"image": images, "label": batch["data"][:, 0, 0, 0] % 10}

    ds = sf.range_tensor(6400, shape=(3, 16, 16), override_num_blocks=16).map_batches(normalize)
    batches = iter(
        ds.iter_torch_batches(batch_size=64, prefetch_batches=4, dtypes={"label": torch.int64})
    )
    next(batches)  # the pipeline's start is not part of the steady state
    waited, start = 0.0, time.perf_counter()
    while True:
        asked = time.perf_counter()
        try:
            next(batches)
        except StopIteration:
            break
        waited += time.perf_counter() - asked
        time.sleep(0.01)  # the training step
    return waited / (time.perf_counter() - start)


def plan_ten_thousand_files() -> float:
    """Seconds to plan a read of 10,000 small files in 100 folders."""
    from shardflow.connectors.text import TextDatasource

    with tempfile.TemporaryDirectory() as root:
        for i in range(100):
            folder = os.path.join(root, f"d{i:03d}")
            os.makedirs(folder)
            for j in range(100):
                with open(os.path.join(folder, f"f{j:03d}.txt"), "w") as f:
                    f.write(f"{i * 100 + j}\n")
        start = time.perf_counter()
        tasks = TextDatasource(root).get_read_tasks(16)
        elapsed = time.perf_counter() - start
    assert len(tasks) == 16
    return elapsed


def _slow_rows(row):
    if row["id"] > 0:
        time.sleep(30)
    return row


def _slow_batches(batch):
    if batch["id"][0] > 0:
        time.sleep(30)
    return batch


def satisfied_take(kind: str) -> Callable[[], float]:
    def measure() -> float:
        """Seconds for take(1) when the other tasks take 30 s (workers start included)."""
        ds = sf.range(8, override_num_blocks=8)
        ds = ds.map(_slow_rows) if kind == "process" else ds.map_batches(_slow_batches)
        start = time.perf_counter()
        assert ds.take(1) == [{"id": 0}]
        return time.perf_counter() - start

    return measure


async def _async_double(batch):
    await asyncio.sleep(0.2)
    return {"id": batch["id"] * 2}


def async_batches() -> float:
    """Seconds for 8 batches of an async function sleeping 0.2 s each (4 run at a time)."""
    start = time.perf_counter()
    ds = sf.range(40, override_num_blocks=1).map_batches(_async_double, batch_size=5)
    assert len(ds.take_batch(40)["id"]) == 40
    return time.perf_counter() - start


CHECKS: list[tuple[str, Callable[[], float], float, str]] = [
    ("training loop waits for batches", training_loop_wait_fraction, 0.10, "of its time"),
    ("plan 10,000 small files", plan_ten_thousand_files, 3.0, "s"),
    ("take(1) beside 30 s process tasks", satisfied_take("process"), 4.0, "s"),
    ("take(1) beside 30 s thread tasks", satisfied_take("thread"), 3.0, "s"),
    ("8 async batches of 0.2 s, 4 at a time", async_batches, 8 * 0.2 * 0.75, "s"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray", action="store_true", help="also run on the Ray backend")
    args = parser.parse_args(argv)
    os.environ.setdefault("SHARDFLOW_DISABLE_PROGRESS_BARS", "1")
    backends = ["local"] + (["ray"] if args.ray else [])
    results: list[tuple[str, Result, tuple[float, float, float]]] = []
    for backend in backends:
        if backend == "ray":
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            sf.init(backend="ray", num_cpus=2)
        for name, measure, threshold, unit in CHECKS:
            value = measure()
            results.append((backend, Result(name, value, threshold, unit), os.getloadavg()))
    failed = 0
    for backend, result, load in results:
        failed += not result.ok
        print(
            f"{'ok  ' if result.ok else 'SLOW'} [{backend}] {result.name}: {result.value:.3f} "
            f"{result.unit} (threshold {result.threshold:g}; load average "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores)"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
