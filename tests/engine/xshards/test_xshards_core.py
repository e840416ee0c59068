"""XShards operations on both backends, against numpy and pandas oracles."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pandas as pd
import pytest

import shardflow as sf
from shardflow.xshards import XShards

Pair = namedtuple("Pair", ["x", "y"])


def scale(x, factor, offset=0):
    return x * factor + offset


def ratings(n=60, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user": rng.integers(0, 7, size=n),
            "item": rng.integers(0, 20, size=n),
            "rating": rng.random(n),
            "tag": rng.choice(["a", "b", "c"], size=n),
        }
    )


def frame_shards(df, num):
    return sf.from_pandas(df).repartition(num).to_xshards()


# -- partition ------------------------------------------------------------------------------


def test_partition_ndarray_matches_array_split(backend):
    data = np.arange(50).reshape(25, 2)
    shards = XShards.partition(data, num_shards=4)
    assert shards.num_partitions() == 4
    for got, want in zip(shards.collect(), np.array_split(data, 4)):
        np.testing.assert_array_equal(got, want)


def test_partition_nested_structures_keep_their_shape(backend):
    data = {
        "x": (np.arange(10), np.arange(10) * 2.0),
        "y": [np.arange(10) % 3],
        "p": Pair(np.ones(10), np.zeros(10)),
    }
    shards = XShards.partition(data, num_shards=3).collect()
    assert len(shards) == 3
    for i, shard in enumerate(shards):
        want = np.array_split(np.arange(10), 3)[i]
        assert set(shard) == {"x", "y", "p"}
        assert (
            isinstance(shard["x"], tuple)
            and isinstance(shard["y"], list)
            and isinstance(shard["p"], Pair)
        )
        np.testing.assert_array_equal(shard["x"][0], want)
        np.testing.assert_array_equal(shard["x"][1], want * 2.0)
        np.testing.assert_array_equal(shard["y"][0], want % 3)
        assert len(shard["p"].x) == len(want)


def test_partition_default_is_one_shard_per_cpu_at_most_one_per_item(backend):
    assert XShards.partition(np.arange(1)).num_partitions() == 1
    assert XShards.partition(np.arange(100)).num_partitions() >= 1


@pytest.mark.parametrize(
    "data, error, words",
    [
        ({"x": np.arange(4), "y": np.arange(3)}, ValueError, "ragged"),
        ([np.arange(5), np.arange(6)], ValueError, "data[1] has 6"),
        (np.float64(3.0), TypeError, "np.ndarray"),
        ({"x": [1, 2, 3]}, TypeError, "int at data['x'][0]"),
        (np.array(5), ValueError, "0-dimensional"),
        ({}, ValueError, "empty"),
    ],
)
def test_partition_rejects_bad_input(data, error, words):
    with pytest.raises(error, match=None) as info:
        XShards.partition(data, num_shards=2)
    assert words in str(info.value)


def test_partition_needs_enough_items():
    with pytest.raises(ValueError, match="smaller than the total number of shards 5"):
        XShards.partition(np.arange(3), num_shards=5)
    with pytest.raises(ValueError, match="num_shards"):
        XShards.partition(np.arange(3), num_shards=0)


# -- transform_shard, collect ---------------------------------------------------------------


def test_transform_shard_with_args_matches_numpy(backend):
    data = np.arange(20.0)
    shards = XShards.partition(data, num_shards=4).transform_shard(scale, 3, 1)
    assert shards.num_partitions() == 4
    np.testing.assert_array_equal(np.concatenate(shards.collect()), data * 3 + 1)


def test_transform_shard_on_dataframes_matches_pandas(backend):
    df = ratings()
    shards = frame_shards(df, 3).transform_shard(
        lambda d: d[d["rating"] > 0.5].assign(double=lambda x: x["rating"] * 2)
    )
    got = pd.concat(shards.collect(), ignore_index=True)
    want = df[df["rating"] > 0.5].assign(double=lambda x: x["rating"] * 2).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_transform_shard_is_lazy_and_errors_reach_the_caller(backend):
    def fail(x):
        raise ZeroDivisionError("boom in shard")

    shards = XShards.partition(np.arange(4), 2).transform_shard(fail)  # nothing runs yet
    with pytest.raises(ZeroDivisionError, match="boom in shard"):
        shards.collect()


def test_transform_shard_returning_different_types_is_an_error(backend):
    def mixed(x):
        return {"x": x} if x[0] == 0 else x.tolist()

    shards = XShards.partition(np.arange(6), 3).transform_shard(mixed)
    with pytest.raises(TypeError, match="partition 0 holds dict and partition 1 holds list"):
        shards.collect()
    with pytest.raises(TypeError, match="different types"):
        shards.repartition(2).collect()


def test_numbers_of_any_kind_are_one_type(backend):
    shards = XShards.partition(np.arange(6), 3).transform_shard(
        lambda x: int(x.sum()) if x[0] else np.float64(x.sum())
    )
    assert shards.collect() == [1.0, 5, 9]


def test_transform_shard_needs_a_function():
    with pytest.raises(TypeError, match="needs a function"):
        XShards.partition(np.arange(4), 2).transform_shard(3)


def test_getitem_len_and_unique_match_pandas(backend):
    df = ratings()
    shards = frame_shards(df, 4)
    assert len(shards) == len(df)
    assert shards.num_partitions() == 4
    np.testing.assert_array_equal(shards["tag"].unique(), pd.unique(df["tag"]))
    np.testing.assert_array_equal(np.sort(shards["user"].unique()), np.sort(df["user"].unique()))


def test_unique_needs_series(backend):
    with pytest.raises(TypeError, match=r"shards\['col'\]\.unique\(\)"):
        frame_shards(ratings(), 2).unique()


def test_xshards_is_not_iterable():
    with pytest.raises(TypeError, match="collect"):
        list(XShards.partition(np.arange(4), 2))


# -- split, zip -----------------------------------------------------------------------------


def test_split_tuples(backend):
    x, y = np.arange(12).reshape(6, 2), np.arange(6) % 2
    features, labels = XShards.partition((x, y), 3).split()
    np.testing.assert_array_equal(np.concatenate(features.collect()), x)
    np.testing.assert_array_equal(np.concatenate(labels.collect()), y)
    assert features.num_partitions() == 3


def test_split_of_other_shards_is_the_xshards_itself_and_lengths_must_agree(backend):
    # As Orca: shards that are not tuples or lists (or have one item) split into [self].
    shards = XShards.partition(np.arange(4), 2)
    assert shards.split() == [shards]
    uneven = XShards.partition(np.arange(4), 2).transform_shard(
        lambda x: tuple(x) if x[0] else (x,)
    )
    with pytest.raises(ValueError, match="different split length: 1 and 2") as info:
        uneven.split()
    assert isinstance(info.value, RuntimeError)  # Orca raises RuntimeError


def test_zip_pairs_shards(backend):
    base = XShards.partition(np.arange(9), 3)
    zipped = base.zip(base.transform_shard(lambda x: x * x)).collect()
    assert len(zipped) == 3
    for (a, b), want in zip(zipped, np.array_split(np.arange(9), 3)):
        np.testing.assert_array_equal(a, want)
        np.testing.assert_array_equal(b, want * want)


def test_zip_needs_same_partitions(backend):
    with pytest.raises(ValueError, match="same number of partitions; they have 3 and 2"):
        XShards.partition(np.arange(9), 3).zip(XShards.partition(np.arange(9), 2))
    one_each = XShards.partition(np.arange(4), 2)
    two_and_one = XShards.partition(np.arange(6), 3).transform_shard(lambda x: (1,)).repartition(2)
    # Both are computed to check them when zip is called, as Orca's default (eager) mode does.
    with pytest.raises(
        ValueError, match="same number of elements in each partition; partition 0 has 1 and 2"
    ):
        one_each.zip(two_and_one)


# -- repartition, partition_by --------------------------------------------------------------


@pytest.mark.parametrize("num", [1, 2, 5, 9])
def test_repartition_dataframes_keeps_rows_in_order(backend, num):
    df = ratings(50)
    shards = frame_shards(df, 3).repartition(num)
    assert shards.num_partitions() == num
    parts = shards.collect()
    assert [len(p) for p in parts] == [len(a) for a in np.array_split(np.arange(50), num)]
    pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), df)


def test_repartition_pickled_dataframes(backend):
    df = ratings(20).assign(obj=lambda d: d["tag"].astype(object))  # object column: pickled
    shards = (
        frame_shards(df, 2)
        .transform_shard(lambda d: d.assign(obj=d["tag"].astype(object)))
        .repartition(3)
    )
    parts = shards.collect()
    assert [len(p) for p in parts] == [7, 7, 6]
    got = pd.concat(parts, ignore_index=True)
    pd.testing.assert_frame_equal(got, df)
    assert got["obj"].dtype == object


@pytest.mark.parametrize("num", [1, 3, 7])
def test_repartition_arrays_dicts_and_lists(backend, num):
    data = np.arange(40).reshape(20, 2)
    arrays = XShards.partition(data, 4).repartition(num)
    assert arrays.num_partitions() == num
    np.testing.assert_array_equal(np.concatenate(arrays.collect()), data)
    assert [len(a) for a in arrays.collect()] == [len(a) for a in np.array_split(data, num)]
    dicts = XShards.partition({"x": data, "y": np.arange(20)}, 4).repartition(num).collect()
    np.testing.assert_array_equal(np.concatenate([d["x"] for d in dicts]), data)
    np.testing.assert_array_equal(np.concatenate([d["y"] for d in dicts]), np.arange(20))
    lists = XShards.partition(np.arange(20), 4).transform_shard(list).repartition(num).collect()
    assert [v for part in lists for v in part] == list(range(20))


def test_repartition_other_types_moves_whole_shards(backend):
    shards = XShards.partition(np.arange(12), 6).transform_shard(lambda x: (int(x[0]), int(x[1])))
    three = shards.repartition(3)
    assert three.num_partitions() == 3
    assert three.collect() == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9), (10, 11)]
    assert shards.repartition(8).num_partitions() == 8


def test_repartition_into_more_partitions_than_rows(backend):
    parts = frame_shards(ratings(3), 1).repartition(5)
    assert parts.num_partitions() == 5
    assert [len(p) for p in parts.collect()] == [1, 1, 1]


def test_repartition_validates():
    with pytest.raises(ValueError, match="num_partitions must be a positive int"):
        XShards.partition(np.arange(4), 2).repartition(0)


@pytest.mark.parametrize("cols", ["user", ["user", "tag"]])
def test_partition_by_groups_keys(backend, cols):
    df = ratings(80)
    keys = [cols] if isinstance(cols, str) else cols
    shards = frame_shards(df, 3).partition_by(cols, num_partitions=4)
    assert shards.num_partitions() == 4
    parts = shards.collect()
    seen = {}
    for index, part in enumerate(parts):
        for key in part[keys].drop_duplicates().itertuples(index=False):
            assert seen.setdefault(tuple(key), index) == index  # a key lives in one partition
    got = pd.concat(parts).sort_values(["user", "item", "rating"]).reset_index(drop=True)
    want = df.sort_values(["user", "item", "rating"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)


def test_partition_by_keeps_the_partition_count_and_pickled_frames(backend):
    df = ratings(30)
    shards = frame_shards(df, 3).transform_shard(lambda d: d.assign(obj=d["tag"].astype(object)))
    grouped = shards.partition_by("tag")
    assert grouped.num_partitions() == 3
    parts = grouped.collect()
    owners = {}
    for index, part in enumerate(parts):
        assert part["obj"].dtype == object
        for tag in part["tag"].unique():
            assert owners.setdefault(tag, index) == index
    assert sum(len(p) for p in parts) == 30
    assert sorted(owners) == sorted(df["tag"].unique())


def test_partition_by_into_one_partition(backend):
    df = ratings(12)
    pickled = frame_shards(df, 2).transform_shard(lambda d: d.assign(obj=d["tag"].astype(object)))
    (only,) = pickled.partition_by("user", 1).collect()
    assert len(only) == 12 and sorted(only["rating"]) == sorted(df["rating"])
    (only,) = frame_shards(df, 2).partition_by("user", 1).collect()
    assert len(only) == 12


def test_partition_by_errors(backend):
    with pytest.raises(ValueError, match=r"\['nope'\] are not in the DataFrame"):
        frame_shards(ratings(), 2).partition_by("nope", 2).collect()
    with pytest.raises(TypeError, match="applies to XShards of pandas DataFrames"):
        XShards.partition(np.arange(4), 2).partition_by("x", 2).collect()
    with pytest.raises(TypeError, match="column name"):
        XShards.partition(np.arange(4), 2).partition_by(3)


# -- Datasets -------------------------------------------------------------------------------


def test_dataset_roundtrip(backend):
    df = ratings(40)
    ds = sf.from_pandas(df).repartition(4)
    shards = ds.to_xshards()
    assert shards.num_partitions() == 4
    back = shards.transform_shard(lambda d: d.assign(r2=d["rating"] ** 2)).to_dataset()
    got = back.to_pandas()
    pd.testing.assert_frame_equal(got, df.assign(r2=df["rating"] ** 2), check_dtype=False)


def test_to_dataset_of_arrays_and_dicts(backend):
    data = np.arange(10)
    assert XShards.partition(data, 2).to_dataset().take_all() == [{"data": i} for i in range(10)]
    ds = XShards.partition({"x": np.arange(6).reshape(3, 2), "y": np.arange(3)}, 3).to_dataset()
    rows = ds.take_all()
    assert [r["y"] for r in rows] == [0, 1, 2]
    np.testing.assert_array_equal(np.stack([r["x"] for r in rows]), np.arange(6).reshape(3, 2))
    with pytest.raises(TypeError, match="to_dataset"):
        XShards.partition(np.arange(4), 2).transform_shard(list).to_dataset().take_all()


def test_to_dataset_drops_the_index(backend):
    df = pd.DataFrame({"a": [1, 2, 3]}, index=pd.Index([7, 8, 9], name="k"))
    shards = (
        sf.from_pandas(pd.DataFrame({"a": [1, 2, 3]})).to_xshards().transform_shard(lambda d: df)
    )
    assert shards.to_dataset().take_all() == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert shards.collect()[0].index.tolist() == [7, 8, 9]


def test_dataset_blocks_become_partitions_without_copy():
    df = pd.DataFrame({"a": np.arange(1000, dtype=np.int64)})
    ds = sf.from_pandas(df).materialize()
    block = ds._plan.source.blocks[0]
    shards = ds.to_xshards().cache().compute()
    (ref,) = shards._blocks[0]
    from shardflow.engine.execution.refs import resolve

    table = resolve(ref)
    assert (
        table.column("a").chunk(0).buffers()[1].address
        == resolve(block).column("a").chunk(0).buffers()[1].address
    )
    out = resolve(shards.to_dataset().materialize()._plan.source.blocks[0])
    assert (
        out.column("a").chunk(0).buffers()[1].address
        == table.column("a").chunk(0).buffers()[1].address
    )


def test_partitions_are_stable_through_fused_maps(backend):
    # A Dataset read whose blocks are cut by size: the partitions counted after caching are
    # the ones a fused transform_shard sees.
    ctx = sf.DataContext.get_current()
    ctx.target_max_block_size = 64 * 1024
    ctx.target_min_block_size = 16 * 1024
    ds = sf.range(100_000, override_num_blocks=2).map_batches(
        lambda b: {"id": b["id"], "v": b["id"] * 2.0}
    )
    shards = ds.to_xshards()
    counted = shards.transform_shard(len)
    lengths = counted.collect()
    assert sum(lengths) == 100_000 and len(lengths) > 2
    assert shards.num_partitions() == len(lengths)


def test_cache_keeps_partitions(backend):
    calls = XShards.partition(np.arange(8), 4).transform_shard(lambda x: x + 1).cache()
    assert calls.is_cached() and calls._blocks is None  # kept once computed, as Spark's cache
    np.testing.assert_array_equal(np.concatenate(calls.collect()), np.arange(8) + 1)
    assert calls.num_partitions() == 4 and calls._blocks is not None
    calls.uncache()
    assert not calls.is_cached()
    np.testing.assert_array_equal(np.concatenate(calls.collect()), np.arange(8) + 1)


def test_dict_shards_become_rows_without_copy():
    from shardflow.engine.execution.refs import resolve

    data = {"x": np.arange(20, dtype=np.float64), "y": np.arange(20) % 2}
    shards = XShards.partition(data, 2).cache().compute()
    stored = resolve(shards._blocks[0][0])
    rows = resolve(shards.to_dataset().materialize()._plan.source.blocks[0])
    assert rows.schema.metadata is None
    for name in ("x", "y"):
        address = rows.column(name).chunk(0).buffers()[1].address
        assert address == stored.column(name).chunk(0).buffers()[1].address
