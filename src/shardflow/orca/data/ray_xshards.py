"""``orca.data.ray_xshards``: RayXShards, partitions held in Ray's object store."""

from shardflow.engine.xshards.ray_shards import RayXShards

__all__ = ["RayXShards"]
