"""XShards, Orca's data-parallel API (shards of Python objects), on the shardflow engine.

Modules: ``encoding`` (how a partition is stored in a block), ``stages`` (maps over
partitions), ``execution`` (materializing, deferred sources), ``shards`` (the XShards
class), ``partition`` (local data into shards), ``exchange`` (repartition, partition_by,
zip), ``readers`` (read_csv, read_json, read_parquet), ``pickle_io`` (save/load_pickle),
``shared_value`` (SharedValue), ``ray_shards`` (to_ray, RayXShards), ``orca_context``
(init_orca_context). The user API is
``shardflow.xshards`` (and ``shardflow.orca.data``).
"""
