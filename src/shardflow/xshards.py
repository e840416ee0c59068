"""XShards: Orca's data-parallel API for shards of Python objects, on the shardflow engine.

Code written for Analytics Zoo / BigDL Orca's ``XShards`` runs on shardflow by changing its
imports (see also :mod:`shardflow.orca.data`), embedded or on Ray.

Examples:
    >>> import numpy as np
    >>> from shardflow.xshards import XShards
    >>> shards = XShards.partition({"x": np.arange(6)}, num_shards=3)
    >>> shards.transform_shard(lambda d: d["x"].sum()).collect()
    [np.int64(1), np.int64(5), np.int64(9)]
"""

from shardflow.engine.xshards.ray_shards import RayXShards
from shardflow.engine.xshards.readers import read_csv, read_json, read_parquet
from shardflow.engine.xshards.shards import XShards
from shardflow.engine.xshards.shared_value import SharedValue

__all__ = ["RayXShards", "SharedValue", "XShards", "read_csv", "read_json", "read_parquet"]
