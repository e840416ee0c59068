"""Zarr: ``read_zarr`` of Zarr v2 stores, one row per chunk (or per axis-0 chunk of several
row-aligned arrays). Needs zarr-python 2 (``pip install 'shardflow[zarr]'``), imported only
when a store is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.zarr.datasource import ZarrDatasource

__all__ = ["ZarrDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector zarr`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.zarr.conformance_suite import ZarrSuite

        return ZarrSuite
    raise AttributeError(name)
