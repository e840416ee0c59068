"""B16: group-by aggregations by number and kind of keys, and top-k (sort then take).

The input (generated once into ``benchmarks/data/``) is 16 Parquet files of 10M rows x scale:
``id`` (int64, 0..N-1), ``g`` (int64, 10 groups), ``m`` (int64, about N/10 groups), ``s`` (a
string of 4-12 letters out of 10,000), ``v`` (float64: a random permutation of 0..N-1 divided
by 1024, so every sum is exact in float64 in any order). Rows:

- **B16-FEW** ``groupby("g")``, **B16-MANY** ``groupby("m")``, **B16-STR** ``groupby("s")``,
  **B16-MULTI** ``groupby(["g", "s"])`` (~100,000 groups): ``Mean("v"), Sum("v"), Count()``,
  every result row collected. **B16-BUDGET-FEW** and **B16-BUDGET-MANY** run the same on 3x
  the rows with a 2 GiB memory budget (shardflow's ``DataContext.memory_budget_bytes``,
  DuckDB's ``memory_limit``; Polars and Ray Data have no such setting and run as they are).
- **B16-TOPK** ``sort("v").take(10)``, whole rows (DuckDB ``SELECT * ... ORDER BY v LIMIT
  10``, Polars ``sort("v").head(10)``, Daft ``sort("v").limit(10)``): the ids of the 10 rows.

Results are checked against NumPy's at generation: for an aggregation, the number of groups
and, over the groups in key order, order-weighted checksums of the counts and of the sums
(in units of 1/1024, so exact integers) and the sum of the means (to 1e-9 relative); for
top-k, the ids in order. A group-by reads only the columns it uses on every system but Ray
Data (shardflow's optimizer pushes them into the read); top-k returns whole rows everywhere.
The time covers the pipeline only.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchdata import ensure_input, files_dir, read_manifest
from registry import (
    DAFT,
    DUCKDB,
    ENGINES,
    POLARS,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    Benchmark,
    Target,
    Unavailable,
)

BASE_ROWS = 10_000_000
NUM_FILES = 16
FEW_GROUPS = 10
VOCABULARY = 10_000
SEED = 16
FORMAT_VERSION = 2
WEIGHT_MODULUS = 1009
MEAN_TOLERANCE = 1e-9
TOP_K = 10
BUDGET_FACTOR = 3
BUDGET_BYTES = 2 * 1024**3
BUDGET_PREFIX = "B16-BUDGET-"  # not a suffix: ``--only B16-FEW`` must not select the budget row


def _is_budget(name: str) -> bool:
    return name.startswith(BUDGET_PREFIX)


def _what(name: str) -> str:
    """The row's workload: FEW, MANY, STR, MULTI or TOPK."""
    return name.removeprefix(BUDGET_PREFIX).removeprefix("B16-")


KEYS = {"FEW": ("g",), "MANY": ("m",), "STR": ("s",), "MULTI": ("g", "s")}


def num_rows(scale: float) -> int:
    return max(NUM_FILES, int(BASE_ROWS * scale))


def _input_name(rows: int) -> str:
    return f"b16_groups_{rows}rows_{NUM_FILES}files"


def _spec(rows: int) -> dict[str, Any]:
    return {"rows": rows, "files": NUM_FILES, "seed": SEED, "version": FORMAT_VERSION}


def digest(keys: list[tuple], counts: list[int], sums: list[float], means: list[float]) -> dict:
    """The checksums an aggregation result is compared by (groups in key order)."""
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    weights = [i % WEIGHT_MODULUS for i in range(len(order))]
    return {
        "groups": len(order),
        "count_checksum": sum(int(counts[j]) * w for j, w in zip(order, weights)),
        "sum_checksum": sum(int(round(sums[j] * 1024)) * w for j, w in zip(order, weights)),
        "mean_total": float(sum(means)),
    }


