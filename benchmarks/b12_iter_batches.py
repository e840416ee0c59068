"""B12-ITER: one training epoch: iterate a Parquet folder in batches of 8,192 rows.

The input is B4's (32 Parquet files, 22M rows x scale, five columns; generated once). The
consumer is the same everywhere and deliberately cheap, so that the figure is the loader's
cost: it counts the rows and adds up the ``id`` column of each batch.

- shardflow and Ray Data: ``read_parquet(folder).iter_batches(batch_size=8192,
  batch_format="pyarrow")``;
- the bare reference (``pyarrow-loop``): one thread looping over the files in name order with
  ``pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=8192)``;
- Polars: ``scan_parquet(...).collect_batches(chunk_size=8192)``;
- DuckDB: ``SELECT * FROM read_parquet(...)`` then ``to_arrow_reader(8192)`` (called
  ``fetch_record_batch`` before DuckDB 2);
- Daft: ``read_parquet(...).into_batches(8192).to_arrow_iter()`` (Daft sizes its batches on
  a best-effort basis).

The time covers the whole epoch, from building the dataset to the last batch; imports and
cluster start-up come first. Every system must see every row once: the row count and the
sum of ``id`` are checked against the input's.
"""

from __future__ import annotations

import os
import time
from typing import Any

import b4_parquet_etl as b4
from registry import (
    DAFT,
    DUCKDB,
    ENGINES,
    POLARS,
    PYARROW_LOOP,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

BATCH_SIZE = 8192


class Tally:
    """The consumer: counts rows and batches and sums ``id`` (pyarrow or Polars batches)."""

    def __init__(self) -> None:
        self.rows = self.batches = self.id_sum = 0

    def add_arrow(self, batch: Any) -> None:
        import pyarrow.compute as pc

        self.rows += batch.num_rows
        self.batches += 1
        self.id_sum += pc.sum(batch.column("id")).as_py() or 0

    def add_polars(self, frame: Any) -> None:
        self.rows += frame.height
        self.batches += 1
        self.id_sum += frame.get_column("id").sum() or 0

    def result(self) -> dict[str, int]:
        return {"rows": self.rows, "id_sum": int(self.id_sum), "batches": self.batches}


def warm_up() -> None:
    """The consumer's first ``pyarrow.compute`` call imports pandas and parses signatures:
    every system pays it before the clock starts."""
    import pyarrow as pa

    Tally().add_arrow(pa.record_batch({"id": [1]}))


def _expected(scale: float) -> dict[str, int]:
    n = b4.num_rows(scale)
    return {"rows": n, "id_sum": n * (n - 1) // 2}


def _check(results: dict[str, Any], scale: float) -> str | None:
    want = _expected(scale)
    wrong = {
        system: got for system, got in results.items() if {k: got.get(k) for k in want} != want
    }
    if wrong:
        return f"B12-ITER: every system must see {want}; got {wrong}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B12-ITER",
        title=(
            f"read_parquet(B4's input).iter_batches(batch_size={BATCH_SIZE}, pyarrow): one "
            "epoch, rows counted and id summed"
        ),
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PYARROW_LOOP, *ENGINES),
        rows=b4.num_rows,
        check=_check,
        prepare=b4.prepare,
        targets=(
            Target(
                "B12-ITER: shardflow-local within 1.15x of the bare pyarrow loop",
                SHARDFLOW_LOCAL,
                PYARROW_LOOP,
                1.15,
                kind="within",
            ),
        ),
        peers=(PYARROW_LOOP, *ENGINES),
    ),
]


def _files(source: str) -> list[str]:
    return sorted(os.path.join(source, f) for f in os.listdir(source) if f.endswith(".parquet"))


def _pyarrow_loop(source: str, tally: Tally) -> None:
    import pyarrow.parquet as pq

    for path in _files(source):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_SIZE):
            tally.add_arrow(batch)


def _polars(source: str, tally: Tally) -> None:
    import polars as pl

    frames = pl.scan_parquet(os.path.join(source, "*.parquet"))
    for frame in frames.collect_batches(chunk_size=BATCH_SIZE):
        tally.add_polars(frame)


def _duckdb(source: str, tally: Tally) -> None:
    import duckdb

    with duckdb.connect() as con:
        query = f"SELECT * FROM read_parquet('{os.path.join(source, '*.parquet')}')"
        result = con.execute(query)
        # DuckDB 2 renamed fetch_record_batch to to_arrow_reader.
        reader = getattr(result, "to_arrow_reader", None) or result.fetch_record_batch
        for batch in reader(BATCH_SIZE):
            tally.add_arrow(batch)


def _daft(source: str, tally: Tally) -> None:
    import daft

    frame = daft.read_parquet(os.path.join(source, "*.parquet")).into_batches(BATCH_SIZE)
    for batch in frame.to_arrow_iter():
        tally.add_arrow(batch)


def _ray_like(module: Any, source: str, tally: Tally) -> None:
    """shardflow and Ray Data: the same calls on either module."""
    for batch in module.read_parquet(source).iter_batches(
        batch_size=BATCH_SIZE, batch_format="pyarrow"
    ):
        tally.add_arrow(batch)


RUNNERS = {PYARROW_LOOP: _pyarrow_loop, POLARS: _polars, DUCKDB: _duckdb, DAFT: _daft}


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run one epoch on ``system`` (in the child) and return the timed tally."""
    b4.prepare(scale)
    source = b4.input_files(scale)
    warm_up()
    tally = Tally()

    if system in RUNNERS:
        from systems import import_engine

        import_engine("pyarrow.parquet" if system == PYARROW_LOOP else system)
        start = time.perf_counter()
        RUNNERS[system](source, tally)
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        start = time.perf_counter()
        _ray_like(ray.data, source, tally)
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        start = time.perf_counter()
        _ray_like(sf, source, tally)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "result": tally.result(), "t_result": time.time()}
