"""B4: Parquet ETL: read ~1 GB of Parquet -> vectorized map_batches -> write Parquet.

The input (generated once into ``benchmarks/data/``, reused while its size matches) is
32 Parquet files of 22M rows in all at scale 1 (about 1.06 GB in memory): ``id`` (int64),
``a`` (float64 in [0, 1)), ``b`` (float64), ``c`` (int32) and ``label`` (a string of 8 to 24
characters). Every system runs the same pyarrow transform (:func:`etl`: keep rows with
``a >= 0.1``, add ``score = 1.5 * a + b`` and ``key = 3 * c + len(label)``) with
``batch_format="pyarrow"`` and the same ``batch_size``, then writes snappy Parquet to a
fresh folder. The bare baseline runs ``read_table -> etl -> write_table`` per file on two
threads. The time covers the pipeline only (imports and cluster start-up come first);
afterwards the child reads its output back with pyarrow and reports its row count and the
sums of ``id`` and ``key``, which must equal the values computed from the generated input.

Polars, DuckDB and Daft run the same query in their own languages (a lazy scan, SQL, a Daft
DataFrame) and write snappy Parquet with their own writers: Polars and DuckDB write one file,
Daft one or more. Their string lengths count characters, as ``pyarrow.compute.utf8_length``
does (the labels are ASCII).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any

from benchdata import ensure_input, files_dir, fresh_output_dir, read_manifest, remove
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

BASE_ROWS = 22_000_000
NUM_FILES = 32
BATCH_SIZE = 131_072
NUM_THREADS = 2
KEEP_FROM = 0.1  # rows with a >= KEEP_FROM are kept (about 90%)
SEED = 4
FORMAT_VERSION = 1
VOCABULARY_SIZE = 1000


def num_rows(scale: float) -> int:
    return max(NUM_FILES, int(BASE_ROWS * scale))


def _input_name(scale: float) -> str:
    return f"b4_parquet_{num_rows(scale)}rows_{NUM_FILES}files"


def input_files(scale: float) -> str:
    """The folder of the generated input files for ``scale`` (B12-ITER reads them too)."""
    return files_dir(_input_name(scale))


def _spec(scale: float) -> dict[str, Any]:
    return {"rows": num_rows(scale), "files": NUM_FILES, "seed": SEED, "version": FORMAT_VERSION}


def etl(batch: Any) -> Any:
    """The transform every system runs, on a ``pyarrow.Table`` batch."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kept = batch.filter(pc.greater_equal(batch["a"], KEEP_FROM))
    score = pc.add(pc.multiply(kept["a"], 1.5), kept["b"])
    key = pc.add(
        pc.multiply(kept["c"].cast(pa.int64()), 3),
        pc.utf8_length(kept["label"]).cast(pa.int64()),
    )
    return kept.append_column("score", score).append_column("key", key)


def warm_up() -> None:
    """Run :func:`etl` once on a tiny table before the clock starts (pyarrow's compute
    functions import pandas and parse their signatures on first use)."""
    import pyarrow as pa

    etl(
        pa.table(
            {"id": [1], "a": [0.5], "b": [0.5], "c": pa.array([1], pa.int32()), "label": ["x"]}
        )
    )


def _generate(folder: str, scale: float) -> dict[str, Any]:
    """Write the input files; return the expected results, computed with NumPy alone."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(8, 25, VOCABULARY_SIZE)
    vocabulary = ["".join(rng.choice(letters, n)) for n in lengths]
    vocabulary_array = pa.array(vocabulary, pa.string())
    total = num_rows(scale)
    bounds = np.linspace(0, total, NUM_FILES + 1).astype(np.int64)
    rows = id_sum = key_sum = nbytes = 0
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        n = int(hi - lo)
        ids = np.arange(lo, hi, dtype=np.int64)
        a = rng.random(n)
        b = rng.standard_normal(n)
        c = rng.integers(0, 1000, n, dtype=np.int32)
        words = rng.integers(0, VOCABULARY_SIZE, n)
        table = pa.table(
            {
                "id": ids,
                "a": a,
                "b": b,
                "c": c,
                "label": vocabulary_array.take(pa.array(words)),
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i:03d}.parquet"), compression="snappy")
        nbytes += table.nbytes
        keep = a >= KEEP_FROM
        rows += int(keep.sum())
        id_sum += int(ids[keep].sum())
        key_sum += int((c[keep].astype(np.int64) * 3 + lengths[words[keep]]).sum())
    return {
        "expected": {"rows": rows, "id_sum": id_sum, "key_sum": key_sum},
        "inmemory_bytes": nbytes,
    }


def prepare(scale: float) -> dict[str, Any]:
    """Generate the input for ``scale`` unless a matching one is already there."""
    return ensure_input(_input_name(scale), _spec(scale), lambda folder: _generate(folder, scale))


def _check(results: dict[str, Any], scale: float) -> str | None:
    manifest = read_manifest(_input_name(scale))
    if manifest is None:
        return "B4: the input's manifest is missing; cannot check the results"
    want = manifest["expected"]
    wrong = {system: got for system, got in results.items() if got != want}
    if wrong:
        return f"B4: every system must write {want}; got {wrong}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B4",
        title=(
            "read_parquet(~1 GB x scale, 32 files) -> map_batches(pyarrow: filter, 2 new "
            "columns) -> write_parquet"
        ),
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PYARROW_2THREADS, *ENGINES),
        rows=num_rows,
        check=_check,
        prepare=prepare,
        targets=(
            Target(
                "B4: shardflow-local >= 2x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 2.0
            ),
            Target(
                "B4: shardflow-local within 1.25x of the bare pyarrow loop",
                SHARDFLOW_LOCAL,
                PYARROW_2THREADS,
                1.25,
                kind="within",
            ),
            Target(
                "B4: shardflow-local within 1.25x of the fastest of Polars, DuckDB, Daft",
                SHARDFLOW_LOCAL,
                ENGINES,
                1.25,
                kind="within",
            ),
            Target(
                "B4: shardflow-local peak RSS at most 1.5x Polars'",
                SHARDFLOW_LOCAL,
                POLARS,
                1.5,
                kind="within",
                metric="rss",
            ),
        ),
        peers=ENGINES,
    ),
]


def _pyarrow_loop(source: str, out: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.parquet as pq

    os.makedirs(out)
    files = sorted(name for name in os.listdir(source) if name.endswith(".parquet"))

    def one(name: str) -> None:
        table = pq.read_table(os.path.join(source, name))
        pq.write_table(etl(table), os.path.join(out, name), compression="snappy")

    with ThreadPoolExecutor(max_workers=NUM_THREADS) as pool:
        list(pool.map(one, files))


def summarize_output(out: str) -> dict[str, int]:
    """Row count and sums of ``id`` and ``key`` of the Parquet files under ``out``."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    table = pads.dataset(out, format="parquet").to_table(columns=["id", "key"])
    return {
        "rows": table.num_rows,
        "id_sum": int(pc.sum(table["id"]).as_py() or 0),
        "key_sum": int(pc.sum(table["key"]).as_py() or 0),
    }


