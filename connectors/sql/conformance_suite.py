"""The conformance suite of the SQL connector, over SQLite files (``shardflow
check-connector sql``). PostgreSQL runs the same suite in the test suite, against a server
the tests start."""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

import pyarrow as pa

from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance

SAMPLE = pa.table(
    {
        "id": pa.array(range(60), pa.int64()),
        "name": pa.array([f"n{i % 6}" for i in range(60)], pa.string()),
        "score": pa.array([i / 8 for i in range(60)], pa.float64()),
    }
)
COLUMNS_DDL = "id BIGINT, name TEXT, score DOUBLE PRECISION"


class SQLSuite(ConnectorConformance):
    """Tables of a SQLite file under ``tmp_path``; subclasses point it at another database
    by overriding :meth:`connection_factory` and :meth:`placeholder`."""

    name = "sql"

    def connection_factory(self, tmp_path: Any) -> Any:
        return functools.partial(sqlite3.connect, str(tmp_path / "db.sqlite"))

    def placeholder(self) -> str:
        return "?"

    def table_name(self, tmp_path: Any, role: str) -> str:
        return role

    def _create(self, tmp_path: Any, role: str, rows: pa.Table | None) -> str:
        table = self.table_name(tmp_path, role)
        connection = self.connection_factory(tmp_path)()
        try:
            cursor = connection.cursor()
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {table} ({COLUMNS_DDL})")
            if rows is not None:
                cursor.execute(f"DELETE FROM {table}")
                marks = ", ".join([self.placeholder()] * rows.num_columns)
                cursor.executemany(
                    f"INSERT INTO {table} VALUES ({marks})",
                    list(zip(*[c.to_pylist() for c in rows.columns])),
                )
            connection.commit()
        finally:
            connection.close()
        return table

    def _spec(self) -> Any:
        return get_registry().get(self.name)  # as a third-party package's suite would

    def expected_table(self) -> pa.Table:
        return SAMPLE

    def make_datasource(self, tmp_path: Any) -> Any:
        table = self._create(tmp_path, "data", SAMPLE)
        return self._spec().datasource(
            f"SELECT * FROM {table}", self.connection_factory(tmp_path), shard_keys=["id"]
        )

    def make_empty_datasource(self, tmp_path: Any) -> Any:
        table = self._create(tmp_path, "empty", SAMPLE.slice(0, 0))
        return self._spec().datasource(f"SELECT * FROM {table}", self.connection_factory(tmp_path))

    def make_bad_datasource(self, tmp_path: Any) -> Any:
        return self._spec().datasource(
            "SELECT * FROM no_such_table_here", self.connection_factory(tmp_path)
        )

    def bad_source_mentions(self, tmp_path: Any) -> list[str]:
        return ["no_such_table_here"]

    def make_datasink(self, tmp_path: Any) -> Any:
        table = self._create(tmp_path, "out", None)
        marks = ", ".join([self.placeholder()] * SAMPLE.num_columns)
        return self._spec().datasink(
            f"INSERT INTO {table} VALUES ({marks})", self.connection_factory(tmp_path)
        )

    def read_back(self, tmp_path: Any) -> pa.Table:
        table = self._create(tmp_path, "out", None)
        connection = self.connection_factory(tmp_path)()
        try:
            cursor = connection.cursor()
            cursor.execute(f"SELECT id, name, score FROM {table}")
            rows = cursor.fetchall()
        finally:
            connection.close()
        columns: list[Any] = list(zip(*rows)) if rows else [[], [], []]
        return pa.Table.from_arrays(
            [pa.array(c, t) for c, t in zip(columns, SAMPLE.schema.types)],
            schema=SAMPLE.schema,
        )
