"""B11-CSV and B11-JSONL: scan 2M rows of CSV or JSON Lines, every column, into a checksum.

The input (generated once into ``benchmarks/data/``, reused while its size matches) is 8
files of 2M rows in all at scale 1, the same rows in both formats: ``id`` (int64), ``a`` and
``b`` (floats with three decimals), ``c`` (int64) and ``label`` (a string of 8 to 24
letters); about 100 MB of CSV and 190 MB of JSON Lines. Each system reads every column and
computes the same checksum: the row count and the sums of ``id``, ``c``, ``round(1000 * a)``,
``round(1000 * b)`` and the label lengths. Integers only, so the checksum is exact whatever
order a system adds in, and it equals the one computed with NumPy when the input was written.

- shardflow and Ray Data: ``read_csv(folder)`` / ``read_json(folder, lines=True)``, then a
  ``map_batches`` (pyarrow, whole blocks) that reduces each block to one row of partial sums,
  then ``take_all()`` and a sum of the partials on the driver;
- Polars: ``scan_csv`` / ``scan_ndjson`` over the files and one ``select`` of the sums;
- DuckDB: ``read_csv`` / ``read_json`` in one ``SELECT`` of the sums;
- Daft: ``read_csv`` / ``read_json`` and one ``agg`` of the sums;
- the bare reference (``pyarrow-2threads``, no target): ``pyarrow.csv.read_csv`` /
  ``pyarrow.json.read_json`` of one file per task, single-threaded, on two threads, then the
  same partial sums: what Arrow's parsers cost without an engine around them.

The time covers the scan and the checksum; imports and cluster start-up come first.
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
    PYARROW_2THREADS,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

BASE_ROWS = 2_000_000
NUM_FILES = 8
SEED = 9
FORMAT_VERSION = 1
VOCABULARY_SIZE = 1000
CSV, JSONL = "csv", "jsonl"
SUMS = ("id_sum", "c_sum", "a_milli_sum", "b_milli_sum", "label_chars")


def num_rows(scale: float) -> int:
    return max(NUM_FILES, int(BASE_ROWS * scale))


def _input_name(fmt: str, scale: float) -> str:
    return f"b9_{fmt}_{num_rows(scale)}rows_{NUM_FILES}files"


def _spec(fmt: str, scale: float) -> dict[str, Any]:
    return {
        "format": fmt,
        "rows": num_rows(scale),
        "files": NUM_FILES,
        "seed": SEED,
        "version": FORMAT_VERSION,
    }


def _tables(scale: float) -> Any:
    """Yield ``(file index, pyarrow.Table, checksum facts)`` for each input file."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(8, 25, VOCABULARY_SIZE)
    vocabulary = pa.array(["".join(rng.choice(letters, n)) for n in lengths], pa.string())
    bounds = np.linspace(0, num_rows(scale), NUM_FILES + 1).astype(np.int64)
    for i in range(NUM_FILES):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        n = hi - lo
        a_milli = rng.integers(0, 1_000_000, n)
        b_milli = rng.integers(-1_000_000, 1_000_000, n)
        c = rng.integers(0, 1_000_000, n)
        words = rng.integers(0, VOCABULARY_SIZE, n)
        table = pa.table(
            {
                "id": np.arange(lo, hi, dtype=np.int64),
                "a": a_milli / 1000.0,
                "b": b_milli / 1000.0,
                "c": c,
                "label": vocabulary.take(pa.array(words)),
            }
        )
        facts = {
            "rows": n,
            "id_sum": (lo + hi - 1) * n // 2,
            "c_sum": int(c.sum()),
            "a_milli_sum": int(a_milli.sum()),
            "b_milli_sum": int(b_milli.sum()),
            "label_chars": int(lengths[words].sum()),
        }
        yield i, table, facts