def _polars(source: str, out: str) -> None:
    from systems import import_engine

    pl = import_engine("polars")
    os.makedirs(out)
    (
        pl.scan_parquet(os.path.join(source, "*.parquet"))
        .filter(pl.col("a") >= KEEP_FROM)
        .with_columns(
            score=pl.col("a") * 1.5 + pl.col("b"),
            key=pl.col("c").cast(pl.Int64) * 3 + pl.col("label").str.len_chars().cast(pl.Int64),
        )
        .sink_parquet(os.path.join(out, "part-0.parquet"), compression="snappy")
    )


def _duckdb(source: str, out: str) -> None:
    from systems import import_engine

    duckdb = import_engine("duckdb")
    os.makedirs(out)
    target = os.path.join(out, "part-0.parquet")
    with duckdb.connect() as con:
        con.execute(
            f"""COPY (
                SELECT *, 1.5 * a + b AS score,
                       3 * CAST(c AS BIGINT) + CAST(length(label) AS BIGINT) AS key
                FROM read_parquet('{os.path.join(source, "*.parquet")}')
                WHERE a >= {KEEP_FROM}
            ) TO '{target}' (FORMAT parquet, COMPRESSION snappy)"""
        )


def _daft(source: str, out: str) -> None:
    from systems import import_engine

    daft = import_engine("daft")
    col, int64 = daft.col, daft.DataType.int64()
    (
        daft.read_parquet(os.path.join(source, "*.parquet"))
        .where(col("a") >= KEEP_FROM)
        .with_columns(
            {
                "score": col("a") * 1.5 + col("b"),
                "key": col("c").cast(int64) * 3 + col("label").length().cast(int64),
            }
        )
        .write_parquet(out, compression="snappy")
    )


ENGINE_RUNNERS = {POLARS: _polars, DUCKDB: _duckdb, DAFT: _daft}


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child), time it, and read the output back."""
    prepare(scale)
    source = input_files(scale)
    out = fresh_output_dir(f"b4-{system}")
    if system not in ENGINE_RUNNERS:
        warm_up()
    try:
        if system in ENGINE_RUNNERS:
            from systems import import_engine

            import_engine(system)  # imported before the clock, as elsewhere
            start = time.perf_counter()
            ENGINE_RUNNERS[system](source, out)
        elif system == PYARROW_2THREADS:
            import pyarrow.parquet  # noqa: F401  (imported before the clock, as elsewhere)

            start = time.perf_counter()
            _pyarrow_loop(source, out)
        elif system == RAY_DATA:
            from systems import ship_by_value, start_ray_data

            ray = start_ray_data()
            ship_by_value(__name__)
            start = time.perf_counter()
            (
                ray.data.read_parquet(source)
                .map_batches(
                    etl, batch_size=BATCH_SIZE, batch_format="pyarrow", zero_copy_batch=True
                )
                .write_parquet(out)
            )
        else:
            from systems import ship_by_value, start_shardflow

            sf = start_shardflow(system)
            ship_by_value(__name__)
            start = time.perf_counter()
            (
                sf.read_parquet(source)
                .map_batches(
                    etl, batch_size=BATCH_SIZE, batch_format="pyarrow", zero_copy_batch=True
                )
                .write_parquet(out)
            )
        seconds = time.perf_counter() - start
        done = time.time()
        result = summarize_output(out)
    finally:
        remove(out)
    return {"seconds": seconds, "result": result, "t_result": done}
