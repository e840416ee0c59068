"""B6-B8: all-to-all exchanges over 10M rows: random shuffle, sort, groupby-aggregate.

The input (generated once into ``benchmarks/data/``, reused while its size matches) is 16
Parquet files of 10M rows in all at scale 1 (about 0.4 GB in memory): ``id`` (int64, 0..N-1
in file order), ``k`` (int64, ~1,000 groups), ``v`` (float64: a random permutation of
0..N-1 divided by 1024, so every value is distinct and every sum of them is exact in float64
whatever the order), ``w`` (int64) and ``s`` (a string of 4 to 12 letters). Each benchmark
reads the data and consumes the whole result:

- **B6** ``random_shuffle``: read, shuffle every row, write Parquet. The read-back checks the
  row count and the sums of ``id`` and ``w``, and that the rows are really shuffled (about
  half of neighbouring ids increase, against all of them in the input).
- **B7** ``sort`` by ``v``: read, sort, iterate the sorted batches in order and compute a
  checksum that depends on the order: ``sum(id[i] * (i % 1009))``.
- **B8** ``groupby("k")`` with mean, sum and count of ``v``: read, aggregate, collect the
  ~1,000 result rows; counts and sums must equal the input's exactly, means to 1e-9.

shardflow and Ray Data run Ray Data's API (``random_shuffle(seed=...)``, ``sort("v")``,
``groupby("k").aggregate(Mean("v"), Sum("v"), Count())`` from ``ray.data.aggregate`` /
``shardflow.aggregate``); a shardflow without one of these reports "not available". Polars,
DuckDB and Daft use their own equivalents: Polars ``DataFrame.sample(fraction=1.0,
shuffle=True)``, ``sort`` and ``group_by().agg()``; DuckDB ``ORDER BY random()``, ``ORDER BY
v`` and ``GROUP BY``; Daft ``shuffle``, ``sort`` and ``groupby().agg()``. Polars, DuckDB and
Daft read only the columns a query uses (B8: ``k`` and ``v``); shardflow and Ray Data read
every column unless told otherwise. The time covers the pipeline only.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchdata import ensure_input, files_dir, fresh_output_dir, read_manifest, remove
from registry import (
    DAFT,
    DUCKDB,
    ENGINES,
    POLARS,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
    Unavailable,
)

BASE_ROWS = 10_000_000
NUM_FILES = 16
NUM_GROUPS = 1000
SEED = 6
FORMAT_VERSION = 1
WEIGHT_MODULUS = 1009  # B7's checksum weights rows by position % this
MEAN_TOLERANCE = 1e-9
SHUFFLED_BELOW = 0.75  # a shuffled output has ~50% increasing neighbours; the input 100%


def num_rows(scale: float) -> int:
    return max(NUM_FILES, int(BASE_ROWS * scale))


def _input_name(scale: float) -> str:
    return f"b6_exchange_{num_rows(scale)}rows_{NUM_FILES}files"


def _spec(scale: float) -> dict[str, Any]:
    return {
        "rows": num_rows(scale),
        "files": NUM_FILES,
        "groups": NUM_GROUPS,
        "seed": SEED,
        "version": FORMAT_VERSION,
    }


def _generate(folder: str, scale: float) -> dict[str, Any]:
    """Write the input; return the expected results of B6, B7 and B8 (computed with NumPy)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    n = num_rows(scale)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = pa.array(["".join(rng.choice(letters, m)) for m in rng.integers(4, 13, 1000)])
    ids = np.arange(n, dtype=np.int64)
    k = rng.integers(0, NUM_GROUPS, n, dtype=np.int64)
    v = rng.permutation(n).astype(np.float64) / 1024.0
    w = rng.integers(0, 1_000_000, n, dtype=np.int64)
    words = rng.integers(0, len(vocabulary), n)
    bounds = np.linspace(0, n, NUM_FILES + 1).astype(np.int64)
    for i in range(NUM_FILES):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        table = pa.table(
            {
                "id": ids[lo:hi],
                "k": k[lo:hi],
                "v": v[lo:hi],
                "w": w[lo:hi],
                "s": vocabulary.take(pa.array(words[lo:hi])),
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i:03d}.parquet"))
    order = np.argsort(v, kind="stable")
    counts = np.bincount(k, minlength=NUM_GROUPS)
    sums = np.bincount(k, weights=v, minlength=NUM_GROUPS)
    present = np.flatnonzero(counts)
    return {
        "shuffle": {"rows": n, "id_sum": int(ids.sum()), "w_sum": int(w.sum())},
        "sort": {"rows": n, "checksum": ordered_checksum(ids[order], 0)},
        "groupby": {
            "k": present.tolist(),
            "count": counts[present].tolist(),
            "sum": sums[present].tolist(),
        },
    }


def prepare(scale: float) -> dict[str, Any]:
    return ensure_input(_input_name(scale), _spec(scale), lambda folder: _generate(folder, scale))


def ordered_checksum(ids: Any, offset: int) -> int:
    """``sum(id[i] * ((offset + i) % WEIGHT_MODULUS))`` over one run of sorted ids (NumPy)."""
    import numpy as np

    ids = np.asarray(ids, dtype=np.int64)
    weights = (np.arange(offset, offset + len(ids), dtype=np.int64)) % WEIGHT_MODULUS
    return int((ids * weights).sum())


class OrderedTally:
    """Consumes sorted batches in order: the row count and :func:`ordered_checksum`."""

    def __init__(self) -> None:
        self.rows = self.checksum = 0

    def add(self, ids: Any) -> None:
        self.checksum += ordered_checksum(ids, self.rows)
        self.rows += len(ids)

    def result(self) -> dict[str, int]:
        return {"rows": self.rows, "checksum": self.checksum}


# ---------------------------------------------------------------------------------------------
# Checks


def _expected(scale: float, what: str) -> Any:
    manifest = read_manifest(_input_name(scale))
    return None if manifest is None else manifest[what]


def _check_shuffle(results: dict[str, Any], scale: float) -> str | None:
    want = _expected(scale, "shuffle")
    if want is None:
        return "B6: the input's manifest is missing"
    wrong = {
        s: r
        for s, r in results.items()
        if {k: r.get(k) for k in want} != want or r.get("increasing", 1.0) >= SHUFFLED_BELOW
    }
    if wrong:
        return (
            f"B6: every system must write {want} with under {SHUFFLED_BELOW:.0%} increasing "
            f"neighbours; got {wrong}"
        )
    return None


def _check_sort(results: dict[str, Any], scale: float) -> str | None:
    want = _expected(scale, "sort")
    if want is None:
        return "B7: the input's manifest is missing"
    wrong = {s: r for s, r in results.items() if r != want}
    if wrong:
        return f"B7: every system must produce {want}; got {wrong}"
    return None


def _check_groupby(results: dict[str, Any], scale: float) -> str | None:
    want = _expected(scale, "groupby")
    if want is None:
        return "B8: the input's manifest is missing"
    wrong = {}
    for system, got in results.items():
        exact = all(got.get(key) == want[key] for key in ("k", "count", "sum"))
        means = got.get("mean") or []
        close = len(means) == len(want["k"]) and all(
            abs(m - s / c) <= MEAN_TOLERANCE * max(1.0, abs(s / c))
            for m, s, c in zip(means, want["sum"], want["count"])
        )
        if not (exact and close):
            wrong[system] = {key: (value[:3], "...") for key, value in got.items()}
    if wrong:
        return f"B8: counts and sums must equal the input's exactly, means to 1e-9; got {wrong}"
    return None


def _targets(name: str) -> tuple[Target, ...]:
    return (
        Target(
            f"{name}: shardflow-local within 1.5x of Polars' time",
            SHARDFLOW_LOCAL,
            POLARS,
            1.5,
            kind="within",
        ),
        Target(
            f"{name}: shardflow-local peak RSS at most 2x Polars'",
            SHARDFLOW_LOCAL,
            POLARS,
            2.0,
            kind="within",
            metric="rss",
        ),
        Target(
            f"{name}: shardflow-local >= 3x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 3.0
        ),
    )


def _benchmark(name: str, title: str, check: Any) -> Benchmark:
    return Benchmark(
        name=name,
        title=title,
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, *ENGINES),
        rows=num_rows,
        check=check,
        prepare=prepare,
        targets=_targets(name),
        peers=ENGINES,
    )


