"""Lance datasets: ``read_lance`` and ``Dataset.write_lance`` through pylance.
Needs pylance (``pip install 'shardflow[lance]'``), imported only when a dataset is used."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.lance.datasink import LanceDatasink
from shardflow.connectors.lance.datasource import LanceDatasource

__all__ = ["LanceDatasink", "LanceDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector lance`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.lance.conformance_suite import LanceSuite

        return LanceSuite
    raise AttributeError(name)
