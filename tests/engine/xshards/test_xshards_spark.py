"""XShards on Spark local[2]: Orca's SparkXShards names, the same results as the local
backend, Spark DataFrames both ways, and the move to Ray."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import shardflow as sf
from shardflow.engine.xshards.spark.shards import SparkBackedXShards
from shardflow.orca import init_orca_context, stop_orca_context
from shardflow.orca.data import RayXShards, SparkXShards, XShards
from shardflow.orca.data.utils import spark_df_to_pd_sparkxshards


@pytest.fixture
def on_spark(spark, fresh_context):
    sc = init_orca_context(cluster_mode="local", cores=2, backend="spark")
    yield sc
    stop_orca_context()


def _shapes(xshards):
    out = []
    for part in xshards.get_partitions():
        out.append([s.to_dict("list") if isinstance(s, pd.DataFrame) else repr(s) for s in part])
    return out


def test_init_orca_context_joins_the_session_and_stop_leaves_it_running(spark, fresh_context):
    sc = init_orca_context(cluster_mode="local", cores=2, backend="spark")
    assert sc is spark.sparkContext
    stop_orca_context()
    assert spark.sparkContext._jsc is not None  # not started here, so not stopped here
    assert spark.range(3).count() == 3
    with pytest.raises(ValueError, match="needs master"):
        init_orca_context(cluster_mode="standalone")


def test_exchanges_cut_as_the_local_backend(spark, fresh_context):
    """repartition and partition_by give, partition by partition, what the engine gives."""
    frames = [
        pd.DataFrame({"k": np.arange(i, i + 7) % 3, "v": np.arange(7) + 10 * i}) for i in range(3)
    ]
    arrays = [np.arange(5) + 10 * i for i in range(3)]
    objects = [{"n": i} for i in range(5)]

    def of(items):
        return XShards.partition(np.arange(len(items)), len(items)).transform_shard(
            lambda a, items=items: items[int(a[0])]
        )

    def run():
        out = []
        for shards in (frames, arrays):
            out.append(_shapes(of(shards).repartition(2)))
            out.append(_shapes(of(shards).repartition(5)))
        out.append(_shapes(of(objects).repartition(2)))
        by_key = of(frames).partition_by("k", 2).get_partitions()
        out.append(
            [sorted(map(tuple, pd.concat(p).to_numpy().tolist())) if p else [] for p in by_key]
        )
        return out

    sf.init(backend="local")
    local = run()
    init_orca_context(cluster_mode="local", cores=2, backend="spark")
    try:
        assert isinstance(XShards.partition(np.arange(2), 2), SparkBackedXShards)
        on_spark = run()
    finally:
        stop_orca_context()
    assert on_spark == local


def test_spark_dataframes_both_ways(on_spark, spark):
    df = pd.DataFrame({"a": np.arange(6), "b": np.linspace(0, 1, 6), "c": list("xyzxyz")})
    shards = XShards.partition(np.arange(6), 2).transform_shard(lambda idx, d=df: d.iloc[idx])
    sdf = shards.to_spark_df()
    assert sdf.columns == ["a", "b", "c"]
    pd.testing.assert_frame_equal(sdf.toPandas().sort_values("a").reset_index(drop=True), df)
    back = spark_df_to_pd_sparkxshards(spark.createDataFrame(df).repartition(3))
    assert isinstance(back, SparkXShards) and back.num_partitions() == 3
    got = pd.concat(back.collect()).sort_values("a").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, df)
    wrapped = XShards(spark.sparkContext.parallelize([np.arange(3), np.arange(3, 6)], 2))
    assert isinstance(wrapped, SparkBackedXShards)
    assert [a.tolist() for a in wrapped.transform_shard(lambda a: a * 2).collect()] == [
        [0, 2, 4],
        [6, 8, 10],
    ]
    with pytest.raises(TypeError, match="only support to_spark_df|Pandas DataFrame"):
        wrapped.to_spark_df()


def test_spark_xshards_move_to_ray(on_spark, ray_session):
    ray = ray_session
    shards = XShards.partition({"x": np.arange(8)}, num_shards=4)
    ray_shards = shards.transform_shard(lambda d: {"x": d["x"] + 1}).to_ray()
    assert isinstance(ray_shards, RayXShards) and ray_shards.num_partitions() == 4
    partitions = ray.get(ray_shards.get_partition_refs())
    assert [[s["x"].tolist() for s in p] for p in partitions] == [
        [[1, 2]],
        [[3, 4]],
        [[5, 6]],
        [[7, 8]],
    ]
    back = ray_shards.to_spark_xshards()
    assert isinstance(back, SparkBackedXShards) and back.num_partitions() == 4
    assert [s["x"].tolist() for s in back.collect()] == [[1, 2], [3, 4], [5, 6], [7, 8]]
