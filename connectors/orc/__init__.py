"""ORC: ``read_orc`` and ``Dataset.write_orc`` through ``pyarrow.orc``, one stripe at a time."""

from __future__ import annotations

from shardflow.connectors.orc.datasink import ORCDatasink
from shardflow.connectors.orc.datasource import ORCDatasource

__all__ = ["ORCDatasink", "ORCDatasource"]
