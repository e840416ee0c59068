"""Parquet: ``read_parquet`` and ``Dataset.write_parquet``: reading row groups,
choosing encodings, and shardflow's own writer of flat columns with its C encoders."""

from __future__ import annotations

from shardflow.connectors.parquet.datasink import ParquetDatasink
from shardflow.connectors.parquet.datasource import ParquetDatasource

__all__ = ["ParquetDatasink", "ParquetDatasource"]
