"""Apache Hudi tables: ``read_hudi`` through hudi (hudi-rs's Python bindings).
Needs hudi (``pip install 'shardflow[hudi]'``), imported only when a table is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.hudi.datasource import HudiDatasource

__all__ = ["HudiDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector hudi`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.hudi.conformance_suite import HudiSuite

        return HudiSuite
    raise AttributeError(name)
