"""``orca.data``: XShards, SharedValue and RayXShards (see :mod:`shardflow.xshards`).

``SparkXShards`` names the same class as ``XShards``: there is no Spark here, and an XShards
runs on shardflow's local or Ray backend.
"""

from shardflow.orca.data import pandas
from shardflow.orca.data.ray_xshards import RayXShards
from shardflow.orca.data.shard import SharedValue, SparkXShards, XShards

__all__ = ["RayXShards", "SharedValue", "SparkXShards", "XShards", "pandas"]
