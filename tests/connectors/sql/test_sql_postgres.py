"""read_sql and write_sql against a real PostgreSQL 15 server (started by the ``postgres``
fixture), with psycopg's own results as the oracle."""

from __future__ import annotations

import datetime
import decimal
import functools
import hashlib
import threading
import time
import traceback

import postgres_server
import pyarrow as pa
import pytest
from postgres_server import run as pg_run

import shardflow as sf
from shardflow.connectors.sql import SQLDatasink, SQLDatasource
from shardflow.connectors.sql.conformance_suite import SQLSuite

psycopg = pytest.importorskip("psycopg")

TYPES_DDL = """
    id integer PRIMARY KEY, small smallint, big bigint, flag boolean, f4 real, f8 double precision,
    price numeric(12, 3), anynum numeric, label varchar(20), body text, raw bytea, day date,
    at timestamp, at_tz timestamptz, span interval, doc json, docb jsonb, ints int[],
    words text[], uid uuid
"""


def _insert_typed_rows(connect, table, n):
    pg_run(
        connect,
        f"CREATE TABLE {table} ({TYPES_DDL})",
        f"""INSERT INTO {table}
            SELECT i, (i % 100)::smallint, i * 1000000000::bigint, i % 2 = 0, i / 3.0, i / 7.0,
                   (i * 1.125)::numeric(12, 3), i / 8.0, 'v' || i, repeat('x', i % 5),
                   decode(lpad(to_hex(i), 4, '0'), 'hex'), date '2024-01-01' + i,
                   timestamp '2024-01-01 00:00:00' + i * interval '1 minute',
                   timestamptz '2024-01-01 00:00:00+02' + i * interval '1 hour',
                   i * interval '1 second', json_build_object('i', i, 'k', 'x'),
                   jsonb_build_object('i', i), ARRAY[i, i + 1], ARRAY['a', 'b' || i],
                   md5(i::text)::uuid
            FROM generate_series(1, {n}) AS i""",
    )
    with connect() as connection:
        connection.execute(
            f"UPDATE {table} SET big = NULL, price = NULL, at_tz = NULL WHERE id = 1"
        )


def test_columns_are_typed_from_the_description(pg_connect, pg_table, backend):
    _insert_typed_rows(pg_connect, pg_table, 50)
    table = sf.read_sql(f"SELECT * FROM {pg_table}", pg_connect).to_arrow().sort_by("id")
    assert table.schema == pa.schema(
        [
            ("id", pa.int32()), ("small", pa.int16()), ("big", pa.int64()), ("flag", pa.bool_()),
            ("f4", pa.float32()), ("f8", pa.float64()), ("price", pa.decimal128(12, 3)),
            ("anynum", pa.decimal128(38, 18)), ("label", pa.string()), ("body", pa.string()),
            ("raw", pa.binary()), ("day", pa.date32()), ("at", pa.timestamp("us")),
            ("at_tz", pa.timestamp("us", tz="UTC")), ("span", pa.duration("us")),
            ("doc", pa.string()), ("docb", pa.string()), ("ints", pa.list_(pa.int32())),
            ("words", pa.list_(pa.string())), ("uid", pa.string()),
        ]
    )  # fmt: skip
    # The oracle: psycopg's own values, and the server's text for JSON and UUIDs.
    rows = pg_run(
        pg_connect,
        f"SELECT id, price, anynum, at_tz, raw, doc::text, docb::text, uid::text, ints, span "
        f"FROM {pg_table} ORDER BY id",
    )
    got = table.to_pydict()
    assert got["price"] == [r[1] for r in rows]
    assert got["anynum"] == [r[2] for r in rows]
    assert got["at_tz"] == [r[3] for r in rows]  # the same instants, in UTC
    assert got["at_tz"][1].tzinfo is not None
    assert got["raw"] == [bytes(r[4]) for r in rows]
    assert got["doc"] == [r[5] for r in rows] and got["docb"] == [r[6] for r in rows]
    assert got["uid"] == [r[7] for r in rows]
    assert got["ints"] == [r[8] for r in rows] and got["span"] == [r[9] for r in rows]
    assert got["big"][0] is None and got["big"][1] == 2_000_000_000


