"""SQL databases through any DB-API 2 driver: ``read_sql`` and ``Dataset.write_sql``.
sqlite3 needs nothing more; PostgreSQL goes through psycopg (``shardflow[sql]``)."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.sql.datasink import SQLDatasink
from shardflow.connectors.sql.datasource import SQLDatasource

__all__ = ["SQLDatasink", "SQLDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector sql`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.sql.conformance_suite import SQLSuite

        return SQLSuite
    raise AttributeError(name)
