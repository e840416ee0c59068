"""``range`` and ``range_tensor``: integers (or tensors of them) generated inside
the read tasks."""

from __future__ import annotations

from shardflow.connectors.range.datasource import RangeDatasource

__all__ = ["RangeDatasource"]
