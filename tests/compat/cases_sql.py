"""Differential cases: read_sql and write_sql on SQLite files."""

from __future__ import annotations

import functools
import sqlite3

from harness import case


def _database(tmp, rows=10):
    path = str(tmp / "db.sqlite")
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE movie (id INTEGER PRIMARY KEY, title TEXT, score REAL)")
        connection.executemany(
            "INSERT INTO movie VALUES (?, ?, ?)", [(i, f"t{i}", i / 2) for i in range(rows)]
        )
    connection.close()
    return functools.partial(sqlite3.connect, path)


@case("read_sql", note="a query read in one task; parameters bound; its schema")
def sql_read_one_task(m, tmp):
    connect = _database(tmp)
    ds = m.read_sql("SELECT * FROM movie", connect)
    params = m.read_sql("SELECT title FROM movie WHERE id >= ?", connect, sql_params=(7,))
    return [
        sorted(ds.take_all(), key=lambda r: r["id"]),
        ds.count(),
        ds.schema(),
        sorted(r["title"] for r in params.take_all()),
    ]


@case("read_sql", note="override_num_blocks > 1 without shard_keys raises ValueError")
def sql_read_blocks_without_shard_keys(m, tmp):
    connect = _database(tmp)
    return m.read_sql("SELECT * FROM movie", connect, override_num_blocks=2)


@case("read_sql", note="an unknown table raises the driver's error when the data is read")
def sql_read_unknown_table(m, tmp):
    connect = _database(tmp)
    return m.read_sql("SELECT * FROM no_such_table", connect).take_all()


@case("Dataset.write_sql", note="rows written with executemany, read back with sqlite3")
def sql_write_rows(m, tmp):
    connect = _database(tmp, rows=0)
    items = [{"id": i, "title": f"w{i}", "score": i * 1.5} for i in range(300)]
    m.from_items(items, override_num_blocks=3).write_sql(
        "INSERT INTO movie VALUES (?, ?, ?)", connect
    )
    connection = connect()
    rows = connection.execute("SELECT * FROM movie ORDER BY id").fetchall()
    connection.close()
    return rows


@case("Dataset.write_sql", note="a primary key violation raises sqlite3.IntegrityError")
def sql_write_constraint_violation(m, tmp):
    connect = _database(tmp, rows=3)
    items = [{"id": i, "title": "dup", "score": 0.0} for i in range(5)]
    m.from_items(items).write_sql("INSERT INTO movie VALUES (?, ?, ?)", connect)
