"""read_sql and write_sql on SQLite (files and shared in-memory databases), against sqlite3
itself as the oracle."""

from __future__ import annotations

import functools
import sqlite3
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.connectors.sql import SQLDatasink, SQLDatasource

ROWS = [(i, f"name{i % 7}" if i % 5 else None, i / 4, bytes([i % 256]) * 3) for i in range(300)]


def _fill(path, rows=ROWS, ddl="id INTEGER PRIMARY KEY, name TEXT, score REAL, blob BLOB"):
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE t ({ddl})")
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    connection.close()


def _oracle(path, sql):
    with sqlite3.connect(path) as connection:
        cursor = connection.execute(sql)
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    connection.close()
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _sorted(table, key="id"):
    return table.sort_by(key).to_pydict()


def test_read_matches_sqlite_with_typed_columns(sqlite_file, backend):
    path, connect = sqlite_file
    _fill(path)
    table = sf.read_sql("SELECT * FROM t", connect).to_arrow()
    assert table.schema == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()), ("blob", pa.binary())]
    )
    assert _sorted(table) == _oracle(path, "SELECT * FROM t ORDER BY id")


def test_read_parameters_and_an_in_memory_database():
    uri = "file:shardflow_sql_test?mode=memory&cache=shared"
    keep = sqlite3.connect(uri, uri=True)  # the database lives while a connection is open
    try:
        keep.execute("CREATE TABLE t (id INTEGER, name TEXT)")
        keep.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"n{i}") for i in range(100)])
        keep.commit()
        connect = functools.partial(sqlite3.connect, uri, uri=True)
        ds = sf.read_sql("SELECT * FROM t WHERE id >= ?", connect, sql_params=(90,))
        assert sorted(r["id"] for r in ds.take_all()) == list(range(90, 100))
        sharded = sf.read_sql("SELECT * FROM t", connect, shard_keys=["id"], override_num_blocks=2)
        assert sharded.count() == 100
    finally:
        keep.close()


def _shard_rows(source, parallelism):
    tasks = source.get_read_tasks(parallelism)
    return [pa.concat_tables(list(task())).to_pylist() for task in tasks]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(
        st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3)), min_size=1, max_size=200
    ),
    parallelism=st.integers(2, 7),
)
def test_shards_hold_every_row_exactly_once(keys, parallelism):
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/db.sqlite"
        rows = [(i, k) for i, k in enumerate(keys)]
        _fill(path, rows, ddl="id INTEGER, k")
        source = SQLDatasource(
            "SELECT * FROM t", functools.partial(sqlite3.connect, path), shard_keys=["k", "id"]
        )
        source.MIN_ROWS_PER_READ_TASK = 1
        shards = _shard_rows(source, parallelism)
        assert len(shards) == min(parallelism, len(rows))
        ids = sorted(r["id"] for shard in shards for r in shard)
        assert ids == list(range(len(rows)))  # every row in exactly one shard


def test_rows_with_null_shard_keys_are_read(sqlite_file):
    path, connect = sqlite_file
    _fill(path)  # every fifth name is NULL
    ds = sf.read_sql("SELECT * FROM t", connect, shard_keys=["name"], override_num_blocks=3)
    assert ds.count() == len(ROWS)
    assert sorted(r["id"] for r in ds.take_all()) == list(range(len(ROWS)))


def test_sharding_arguments_follow_ray_data(sqlite_file):
    path, connect = sqlite_file
    _fill(path)
    with pytest.raises(ValueError, match="shard_keys must be provided"):
        sf.read_sql("SELECT * FROM t", connect, override_num_blocks=2)
    with pytest.raises(ValueError, match="does not support sharding"):
        sf.read_sql(
            "SELECT * FROM t", connect, shard_keys=["id"], shard_hash_fn="NO_SUCH_FN",
            override_num_blocks=2,
        )  # fmt: skip
    # Left to choose, a database that cannot shard is read in one task.
    source = SQLDatasource(
        "SELECT * FROM t", connect, shard_hash_fn="NO_SUCH_FN", shard_keys=["id"]
    )
    assert len(source.get_read_tasks(4)) == 1
    with pytest.raises(TypeError, match="shard_keys"):
        sf.read_sql("SELECT * FROM t", connect, shard_keys="id")
    with pytest.raises(ValueError, match="shard key"):
        sf.read_sql("SELECT * FROM t", connect, shard_keys=["id; DROP TABLE t"])
    with pytest.raises(TypeError, match="connection_factory"):
        sf.read_sql("SELECT * FROM t", path)


