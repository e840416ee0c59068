"""B1: time from process start to the first row of a small in-memory dataset.

The parent takes the time just before it spawns the child; the child reports the moment it
holds the first row. The difference covers the interpreter, every import, any cluster
start-up (Ray Data starts Ray), building the dataset and ``take(1)``. The bare reference is
a process that imports pyarrow and builds the same rows with ``pyarrow.Table.from_pylist``;
Polars and Daft build a DataFrame from the same list and take its first row. DuckDB has no
natural way to build a table from Python dicts, so it does not run B1.
"""

from __future__ import annotations

import time
from typing import Any

from registry import (
    DAFT,
    PANDAS,
    POLARS,
    PYARROW,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

NUM_ROWS = 1000


def _check(results: dict[str, Any], scale: float) -> str | None:
    wrong = {system: row for system, row in results.items() if row != {"x": 0}}
    if wrong:
        return f"B1: first row should be {{'x': 0}}; got {wrong}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B1",
        title=f"process start -> first row of from_items({NUM_ROWS} rows).take(1)",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PANDAS, PYARROW, POLARS, DAFT),
        from_spawn=True,
        check=_check,
        targets=(
            Target(
                "B1: shardflow-local >= 20x faster than Ray Data", SHARDFLOW_LOCAL, RAY_DATA, 20.0
            ),
            Target(
                "B1: shardflow-local within 2x of the bare pyarrow process",
                SHARDFLOW_LOCAL,
                PYARROW,
                2.0,
                kind="within",
            ),
        ),
        peers=(PYARROW, POLARS, DAFT),
    ),
]


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Build the dataset and take its first row (in the child). ``scale`` does not apply."""
    from systems import own_peak_rss

    start = time.perf_counter()
    if system == PYARROW:
        import pyarrow as pa

        table = pa.Table.from_pylist([{"x": i} for i in range(NUM_ROWS)])
        row = table.slice(0, 1).to_pylist()[0]
    elif system == POLARS:
        from systems import import_engine

        pl = import_engine("polars")
        row = pl.DataFrame([{"x": i} for i in range(NUM_ROWS)]).head(1).to_dicts()[0]
    elif system == DAFT:
        from systems import import_engine

        daft = import_engine("daft")
        row = daft.from_pylist([{"x": i} for i in range(NUM_ROWS)]).limit(1).to_pylist()[0]
    elif system == PANDAS:
        import pandas as pd

        df = pd.DataFrame([{"x": i} for i in range(NUM_ROWS)])
        row = {k: int(v) for k, v in df.head(1).to_dict("records")[0].items()}
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        row = ray.data.from_items([{"x": i} for i in range(NUM_ROWS)]).take(1)[0]
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        row = sf.from_items([{"x": i} for i in range(NUM_ROWS)]).take(1)[0]
    done = time.time()
    return {
        "seconds": time.perf_counter() - start,
        "result": row,
        "t_result": done,
        "peak_rss_self": own_peak_rss(),
    }
