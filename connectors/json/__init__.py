"""JSON: ``read_json`` (JSON Lines or a JSON array) and ``Dataset.write_json``,
with shardflow's own C parser of JSON Lines where it gives Arrow's table exactly."""

from __future__ import annotations

from shardflow.connectors.json.datasink import JSONDatasink
from shardflow.connectors.json.datasource import JSONDatasource

__all__ = ["JSONDatasink", "JSONDatasource"]
