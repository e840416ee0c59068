"""B2: a vectorized pipeline over ``range(N)``: map_batches -> filter -> sum.

Every system runs ``y = id * 3 + 1``, keeps the even ``y`` and sums them, with the same
batch size (whole blocks, ``batch_size=None``) and ``zero_copy_batch=True`` (the functions do
not modify their input). The filter is a vectorized ``map_batches`` on every system, so all
of them run the same NumPy code. The bare loop does the same arithmetic with NumPy over
chunks of 2**20 ids on two threads. The time covers the pipeline only: imports and cluster
start-up are done before the clock starts (B1 measures those).
"""

from __future__ import annotations

import time
from typing import Any

from registry import (
    NUMPY_2THREADS,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

BASE_ROWS = 50_000_000
BATCH_SIZE = None
CHUNK_ROWS = 1 << 20
NUM_THREADS = 2


def num_rows(scale: float) -> int:
    return max(1, int(BASE_ROWS * scale))


def expected_sum(n: int) -> int:
    """Sum of ``3 * id + 1`` over odd ``id`` in ``[0, n)`` (exactly the even ``y``)."""
    odd = n // 2
    return 3 * odd * odd + odd


def times_three_plus_one(batch: dict[str, Any]) -> dict[str, Any]:
    return {"y": batch["id"] * 3 + 1}


def keep_even(batch: dict[str, Any]) -> dict[str, Any]:
    y = batch["y"]
    return {"y": y[y % 2 == 0]}


def _check(results: dict[str, Any], scale: float) -> str | None:
    want = expected_sum(num_rows(scale))
    wrong = {system: got for system, got in results.items() if got != want}
    if wrong:
        return f"B2: every system must return sum {want}; got {wrong}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B2",
        title="range(N) -> map_batches(y = id*3+1) -> keep even y -> sum(y), N = 50M x scale",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, NUMPY_2THREADS),
        rows=num_rows,
        check=_check,
        targets=(
            Target(
                "B2: shardflow-local >= 10x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 10.0
            ),
            Target(
                "B2: shardflow-local within 3x of the bare NumPy loop",
                SHARDFLOW_LOCAL,
                NUMPY_2THREADS,
                3.0,
                kind="within",
            ),
        ),
    ),
]


def _numpy_loop(n: int) -> int:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    def chunk_sum(lo: int) -> int:
        ids = np.arange(lo, min(n, lo + CHUNK_ROWS), dtype=np.int64)
        y = ids * 3 + 1
        return int(y[y % 2 == 0].sum())

    with ThreadPoolExecutor(max_workers=NUM_THREADS) as pool:
        return sum(pool.map(chunk_sum, range(0, n, CHUNK_ROWS)))


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child) and time it."""
    n = num_rows(scale)
    if system == NUMPY_2THREADS:
        import numpy  # noqa: F401  (imported before the clock, as the other systems are)

        start = time.perf_counter()
        total = _numpy_loop(n)
        return {"seconds": time.perf_counter() - start, "result": total}
    if system == RAY_DATA:
        from systems import ship_by_value, start_ray_data

        ray = start_ray_data()
        ship_by_value(__name__)
        start = time.perf_counter()
        total = (
            ray.data.range(n)
            .map_batches(
                times_three_plus_one,
                batch_size=BATCH_SIZE,
                batch_format="numpy",
                zero_copy_batch=True,
            )
            .map_batches(
                keep_even, batch_size=BATCH_SIZE, batch_format="numpy", zero_copy_batch=True
            )
            .sum("y")
        )
    else:
        from systems import ship_by_value, start_shardflow

        sf = start_shardflow(system)
        ship_by_value(__name__)
        start = time.perf_counter()
        total = (
            sf.range(n)
            .map_batches(
                times_three_plus_one,
                batch_size=BATCH_SIZE,
                batch_format="numpy",
                zero_copy_batch=True,
            )
            .map_batches(
                keep_even, batch_size=BATCH_SIZE, batch_format="numpy", zero_copy_batch=True
            )
            .sum("y")
        )
    return {"seconds": time.perf_counter() - start, "result": int(total)}
