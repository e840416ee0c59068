"""Text files: ``read_text``, one row per line."""

from __future__ import annotations

from shardflow.connectors.text.datasource import TextDatasource

__all__ = ["TextDatasource"]
