"""to_ray(): partitions in Ray's object store with their node; RayXShards."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import shardflow as sf
from shardflow.orca.data import RayXShards, SharedValue
from shardflow.xshards import XShards


@pytest.fixture
def on_ray(ray_session, fresh_context):
    sf.init(backend="ray")
    return ray_session


def test_to_ray_holds_partitions_in_the_object_store(on_ray):
    ray = on_ray
    data = {"x": np.arange(12).reshape(6, 2), "y": np.arange(6)}
    shards = XShards.partition(data, 3).transform_shard(lambda d: {"x": d["x"] * 2, "y": d["y"]})
    ray_shards = shards.to_ray()
    assert isinstance(ray_shards, RayXShards) and ray_shards.num_partitions() == 3
    refs = ray_shards.get_partition_refs()
    assert all(isinstance(r, ray.ObjectRef) for r in refs)
    partitions = ray.get(refs)
    assert [len(p) for p in partitions] == [1, 1, 1]
    np.testing.assert_array_equal(np.concatenate([p[0]["x"] for p in partitions]), data["x"] * 2)
    node_ids = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    for index in range(3):
        assert node_ids[ray_shards.partition2node_id[index]] == ray_shards.partition2ip[index]
    assert [s["y"].tolist() for s in ray_shards.collect()] == [[0, 1], [2, 3], [4, 5]]


def test_ray_xshards_transform_and_back(on_ray):
    df = pd.DataFrame({"a": np.arange(10), "b": np.arange(10) * 0.5})
    ray_shards = sf.from_pandas(df).repartition(2).to_xshards().to_ray()
    table = SharedValue(np.arange(100))
    summed = ray_shards.transform_shard(lambda d, t: int(t.value[d["a"].to_numpy()].sum()), table)
    assert summed.collect() == [10, 35]
    back = ray_shards.to_xshards()
    assert back.num_partitions() == 2
    pd.testing.assert_frame_equal(pd.concat(back.collect(), ignore_index=True), df)
    assert back.to_dataset().count() == 10


def test_to_ray_needs_the_ray_backend(fresh_context):
    with pytest.raises(RuntimeError, match="shardflow.init\\(backend='ray'\\)"):
        XShards.partition(np.arange(4), 2).to_ray()
