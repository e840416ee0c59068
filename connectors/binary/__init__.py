"""Binary files: ``read_binary_files``, one row per file with its bytes."""

from __future__ import annotations

from shardflow.connectors.binary.datasource import BinaryDatasource

__all__ = ["BinaryDatasource"]
