"""Delta Lake tables: ``read_delta`` and ``Dataset.write_delta`` through deltalake (delta-rs).
Needs deltalake (``pip install 'shardflow[delta]'``), imported only when a table is used."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.delta.datasink import DeltaDatasink
from shardflow.connectors.delta.datasource import DeltaDatasource

__all__ = ["DeltaDatasink", "DeltaDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector delta`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.delta.conformance_suite import DeltaSuite

        return DeltaSuite
    raise AttributeError(name)