def test_reads_stream_in_blocks_and_stop_early(sqlite_file):
    path, connect = sqlite_file
    rows = [(i, "x" * 50, float(i), b"") for i in range(60_000)]
    _fill(path, rows)
    (task,) = SQLDatasource("SELECT * FROM t", connect).get_read_tasks(1)
    sizes = [block.num_rows for block in task()]
    assert len(sizes) > 1 and sum(sizes) == len(rows)
    assert sizes[0] == 4096  # the first fetch is small; later ones aim at ~8 MiB blocks
    assert sf.read_sql("SELECT * FROM t", connect).limit(10).count() == 10


def test_columns_of_mixed_types(sqlite_file):
    path, connect = sqlite_file
    # NUMERIC affinity keeps 1 as an integer and 1.5 as a float: one block of each mix
    # reads as floats; integers first and floats later fail, naming the column.
    _fill(path, [(i, i + 0.5 if i % 2 else i) for i in range(100)], ddl="id INTEGER, v NUMERIC")
    table = sf.read_sql("SELECT * FROM t", connect).to_arrow()
    assert table.schema.field("v").type == pa.float64()
    assert _sorted(table)["v"] == [i + 0.5 if i % 2 else float(i) for i in range(100)]
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE late (v NUMERIC)")
        connection.executemany(
            "INSERT INTO late VALUES (?)", [(i,) for i in range(5000)] + [(0.5,)]
        )
        connection.execute("CREATE TABLE m (v)")
        connection.executemany("INSERT INTO m VALUES (?)", [(1,), ("two",), (3.5,)])
    connection.close()
    with pytest.raises(TypeError, match="column 'v'.*CAST"):
        sf.read_sql("SELECT v FROM late", connect).take_all()
    assert (
        sf.read_sql("SELECT CAST(v AS REAL) AS v FROM late", connect).sum("v") == 4999 * 2500 + 0.5
    )
    mixed = sf.read_sql("SELECT v FROM m", connect).to_arrow()
    assert mixed.column("v").to_pylist() == ["1", "two", "3.5"]


def test_read_errors_name_the_query_and_step_and_keep_the_driver_type(sqlite_file):
    _, connect = sqlite_file
    with pytest.raises(sqlite3.OperationalError) as info:
        sf.read_sql("SELECT * FROM missing_table", connect).take_all()
    text = str(info.value)
    assert "missing_table" in text and "executing the query" in text
    with pytest.raises(ValueError, match="no result set"):
        sf.read_sql("CREATE TABLE x (a)", connect).take_all()


def test_secrets_never_appear_in_errors_or_reprs():
    secret = "hunter2-secret"
    conninfo = f"postgresql://app:{secret}@db.invalid/x password={secret}"

    def connect():
        raise sqlite3.OperationalError(f"cannot open {conninfo}")

    source = SQLDatasource("SELECT 1", connect)
    sink = SQLDatasink("INSERT INTO t VALUES (?)", connect)
    assert secret not in repr(source) and secret not in repr(sink)
    with pytest.raises(sqlite3.OperationalError) as info:
        sf.read_datasource(source).take_all()
    assert secret not in str(info.value) and "connecting" in str(info.value)
    with pytest.raises(sqlite3.OperationalError) as info:
        sf.from_items([{"a": 1}]).write_sql("INSERT INTO t VALUES (?)", connect, atomic=False)
    assert secret not in str(info.value) and "table t" in str(info.value)


# -- writes ----------------------------------------------------------------------------------


def _rows_of(path, sql="SELECT * FROM t ORDER BY id"):
    with sqlite3.connect(path) as connection:
        rows = connection.execute(sql).fetchall()
    connection.close()
    return rows


def _staging_tables(path):
    return _rows_of(path, "SELECT name FROM sqlite_master WHERE name LIKE 'shardflow_staging%'")


def test_write_round_trip(sqlite_file, backend):
    path, connect = sqlite_file
    _fill(path, [(-1, "old", 0.0, b"")])
    data = [
        {"id": i, "name": f"n{i}", "score": i / 2, "blob": bytes([i % 256])} for i in range(2500)
    ]
    sf.from_items(data, override_num_blocks=4).write_sql(
        "INSERT INTO t VALUES (?, ?, ?, ?)", connect
    )
    expected = [(-1, "old", 0.0, b"")] + [
        (i, f"n{i}", i / 2, bytes([i % 256])) for i in range(2500)
    ]
    assert _rows_of(path) == expected
    assert _staging_tables(path) == []


def test_a_constraint_violation_leaves_the_table_as_it_was(sqlite_file):
    path, connect = sqlite_file
    _fill(path, [(7, "old", 0.0, b"")])
    data = [{"id": i, "name": "new", "score": 1.0, "blob": b""} for i in range(100)]  # 7 exists
    with pytest.raises(sqlite3.IntegrityError) as info:
        sf.from_items(data, override_num_blocks=3).write_sql(
            "INSERT INTO t VALUES (?, ?, ?, ?)", connect
        )
    assert "table t" in str(info.value) and "moving the staged rows" in str(info.value)
    assert _rows_of(path) == [(7, "old", 0.0, b"")]
    assert _staging_tables(path) == []