def _generate(folder: str, fmt: str, scale: float) -> dict[str, Any]:
    """Write the files of one format; return the expected checksum and the bytes on disk."""
    import pyarrow.csv as pacsv

    expected = dict.fromkeys(("rows", *SUMS), 0)
    for i, table, facts in _tables(scale):
        path = os.path.join(folder, f"part-{i:03d}.{fmt}")
        if fmt == CSV:
            pacsv.write_csv(table, path)
        else:
            # pandas writes each float with the fewest digits that read back the same value.
            table.to_pandas().to_json(path, orient="records", lines=True, double_precision=15)
        for key, value in facts.items():
            expected[key] += value
    nbytes = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    return {"expected": expected, "bytes_on_disk": nbytes}


def prepare_format(fmt: str, scale: float) -> dict[str, Any]:
    return ensure_input(
        _input_name(fmt, scale), _spec(fmt, scale), lambda folder: _generate(folder, fmt, scale)
    )


def partial_checksum(batch: Any) -> Any:
    """One row of partial sums for a ``pyarrow.Table`` batch (shardflow and Ray Data)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def total(array: Any) -> int:
        return int(pc.sum(array).as_py() or 0)

    def milli(array: Any) -> Any:
        return pc.round(pc.multiply(array, 1000.0)).cast(pa.int64())

    return pa.table(
        {
            "rows": [batch.num_rows],
            "id_sum": [total(batch["id"])],
            "c_sum": [total(batch["c"])],
            "a_milli_sum": [total(milli(batch["a"]))],
            "b_milli_sum": [total(milli(batch["b"]))],
            "label_chars": [total(pc.utf8_length(batch["label"]))],
        }
    )


def warm_up() -> None:
    """Run :func:`partial_checksum` once on a tiny table before the clock starts: pyarrow's
    compute functions import pandas and parse their signatures on first use (~0.1-0.3 s),
    which is pyarrow's one-off cost, not the engine's."""
    import pyarrow as pa

    partial_checksum(pa.table({"id": [1], "a": [0.5], "b": [0.5], "c": [1], "label": ["x"]}))


def _combine(parts: list[dict[str, Any]]) -> dict[str, int]:
    return {key: int(sum(part[key] for part in parts)) for key in ("rows", *SUMS)}


def _ray_like(module: Any, fmt: str, source: str) -> dict[str, int]:
    """shardflow and Ray Data: the same calls on either module."""
    if fmt == CSV:
        ds = module.read_csv(source)
    else:
        ds = module.read_json(source, lines=True)
    parts = ds.map_batches(
        partial_checksum, batch_size=None, batch_format="pyarrow", zero_copy_batch=True
    ).take_all()
    return _combine(parts)


def _polars(fmt: str, source: str) -> dict[str, int]:
    import polars as pl

    pattern = os.path.join(source, f"*.{fmt}")
    frame = pl.scan_csv(pattern) if fmt == CSV else pl.scan_ndjson(pattern)

    def milli(name: str) -> Any:
        return (pl.col(name) * 1000).round().cast(pl.Int64).sum()

    row = (
        frame.select(
            rows=pl.len(),
            id_sum=pl.col("id").sum(),
            c_sum=pl.col("c").sum(),
            a_milli_sum=milli("a"),
            b_milli_sum=milli("b"),
            label_chars=pl.col("label").str.len_chars().sum(),
        )
        .collect()
        .row(0, named=True)
    )
    return {key: int(value) for key, value in row.items()}


def _duckdb(fmt: str, source: str) -> dict[str, int]:
    import duckdb

    pattern = os.path.join(source, f"*.{fmt}")
    reader = f"read_csv('{pattern}')" if fmt == CSV else f"read_json('{pattern}')"
    with duckdb.connect() as con:
        row = con.execute(
            f"""SELECT count(*), sum(id), sum(c),
                       sum(CAST(round(a * 1000) AS BIGINT)), sum(CAST(round(b * 1000) AS BIGINT)),
                       sum(length(label))
                FROM {reader}"""
        ).fetchone()
    return dict(zip(("rows", *SUMS), (int(v) for v in row)))


def _daft(fmt: str, source: str) -> dict[str, int]:
    import daft

    col, int64 = daft.col, daft.DataType.int64()
    pattern = os.path.join(source, f"*.{fmt}")
    frame = daft.read_csv(pattern) if fmt == CSV else daft.read_json(pattern)

    def milli(name: str) -> Any:
        return (col(name) * 1000).round().cast(int64).sum().alias(f"{name}_milli_sum")

    row = frame.agg(
        col("id").count().alias("rows"),
        col("id").sum().alias("id_sum"),
        col("c").sum().alias("c_sum"),
        milli("a"),
        milli("b"),
        col("label").length().cast(int64).sum().alias("label_chars"),
    ).to_pylist()[0]
    return {key: int(value) for key, value in row.items()}


def _pyarrow_threads(fmt: str, source: str) -> dict[str, int]:
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.csv as pacsv
    import pyarrow.json as pajson

    def one(name: str) -> dict[str, Any]:
        path = os.path.join(source, name)
        if fmt == CSV:
            table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(use_threads=False))
        else:
            table = pajson.read_json(path, read_options=pajson.ReadOptions(use_threads=False))
        return partial_checksum(table).to_pylist()[0]

    files = sorted(name for name in os.listdir(source) if name.endswith(f".{fmt}"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        return _combine(list(pool.map(one, files)))


ENGINE_RUNNERS = {POLARS: _polars, DUCKDB: _duckdb, DAFT: _daft}


def _checker(fmt: str) -> Any:
    def check(results: dict[str, Any], scale: float) -> str | None:
        manifest = read_manifest(_input_name(fmt, scale))
        if manifest is None:
            return f"{fmt}: the input's manifest is missing; cannot check the results"
        want = manifest["expected"]
        wrong = {system: got for system, got in results.items() if got != want}
        if wrong:
            return f"{fmt}: every system must compute {want}; got {wrong}"
        return None

    return check


def _benchmark(name: str, fmt: str, title: str) -> Benchmark:
    return Benchmark(
        name=name,
        title=title,
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, *ENGINES, PYARROW_2THREADS),
        rows=num_rows,
        check=_checker(fmt),
        prepare=lambda scale: prepare_format(fmt, scale),
        targets=(
            Target(
                f"{name}: shardflow-local within 1.25x of the fastest of Polars, DuckDB, Daft",
                SHARDFLOW_LOCAL,
                ENGINES,
                1.25,
                kind="within",
            ),
            Target(
                f"{name}: shardflow-local peak RSS at most 1.5x Polars'",
                SHARDFLOW_LOCAL,
                POLARS,
                1.5,
                kind="within",
                metric="rss",
            ),
        ),
        peers=ENGINES,
    )


BENCHMARKS = [
    _benchmark("B11-CSV", CSV, "read_csv(2M rows x scale, 8 files), every column -> checksum"),
    _benchmark(
        "B11-JSONL",
        JSONL,
        "read_json(lines=True, 2M rows x scale, 8 files), every column -> checksum",
    ),
]


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Scan the input on ``system`` (in the child) and return the timed checksum."""
    fmt = CSV if bench.name.endswith("CSV") else JSONL
    prepare_format(fmt, scale)
    source = files_dir(_input_name(fmt, scale))
    if system not in ENGINE_RUNNERS:
        warm_up()
    if system in ENGINE_RUNNERS:
        from systems import import_engine

        import_engine(system)
        start = time.perf_counter()
        result = ENGINE_RUNNERS[system](fmt, source)
    elif system == PYARROW_2THREADS:
        import pyarrow.csv
        import pyarrow.json  # noqa: F401  (imported before the clock, as elsewhere)

        start = time.perf_counter()
        result = _pyarrow_threads(fmt, source)
    elif system == RAY_DATA:
        from systems import ship_by_value, start_ray_data

        ray = start_ray_data()
        ship_by_value(__name__)
        start = time.perf_counter()
        result = _ray_like(ray.data, fmt, source)
    else:
        from systems import ship_by_value, start_shardflow

        sf = start_shardflow(system)
        ship_by_value(__name__)
        start = time.perf_counter()
        result = _ray_like(sf, fmt, source)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "result": result, "t_result": time.time()}
