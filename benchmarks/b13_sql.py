"""B13: read a PostgreSQL table into one Arrow table (read_sql).

A PostgreSQL server (the same helper the tests use, tests/postgres_server.py) is started in
the parent before the children and stopped when the run ends; it listens on 127.0.0.1. The
table (generated once per run, server side) has 2M rows x scale: ``id`` (bigint), ``value``
(double precision), ``category`` (text, one of 50), ``day`` (date) and ``at``
(timestamptz). Every system reads ``SELECT * FROM b13_events`` into one Arrow table in the
driver:

- ``shardflow-local``: ``sf.read_sql(sql, factory).to_arrow()`` (one task, no shard keys);
- ``ray-data``: ``ray.data.read_sql(sql, factory)`` and its Arrow blocks;
- ``psycopg-copy``: a bare loop, ``COPY (sql) TO STDOUT (FORMAT csv)`` through psycopg into
  one buffer, parsed by ``pyarrow.csv.read_csv`` with the column types given;
- ``psycopg-cursor``: a bare loop, a psycopg cursor's ``fetchmany(65536)`` turned into Arrow
  columns (``pa.array`` over each column's values).

The time covers connecting, the query and building the table. The results (rows, the sum of
``id``) must match the values computed by the server.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from typing import Any

from registry import RAY_DATA, SHARDFLOW_LOCAL, Benchmark, Target, Unavailable

PSYCOPG_COPY = "psycopg-copy"
PSYCOPG_CURSOR = "psycopg-cursor"
ROWS = 2_000_000
TABLE = "b13_events"
SQL = f"SELECT * FROM {TABLE}"
_ENV = "SHARDFLOW_BENCH_PG_CONNINFO"
_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")


def rows(scale: float) -> int:
    return max(10_000, int(ROWS * scale))


def prepare(scale: float) -> None:
    """Start the server (once per run) and create the table when its size differs."""
    import psycopg

    conninfo = os.environ.get(_ENV)
    if conninfo is None:
        sys.path.insert(0, _TESTS)
        import postgres_server

        bindir = postgres_server.find_bindir()
        if bindir is None:
            return  # the children report "not available"
        server = postgres_server.start(bindir)
        atexit.register(server.stop)
        conninfo = os.environ[_ENV] = server.conninfo
    n = rows(scale)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f"DROP TABLE IF EXISTS {TABLE}")
        connection.execute(
            f"CREATE TABLE {TABLE} AS SELECT i::bigint AS id, ((i % 1000) / 1000.0 + 0.5)::float8 AS value, "
            f"'category-' || (i % 50) AS category, date '2024-01-01' + (i % 365) AS day, "
            f"timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' AS at "
            f"FROM generate_series(0, {n - 1}) AS i"
        )
        connection.execute(f"ANALYZE {TABLE}")


def _check(results: dict[str, Any], scale: float) -> str | None:
    n = rows(scale)
    want = {"rows": n, "id_sum": n * (n - 1) // 2}
    wrong = {s: got for s, got in results.items() if got != want}
    return f"B13: every system must read {want}; got {wrong}" if wrong else None


BENCHMARKS = [
    Benchmark(
        name="B13",
        title="read_sql(PostgreSQL table, 2M rows x scale, 5 columns) -> one Arrow table",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, RAY_DATA, PSYCOPG_COPY, PSYCOPG_CURSOR),
        rows=rows,
        check=_check,
        prepare=prepare,
        targets=(
            Target("B13: shardflow-local faster than Ray Data", SHARDFLOW_LOCAL, RAY_DATA, 1.0),
            Target(
                "B13: shardflow-local within 1.3x of the best bare psycopg loop",
                SHARDFLOW_LOCAL,
                (PSYCOPG_COPY, PSYCOPG_CURSOR),
                1.3,
                kind="within",
            ),
        ),
    ),
]


def _copy_loop(conninfo: str) -> Any:
    import io

    import psycopg
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = ["id", "value", "category", "day", "at"]
    types = [pa.int64(), pa.float64(), pa.string(), pa.date32(), pa.timestamp("us")]
    select = "id, value, category, day, at AT TIME ZONE 'UTC'"
    buffer = io.BytesIO()
    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        with cursor.copy(f"COPY (SELECT {select} FROM {TABLE}) TO STDOUT (FORMAT csv)") as copy:
            for row in copy:
                buffer.write(row)
    return pacsv.read_csv(
        pa.py_buffer(buffer.getbuffer()),
        read_options=pacsv.ReadOptions(column_names=names),
        convert_options=pacsv.ConvertOptions(column_types=dict(zip(names, types))),
    )


def _cursor_loop(conninfo: str) -> Any:
    import psycopg
    import pyarrow as pa

    parts = []
    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        cursor.execute(SQL)
        names = [d.name for d in cursor.description]
        while batch := cursor.fetchmany(65536):
            parts.append(pa.table(dict(zip(names, [pa.array(c) for c in zip(*batch)]))))
    return pa.concat_tables(parts)


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    import psycopg
    import pyarrow as pa
    import pyarrow.compute as pc

    conninfo = os.environ.get(_ENV)
    if conninfo is None:
        raise Unavailable("no PostgreSQL server (its binaries were not found)")
    factory = functools.partial(psycopg.connect, conninfo)
    if system == PSYCOPG_COPY:
        start = time.perf_counter()
        table = _copy_loop(conninfo)
    elif system == PSYCOPG_CURSOR:
        start = time.perf_counter()
        table = _cursor_loop(conninfo)
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        start = time.perf_counter()
        table = pa.concat_tables(ray.get(ray.data.read_sql(SQL, factory).to_arrow_refs()))
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        start = time.perf_counter()
        table = sf.read_sql(SQL, factory).to_arrow()
    seconds = time.perf_counter() - start
    result = {"rows": table.num_rows, "id_sum": int(pc.sum(table["id"]).as_py() or 0)}
    return {"seconds": seconds, "result": result, "t_result": time.time()}