def _fail_on_block(marker, batch):
    if marker in batch["name"]:
        raise RuntimeError("injected failure in a write task")
    return batch


def test_a_failed_task_leaves_the_table_as_it_was(sqlite_file, backend):
    path, connect = sqlite_file
    _fill(path, [(-1, "old", 0.0, b"")])
    blocks = [
        pa.table({"id": [i], "name": ["bad" if i == 3 else "ok"], "score": [0.5], "blob": [b""]})
        for i in range(6)
    ]
    ds = sf.from_arrow(blocks).map_batches(functools.partial(_fail_on_block, "bad"))
    with pytest.raises(Exception, match="injected failure"):
        ds.write_sql("INSERT INTO t VALUES (?, ?, ?, ?)", connect)
    assert _rows_of(path) == [(-1, "old", 0.0, b"")]
    assert _staging_tables(path) == []


def test_per_task_transactions_roll_back_the_failed_task(sqlite_file):
    path, connect = sqlite_file
    _fill(path, [(2999, "old", 0.0, b"")])
    block = pa.table(
        {"id": list(range(3000)), "name": ["n"] * 3000, "score": [0.0] * 3000, "blob": [b""] * 3000}
    )  # the third batch of 1024 rows meets id 2999
    with pytest.raises(sqlite3.IntegrityError, match="inserting rows"):
        sf.from_arrow(block).write_sql("INSERT INTO t VALUES (?, ?, ?, ?)", connect, atomic=False)
    assert _rows_of(path) == [(2999, "old", 0.0, b"")]


def test_statements_that_cannot_be_staged(sqlite_file):
    path, connect = sqlite_file
    _fill(path, [(1, "old", 0.0, b"")])
    upsert = "INSERT INTO t VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name"
    sink = SQLDatasink(upsert, connect)
    sink.on_write_start()
    assert sink.staging_table is None
    sf.from_items([{"id": 1, "name": "new", "score": 0.0, "blob": b""}]).write_sql(upsert, connect)
    assert _rows_of(path) == [(1, "new", 0.0, b"")]
    with pytest.raises(ValueError, match="atomic=True"):
        SQLDatasink(upsert, connect, atomic=True)
    with pytest.raises(TypeError, match="atomic"):
        SQLDatasink("INSERT INTO t VALUES (?)", connect, atomic="yes")


def test_an_insert_naming_columns_is_staged(sqlite_file):
    path, connect = sqlite_file
    _fill(
        path,
        [(1, "old", 0.0, b"")],
        ddl="id INTEGER PRIMARY KEY, name TEXT DEFAULT 'd', score REAL, blob BLOB",
    )
    sql = "INSERT INTO t (id, score) VALUES (?, ?)"
    sink = SQLDatasink(sql, connect)
    sink.on_write_start()
    assert sink.staging_table.startswith("shardflow_staging_")
    sink.on_write_failed(RuntimeError("x"))
    sf.from_items([{"id": 2, "score": 2.5}, {"id": 3, "score": 3.5}]).write_sql(sql, connect)
    assert _rows_of(path) == [(1, "old", 0.0, b""), (2, "d", 2.5, None), (3, "d", 3.5, None)]


class KillOnce:
    """Kills its own worker process at row ``at`` the first time (a marker file remembers)."""

    def __init__(self, marker, at):
        self.marker, self.at = marker, at

    def __call__(self, row):
        import os
        import signal

        if row["id"] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return row


@pytest.mark.timeout(180)
def test_a_killed_write_task_is_rerun_and_every_row_lands_once(sqlite_file, tmp_path):
    path, connect = sqlite_file
    _fill(path, [(-1, "old", 0.0, b"")])
    # Blocks of 100 rows reach the writer one by one: the killed attempt has inserted rows
    # (uncommitted) into the staging table before it dies.
    sf.DataContext.get_current().target_min_block_size = 1
    ds = (
        sf.range(3000, override_num_blocks=2)
        .map_batches(lambda b: b, batch_size=100)
        .map(KillOnce(str(tmp_path / "killed"), at=2500))
        .map_batches(lambda b: {"id": b["id"], "name": ["n"] * len(b["id"]), "score": b["id"] / 2,
                                "blob": [b""] * len(b["id"])})
    )  # fmt: skip
    ds.write_sql("INSERT INTO t VALUES (?, ?, ?, ?)", connect)
    assert (tmp_path / "killed").exists()
    assert [r[0] for r in _rows_of(path)] == list(range(-1, 3000))
    assert _staging_tables(path) == []