def _generate(folder: str, rows: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = sorted({"".join(rng.choice(letters, m)) for m in rng.integers(4, 13, VOCABULARY)})
    vocabulary = pa.array(words)
    ids = np.arange(rows, dtype=np.int64)
    columns = {
        "g": rng.integers(0, FEW_GROUPS, rows, dtype=np.int64),
        "m": rng.integers(0, max(1, rows // 10), rows, dtype=np.int64),
        "s": rng.integers(0, len(words), rows),  # codes into the sorted vocabulary
    }
    v = rng.permutation(rows).astype(np.float64) / 1024.0
    bounds = np.linspace(0, rows, NUM_FILES + 1).astype(np.int64)
    for i in range(NUM_FILES):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        table = pa.table(
            {
                "id": ids[lo:hi],
                "g": columns["g"][lo:hi],
                "m": columns["m"][lo:hi],
                "s": vocabulary.take(pa.array(columns["s"][lo:hi])),
                "v": v[lo:hi],
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i:03d}.parquet"))
    facts: dict[str, Any] = {"TOPK": ids[np.argsort(v, kind="stable")[:TOP_K]].tolist()}
    for name, keys in KEYS.items():
        code = np.zeros(rows, dtype=np.int64)
        for key in keys:  # the vocabulary is sorted, so codes order as the strings do
            code = code * (len(words) if key == "s" else int(columns[key].max()) + 1)
            code += columns[key]
        present, inverse = np.unique(code, return_inverse=True)
        counts = np.bincount(inverse)
        sums = np.bincount(inverse, weights=v)
        facts[name] = digest(
            [(int(c),) for c in present], counts.tolist(), sums.tolist(), (sums / counts).tolist()
        )
    return facts


def prepare_rows(rows: int) -> dict[str, Any]:
    return ensure_input(_input_name(rows), _spec(rows), lambda folder: _generate(folder, rows))


def _rows_of(bench_name: str, scale: float) -> int:
    factor = BUDGET_FACTOR if _is_budget(bench_name) else 1
    return num_rows(scale * factor)


# ---------------------------------------------------------------------------------------------
# Checks


def _checker(name: str) -> Any:
    def check(results: dict[str, Any], scale: float) -> str | None:
        rows = _rows_of(name, scale)
        manifest = read_manifest(_input_name(rows))
        if manifest is None:
            return f"{name}: the input's manifest is missing"
        want = manifest[_what(name)]
        wrong = {s: r for s, r in results.items() if not _agrees(r, want)}
        if wrong:
            return f"{name}: every system must produce {want}; got {wrong}"
        return None

    return check


def _agrees(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return got == want
    exact = all(got.get(k) == want[k] for k in ("groups", "count_checksum", "sum_checksum"))
    mean = got.get("mean_total", float("nan"))
    return exact and abs(mean - want["mean_total"]) <= MEAN_TOLERANCE * max(1.0, abs(mean))


def _targets(name: str) -> tuple[Target, ...]:
    if name == "B16-TOPK":
        first = Target(
            f"{name}: shardflow-local within 1.5x of DuckDB's time",
            SHARDFLOW_LOCAL,
            DUCKDB,
            1.5,
            kind="within",
        )
    else:
        first = Target(
            f"{name}: shardflow-local at or ahead of the fastest of Polars and DuckDB",
            SHARDFLOW_LOCAL,
            (POLARS, DUCKDB),
            1.0,
            kind="within",
        )
    return (
        first,
        Target(
            f"{name}: shardflow-local >= 3x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 3.0
        ),
    )


def _benchmark(name: str, title: str) -> Benchmark:
    def prepare(scale: float) -> dict[str, Any]:
        return prepare_rows(_rows_of(name, scale))

    return Benchmark(
        name=name,
        title=title,
        family=__name__,
        systems=(SHARDFLOW_LOCAL, RAY_DATA, *ENGINES),
        rows=lambda scale: _rows_of(name, scale),
        check=_checker(name),
        prepare=prepare,
        targets=_targets(name),
        peers=ENGINES,
    )


_AGG = "aggregate(Mean('v'), Sum('v'), Count())"
BENCHMARKS = [
    _benchmark("B16-FEW", f"read_parquet(10M rows x scale) -> groupby('g') (10 groups) -> {_AGG}"),
    _benchmark(
        "B16-MANY", f"read_parquet(10M rows x scale) -> groupby('m') (N/10 groups) -> {_AGG}"
    ),
    _benchmark(
        "B16-STR", f"read_parquet(10M rows x scale) -> groupby('s') (string keys) -> {_AGG}"
    ),
    _benchmark("B16-MULTI", f"read_parquet(10M rows x scale) -> groupby(['g', 's']) -> {_AGG}"),
    _benchmark("B16-BUDGET-FEW", "B16-FEW on 3x the rows under a 2 GiB memory budget"),
    _benchmark("B16-BUDGET-MANY", "B16-MANY on 3x the rows under a 2 GiB memory budget"),
    _benchmark("B16-TOPK", "read_parquet(10M rows x scale) -> sort('v') -> take(10)"),
]


# ---------------------------------------------------------------------------------------------
# Running one measurement


def _result_digest(rows: list[dict[str, Any]], keys: tuple[str, ...], names: dict) -> dict:
    return digest(
        [tuple(r[k] for k in keys) for r in rows],
        [r[names["count"]] for r in rows],
        [r[names["sum"]] for r in rows],
        [r[names["mean"]] for r in rows],
    )


PLAIN_NAMES = {"count": "count", "sum": "sum", "mean": "mean"}
RAY_NAMES = {"count": "count()", "sum": "sum(v)", "mean": "mean(v)"}


def _aggregate(
    system: str, module: Any, pattern: str, source: str, keys: tuple, budget: bool, aggregates: Any
) -> dict[str, Any]:
    listed = ", ".join(keys)
    if system == POLARS:
        pl = module
        frame = (
            pl.scan_parquet(pattern)
            .group_by(list(keys))
            .agg(mean=pl.col("v").mean(), sum=pl.col("v").sum(), count=pl.len())
            .collect()
        )
        return _result_digest(frame.to_dicts(), keys, PLAIN_NAMES)
    if system == DUCKDB:
        with module.connect() as con:
            if budget:
                con.execute(f"SET memory_limit = '{BUDGET_BYTES // 1024**2}MB'")
            result = con.execute(
                f"SELECT {listed}, avg(v) AS mean, sum(v) AS sum, count(*) AS count "
                f"FROM read_parquet('{pattern}') GROUP BY {listed}"
            ).to_arrow_table()
        return _result_digest(_pylist(result), keys, PLAIN_NAMES)
    if system == DAFT:
        col = module.col
        frame = (
            module.read_parquet(pattern)
            .groupby(*keys)
            .agg(
                col("v").mean().alias("mean"),
                col("v").sum().alias("sum"),
                col("v").count().alias("count"),
            )
        )
        return _result_digest(frame.to_pylist(), keys, PLAIN_NAMES)
    Mean, Sum, Count = aggregates
    grouped = module.read_parquet(source).groupby(list(keys) if len(keys) > 1 else keys[0])
    aggregated = grouped.aggregate(Mean("v"), Sum("v"), Count())
    if system == RAY_DATA:
        import pyarrow as pa
        import ray

        tables = [t for t in ray.get(aggregated.to_arrow_refs()) if t.num_rows]
        return _result_digest(_pylist(pa.concat_tables(tables)), keys, RAY_NAMES)
    return _result_digest(_pylist(aggregated.to_arrow()), keys, RAY_NAMES)


def _pylist(table: Any) -> list[dict[str, Any]]:
    return table.to_pylist()


def _top_k(system: str, module: Any, pattern: str, source: str) -> list[int]:
    if system == POLARS:
        frame = module.scan_parquet(pattern).sort("v").head(TOP_K).collect()
        return frame.get_column("id").to_list()
    if system == DUCKDB:
        with module.connect() as con:
            # Whole rows, as take() returns them on the other systems.
            table = con.execute(
                f"SELECT * FROM read_parquet('{pattern}') ORDER BY v LIMIT {TOP_K}"
            ).to_arrow_table()
        return table.column("id").to_pylist()
    if system == DAFT:
        return [r["id"] for r in module.read_parquet(pattern).sort("v").limit(TOP_K).to_pylist()]
    return [r["id"] for r in module.read_parquet(source).sort("v").take(TOP_K)]


def _aggregates(system: str) -> Any:
    """(Mean, Sum, Count) of Ray Data's API, imported before the clock (as in B8); None for the
    engines with APIs of their own."""
    if system == RAY_DATA:
        from ray.data.aggregate import Count, Mean, Sum

        return Mean, Sum, Count
    if system in ENGINES:
        return None
    from shardflow.aggregate import Count, Mean, Sum  # type: ignore[no-redef]

    return Mean, Sum, Count


def _start(system: str, budget: bool) -> Any:
    from systems import import_engine, start_ray_data, start_shardflow

    if system in ENGINES:
        return import_engine(system)
    if system == RAY_DATA:
        return start_ray_data().data
    sf = start_shardflow(system)
    if budget:
        sf.DataContext.get_current().memory_budget_bytes = BUDGET_BYTES
    return sf


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run one aggregation or top-k on ``system`` (in the child), time it, return the result."""
    rows = _rows_of(bench.name, scale)
    prepare_rows(rows)
    source = files_dir(_input_name(rows))
    pattern = os.path.join(source, "*.parquet")
    budget = _is_budget(bench.name)
    module = _start(system, budget)
    aggregates = _aggregates(system)
    import numpy  # noqa: F401  (the consumers' import, before the clock)

    if system not in ENGINES:
        import pyarrow as pa

        pa.array([1])  # pyarrow's one-off import of pandas, before the clock (see B6-B8)
    what = _what(bench.name)
    try:
        start = time.perf_counter()
        if what == "TOPK":
            result: Any = _top_k(system, module, pattern, source)
        else:
            result = _aggregate(system, module, pattern, source, KEYS[what], budget, aggregates)
        seconds = time.perf_counter() - start
    except NotImplementedError as exc:
        raise Unavailable(f"{system} raised NotImplementedError: {exc}") from None
    return {"seconds": seconds, "result": result, "t_result": time.time()}
