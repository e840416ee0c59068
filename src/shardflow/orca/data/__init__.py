"""``orca.data``: XShards, SharedValue and RayXShards (see :mod:`shardflow.xshards`).

``SparkXShards`` names the same class as ``XShards``: an XShards runs on shardflow's local or
Ray backend, or on Spark after ``init_orca_context(backend="spark")``, where ``XShards(rdd)``
wraps an RDD of shards as Orca's ``SparkXShards(rdd)`` does.
"""

from shardflow.orca.data import pandas, utils
from shardflow.orca.data.ray_xshards import RayXShards
from shardflow.orca.data.shard import SharedValue, SparkXShards, XShards

__all__ = ["RayXShards", "SharedValue", "SparkXShards", "XShards", "pandas", "utils"]