def test_copy_path_gives_psycopg_s_values(pg_connect, pg_table):
    """Results whose columns all have exact CSV text are read through COPY: the values are
    psycopg's (NULL and empty strings, quotes, commas, newlines, NaN and infinities)."""
    pg_run(
        pg_connect,
        f"CREATE TABLE {pg_table} (id int, flag bool, f8 float8, f4 real, price numeric(10, 2), "
        "label text, day date, at timestamp, at_tz timestamptz, doc jsonb, uid uuid)",
        f"""INSERT INTO {pg_table} VALUES
            (1, true, 'NaN', 'Infinity', 12.5, '', '2024-02-29', '2024-01-01 00:00:00.000001',
             '2024-06-01 12:00:00-07', '{{"a": [1, "x,y"]}}', md5('a')::uuid),
            (2, NULL, '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
            (3, false, 1e-300, -0.5, -0.01, 'say "hi",
then go', '0001-01-01', '2262-04-11 23:47:16', '1970-01-01 00:00:00+00', 'null', NULL)""",
    )
    got = sf.read_sql(f"SELECT * FROM {pg_table}", pg_connect).to_arrow().sort_by("id")
    assert got.schema.field("at_tz").type == pa.timestamp("us", tz="UTC")
    rows = pg_run(
        pg_connect,
        f"SELECT id, flag, f8, f4, price, label, day, at, at_tz, doc::text, uid::text "
        f"FROM {pg_table} ORDER BY id",
    )
    for name, index in (("flag", 1), ("price", 4), ("label", 5), ("day", 6), ("at", 7)):
        assert got.column(name).to_pylist() == [r[index] for r in rows], name
    assert got.column("at_tz").to_pylist() == [r[8] for r in rows]
    assert got.column("doc").to_pylist() == [r[9] for r in rows]
    assert got.column("uid").to_pylist() == [r[10] for r in rows]
    f8 = got.column("f8").to_pylist()
    assert f8[0] != f8[0] and f8[1] == float("-inf") and f8[2] == 1e-300
    assert got.column("f4").to_pylist() == [float("inf"), None, -0.5]


def test_statements_that_cannot_be_subqueries_run_as_written(pg_connect):
    rows = sf.read_sql("SHOW server_version", pg_connect).take_all()
    assert rows[0]["server_version"].startswith("15")
    with pytest.raises(psycopg.errors.SyntaxError, match="executing the query"):
        sf.read_sql("SELEC 1", pg_connect).take_all()


def test_unconstrained_numeric_is_rounded_to_18_places(pg_connect):
    table = sf.read_sql("SELECT 1 / 3.0 AS third, 12345678901234567890.5 AS big", pg_connect)
    row = table.take_all()[0]
    assert row["third"] == decimal.Decimal("0.333333333333333333")
    assert row["big"] == decimal.Decimal("12345678901234567890.5")


def test_sharded_read_matches_the_table(pg_connect, pg_table, backend):
    pg_run(
        pg_connect,
        f"CREATE TABLE {pg_table} (id int, k text)",
        f"INSERT INTO {pg_table} SELECT i, CASE WHEN i % 9 = 0 THEN NULL ELSE 'k' || (i % 13) END "
        "FROM generate_series(1, 2000) AS i",
    )
    source = SQLDatasource(f"SELECT * FROM {pg_table}", pg_connect, shard_keys=["k"])
    tasks = source.get_read_tasks(4)
    assert len(tasks) == 4
    shards = [sorted(r["id"] for b in task() for r in b.to_pylist()) for task in tasks]
    assert all(shards) and sorted(i for s in shards for i in s) == list(range(1, 2001))
    ds = sf.read_sql(
        f"SELECT * FROM {pg_table} WHERE id > %s", pg_connect, sql_params=(1000,),
        shard_keys=["k", "id"], override_num_blocks=3,
    )  # fmt: skip
    assert sorted(r["id"] for r in ds.take_all()) == list(range(1001, 2001))


@pytest.mark.parametrize(
    "columns, statement",
    [
        ("i AS id, repeat('y', 100) AS pad", "COPY (SELECT%%shardflow_%%"),  # COPY ... TO STDOUT
        ("i AS id, i * interval '1 s' AS span", "FETCH FORWARD%%shardflow_%%"),  # a cursor
    ],
    ids=["copy", "cursor"],
)
def test_reads_stream_from_the_server(pg_connect, pg_table, columns, statement):
    pg_run(
        pg_connect,
        f"CREATE TABLE {pg_table} AS SELECT {columns} FROM generate_series(1, 200000) AS i",
    )
    (task,) = SQLDatasource(f"SELECT * FROM {pg_table}", pg_connect).get_read_tasks(1)
    blocks = task()
    try:
        first = next(blocks)
        # While the task holds its first block, the server still sends the rest.
        active = pg_run(
            pg_connect, f"SELECT count(*) FROM pg_stat_activity WHERE query ILIKE '{statement}'"
        )
        assert active[0][0] == 1
        rest = sum(b.num_rows for b in blocks)
        assert first.num_rows < 200000 and first.num_rows + rest == 200000
    finally:
        blocks.close()  # ends the task's transaction (it holds a lock on the table)


