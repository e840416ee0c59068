"""``orca.data.shard``: XShards and SharedValue (``SparkXShards`` is XShards)."""

from shardflow.engine.xshards.shards import XShards
from shardflow.engine.xshards.shared_value import SharedValue

SparkXShards = XShards

__all__ = ["SharedValue", "SparkXShards", "XShards"]
