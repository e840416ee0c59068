"""Iceberg tables: ``read_iceberg`` and ``Dataset.write_iceberg`` through pyiceberg catalogs.
Needs pyiceberg (``pip install 'shardflow[iceberg]'``), imported only when a table is used."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.iceberg.datasink import IcebergDatasink
from shardflow.connectors.iceberg.datasource import IcebergDatasource

__all__ = ["IcebergDatasink", "IcebergDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector iceberg`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.suites import IcebergSuite

        return IcebergSuite
    raise AttributeError(name)