def test_write_round_trip_and_staging(pg_connect, pg_table, backend):
    pg_run(pg_connect, f"CREATE TABLE {pg_table} (id int PRIMARY KEY, name text, at timestamptz)")
    moment = datetime.datetime(2024, 5, 1, 12, tzinfo=datetime.timezone.utc)
    data = [{"id": i, "name": f"n{i}", "at": moment} for i in range(3000)]
    sql = f"INSERT INTO {pg_table} VALUES (%s, %s, %s)"
    sf.from_items(data, override_num_blocks=3).write_sql(sql, pg_connect)
    rows = pg_run(pg_connect, f"SELECT id, name, at FROM {pg_table} ORDER BY id")
    assert rows == [(d["id"], d["name"], d["at"]) for d in data]
    assert _staging_tables(pg_connect) == []


def _staging_tables(connect):
    return pg_run(
        connect,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_name LIKE 'shardflow_staging%%'",
    )


def test_a_unique_violation_leaves_the_table_as_it_was(pg_connect, pg_table):
    pg_run(
        pg_connect,
        f"CREATE TABLE {pg_table} (id int PRIMARY KEY, name text)",
        f"INSERT INTO {pg_table} VALUES (42, 'old')",
    )
    data = [{"id": i, "name": "new"} for i in range(100)]
    with pytest.raises(psycopg.errors.UniqueViolation) as info:
        sf.from_items(data, override_num_blocks=4).write_sql(
            f"INSERT INTO {pg_table} VALUES (%s, %s)", pg_connect
        )
    assert f"table {pg_table}" in str(info.value) and "moving the staged rows" in str(info.value)
    assert pg_run(pg_connect, f"SELECT * FROM {pg_table}") == [(42, "old")]
    assert _staging_tables(pg_connect) == []


def _kill_writers(conninfo, batch):
    """Terminate the write tasks' connections (a dropped connection) on the third block."""
    if 200 in batch["id"]:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'shardflow-writer'"
            )
    return batch


def test_a_dropped_connection_fails_the_write_and_leaves_nothing(postgres, pg_connect, pg_table):
    pg_run(pg_connect, f"CREATE TABLE {pg_table} (id int, name text)")
    writer = functools.partial(
        psycopg.connect, postgres.conninfo + " application_name=shardflow-writer"
    )
    blocks = [
        pa.table({"id": list(range(i, i + 100)), "name": ["x"] * 100}) for i in (0, 100, 200, 300)
    ]
    ds = (
        sf.from_arrow(blocks)
        .repartition(1)
        .map_batches(functools.partial(_kill_writers, postgres.conninfo), batch_size=None)
    )
    with pytest.raises(psycopg.OperationalError) as info:
        ds.write_sql(f"INSERT INTO {pg_table} VALUES (%s, %s)", writer)
    text = str(info.value)
    assert f"table {pg_table}" in text and ("inserting rows" in text or "commit" in text)
    assert postgres_server.PASSWORD not in text
    assert pg_run(pg_connect, f"SELECT count(*) FROM {pg_table}") == [(0,)]
    assert _staging_tables(pg_connect) == []


def test_passwords_never_appear(postgres, pg_table):
    wrong = postgres.conninfo.replace(postgres_server.PASSWORD, "wrong-" + postgres_server.PASSWORD)
    connect = functools.partial(psycopg.connect, wrong)
    source = SQLDatasource("SELECT 1", connect)
    sink = SQLDatasink(f"INSERT INTO {pg_table} VALUES (%s)", connect)
    for shown in (repr(source), repr(sink), repr(sf.read_datasource(source))):
        assert postgres_server.PASSWORD not in shown
    with pytest.raises(psycopg.OperationalError) as info:
        sf.read_datasource(source).take_all()
    text = "".join(traceback.format_exception(info.value)) + repr(info.value)
    assert "password authentication failed" in text and "connecting" in text
    assert postgres_server.PASSWORD not in text
    with pytest.raises(psycopg.OperationalError) as info:
        sf.from_items([{"a": 1}]).write_sql(f"INSERT INTO {pg_table} VALUES (%s)", connect)
    assert postgres_server.PASSWORD not in "".join(traceback.format_exception(info.value))


class TestPostgresConformance(SQLSuite):
    """The connector's conformance suite, on PostgreSQL (``%s`` placeholders)."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres):
        type(self).conninfo = postgres.conninfo

    def connection_factory(self, tmp_path):
        return functools.partial(psycopg.connect, self.conninfo)

    def placeholder(self):
        return "%s"

    def table_name(self, tmp_path, role):
        return f"{role}_{hashlib.md5(str(tmp_path).encode()).hexdigest()[:12]}"


def test_concurrent_sharded_reads_in_threads(pg_connect, pg_table):
    """Two pipelines reading the same table at once, each sharded (thread safety)."""
    pg_run(pg_connect, f"CREATE TABLE {pg_table} AS SELECT i AS id FROM generate_series(1, 5000) i")
    results = []

    def read():
        ds = sf.read_sql(f"SELECT * FROM {pg_table}", pg_connect, shard_keys=["id"])
        results.append(ds.sum("id"))

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    for t in threads:
        t.join(max(1, deadline - time.monotonic()))
    assert results == [5000 * 5001 // 2] * 2