BENCHMARKS = [
    _benchmark(
        "B6",
        "read_parquet(10M rows x scale) -> random_shuffle(seed) -> write_parquet",
        _check_shuffle,
    ),
    _benchmark(
        "B7", "read_parquet(10M rows x scale) -> sort('v') -> ordered checksum", _check_sort
    ),
    _benchmark(
        "B8",
        ("read_parquet(10M rows x scale) -> groupby('k').aggregate(Mean('v'), Sum('v'), Count())"),
        _check_groupby,
    ),
]


# ---------------------------------------------------------------------------------------------
# B6: random shuffle


def summarize_shuffled(out: str) -> dict[str, Any]:
    """Row count, sums of ``id`` and ``w``, and the share of increasing neighbouring ids in
    the files under ``out`` read in name order."""
    import numpy as np
    import pyarrow.dataset as pads

    table = pads.dataset(out, format="parquet").to_table(columns=["id", "w"])
    ids = table["id"].to_numpy()
    increasing = float((np.diff(ids) > 0).mean()) if len(ids) > 1 else 0.0
    return {
        "rows": table.num_rows,
        "id_sum": int(ids.sum()),
        "w_sum": int(table["w"].to_numpy().sum()),
        "increasing": round(increasing, 3),
    }


def _shuffle(system: str, module: Any, pattern: str, source: str, out: str) -> None:
    if system == POLARS:
        os.makedirs(out)
        frame = module.read_parquet(pattern).sample(fraction=1.0, shuffle=True, seed=SEED)
        frame.write_parquet(os.path.join(out, "part-0.parquet"))
    elif system == DUCKDB:
        os.makedirs(out)
        with module.connect() as con:
            con.execute(f"SELECT setseed({SEED / 100})")
            con.execute(
                f"COPY (SELECT * FROM read_parquet('{pattern}') ORDER BY random()) "
                f"TO '{os.path.join(out, 'part-0.parquet')}' (FORMAT parquet)"
            )
    elif system == DAFT:
        module.read_parquet(pattern).shuffle(seed=SEED).write_parquet(out)
    else:
        module.read_parquet(source).random_shuffle(seed=SEED).write_parquet(out)


