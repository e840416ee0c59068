"""SQL databases through DB-API 2 drivers: ``read_sql`` and ``Dataset.write_sql``.

Works with any PEP 249 driver (sqlite3 needs nothing more; PostgreSQL through psycopg, from
``pip install 'shardflow[sql]'``); the driver is the user's, imported by their factory.
"""

from __future__ import annotations

from typing import Any

from shardflow.connectors.sql.datasink import SQLDatasink
from shardflow.connectors.sql.datasource import SQLDatasource

__all__ = ["SQLDatasink", "SQLDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector sql`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.sql.suite import SQLSuite

        return SQLSuite
    raise AttributeError(name)
