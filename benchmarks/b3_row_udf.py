"""B3: a pure-Python row function: ``range(N).map(lambda r: {"y": r["id"] * 2 + 1}).sum("y")``.

Row functions hold the GIL, so this measures how well each system spreads Python work over
the cores: shardflow-local with its defaults against the same engine limited to one worker
(``DataContext.num_cpus = 1``), and Ray Data. The time covers the pipeline only; worker
processes started on first use are part of it.
"""

from __future__ import annotations

import time
from typing import Any

from registry import (
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_LOCAL_1CPU,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

BASE_ROWS = 2_000_000


def num_rows(scale: float) -> int:
    return max(1, int(BASE_ROWS * scale))


def twice_plus_one(row: dict[str, Any]) -> dict[str, Any]:
    return {"y": row["id"] * 2 + 1}


def _check(results: dict[str, Any], scale: float) -> str | None:
    n = num_rows(scale)
    want = n * n  # the sum of the first n odd numbers
    wrong = {system: got for system, got in results.items() if got != want}
    if wrong:
        return f"B3: every system must return sum {want}; got {wrong}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B3",
        title="range(N) -> map(row: y = id*2+1) -> sum(y), N = 2M x scale",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_LOCAL_1CPU, SHARDFLOW_RAY, RAY_DATA),
        rows=num_rows,
        check=_check,
        targets=(
            Target(
                "B3: shardflow-local >= 1.6x faster than one worker",
                SHARDFLOW_LOCAL,
                SHARDFLOW_LOCAL_1CPU,
                1.6,
            ),
        ),
    ),
]


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child) and time it."""
    n = num_rows(scale)
    if system == RAY_DATA:
        from systems import ship_by_value, start_ray_data

        ray = start_ray_data()
        ship_by_value(__name__)
        start = time.perf_counter()
        total = ray.data.range(n).map(twice_plus_one).sum("y")
    else:
        from systems import ship_by_value, start_shardflow

        sf = start_shardflow(system)
        ship_by_value(__name__)
        start = time.perf_counter()
        total = sf.range(n).map(twice_plus_one).sum("y")
    return {"seconds": time.perf_counter() - start, "result": int(total)}