# ---------------------------------------------------------------------------------------------
# B7: sort


def _sort(system: str, module: Any, pattern: str, source: str) -> dict[str, int]:
    tally = OrderedTally()
    if system == POLARS:
        frame = module.scan_parquet(pattern).sort("v").collect()
        tally.add(frame.get_column("id").to_numpy())
    elif system == DUCKDB:
        with module.connect() as con:
            result = con.execute(f"SELECT * FROM read_parquet('{pattern}') ORDER BY v")
            reader = getattr(result, "to_arrow_reader", None) or result.fetch_record_batch
            for batch in reader(1 << 20):
                tally.add(batch.column("id").to_numpy())
    elif system == DAFT:
        for batch in module.read_parquet(pattern).sort("v").to_arrow_iter():
            tally.add(batch.column("id").to_numpy())
    else:
        for batch in (
            module.read_parquet(source)
            .sort("v")
            .iter_batches(batch_size=None, batch_format="pyarrow")
        ):
            tally.add(batch.column("id").to_numpy())
    return tally.result()


# ---------------------------------------------------------------------------------------------
# B8: groupby-aggregate


def _normalize(rows: list[dict[str, Any]], names: dict[str, str]) -> dict[str, list]:
    """Result rows sorted by key, as ``{"k": [...], "count": [...], "sum": [...], "mean": [...]}``."""
    rows = sorted(rows, key=lambda r: r[names["k"]])
    return {
        "k": [int(r[names["k"]]) for r in rows],
        "count": [int(r[names["count"]]) for r in rows],
        "sum": [float(r[names["sum"]]) for r in rows],
        "mean": [float(r[names["mean"]]) for r in rows],
    }


PLAIN_NAMES = {"k": "k", "count": "count", "sum": "sum", "mean": "mean"}
RAY_NAMES = {"k": "k", "count": "count()", "sum": "sum(v)", "mean": "mean(v)"}


def _groupby(system: str, module: Any, pattern: str, source: str, aggregates: Any) -> dict:
    if system == POLARS:
        pl = module
        frame = (
            pl.scan_parquet(pattern)
            .group_by("k")
            .agg(mean=pl.col("v").mean(), sum=pl.col("v").sum(), count=pl.len())
            .collect()
        )
        return _normalize(frame.to_dicts(), PLAIN_NAMES)
    if system == DUCKDB:
        with module.connect() as con:
            rows = con.execute(
                f"SELECT k, avg(v), sum(v), count(*) FROM read_parquet('{pattern}') GROUP BY k"
            ).fetchall()
        return _normalize([dict(zip(("k", "mean", "sum", "count"), r)) for r in rows], PLAIN_NAMES)
    if system == DAFT:
        col = module.col
        frame = (
            module.read_parquet(pattern)
            .groupby("k")
            .agg(
                col("v").mean().alias("mean"),
                col("v").sum().alias("sum"),
                col("v").count().alias("count"),
            )
        )
        return _normalize(frame.to_pylist(), PLAIN_NAMES)
    mean, total, count = aggregates
    rows = (
        module.read_parquet(source)
        .groupby("k")
        .aggregate(mean("v"), total("v"), count())
        .take_all()
    )
    return _normalize(rows, RAY_NAMES)


# ---------------------------------------------------------------------------------------------
# Running one measurement


def _start(system: str, operation: str) -> tuple[Any, Any]:
    """Import or start ``system`` and check it has ``operation``; returns ``(module,
    aggregates)``, where aggregates are (Mean, Sum, Count) for the Ray Data API."""
    from systems import import_engine, require, start_ray_data, start_shardflow

    if system in ENGINES:
        return import_engine(system), None
    if system == RAY_DATA:
        ray = start_ray_data()
        from ray.data.aggregate import Count, Mean, Sum

        return ray.data, (Mean, Sum, Count)
    sf = start_shardflow(system)
    require(sf.Dataset, operation, owner="shardflow.Dataset")
    aggregates = None
    if operation == "groupby":
        try:
            from shardflow.aggregate import Count, Mean, Sum
        except ImportError:
            raise Unavailable(
                "shardflow has no shardflow.aggregate (Mean, Sum, Count) yet"
            ) from None
        aggregates = (Mean, Sum, Count)
    return sf, aggregates


OPERATIONS = {"B6": "random_shuffle", "B7": "sort", "B8": "groupby"}


def warm_up() -> None:
    """pyarrow imports pandas the first time it converts Python or NumPy data (``pa.array``,
    ``pa.table``; about 0.2 s): pyarrow's one-off cost, which the pyarrow-based systems pay
    before the clock starts, as in B4, B11 and B12."""
    import pyarrow as pa

    pa.array([1])


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run one exchange on ``system`` (in the child), time it, and check what it produced."""
    prepare(scale)
    source = files_dir(_input_name(scale))
    pattern = os.path.join(source, "*.parquet")
    operation = OPERATIONS[bench.name]
    module, aggregates = _start(system, operation)
    import numpy  # noqa: F401  (the consumers' import, before the clock)

    if system not in ENGINES:
        warm_up()

    out = fresh_output_dir(f"b6-{system}") if bench.name == "B6" else None
    try:
        start = time.perf_counter()
        if bench.name == "B6":
            _shuffle(system, module, pattern, source, out)
        elif bench.name == "B7":
            result = _sort(system, module, pattern, source)
        else:
            result = _groupby(system, module, pattern, source, aggregates)
        seconds = time.perf_counter() - start
        done = time.time()
        if out is not None:
            result = summarize_shuffled(out)
    except NotImplementedError as exc:
        raise Unavailable(f"{system} raised NotImplementedError: {exc}") from None
    finally:
        if out is not None:
            remove(out)
    return {"seconds": seconds, "result": result, "t_result": done}
