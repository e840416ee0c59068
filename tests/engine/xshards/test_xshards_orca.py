"""Orca's XShards scenarios, written as an Orca user writes them (imports from
``shardflow.orca``), run unchanged on the local backend, on Ray and on Spark local[2].
pandas and numpy are the oracles."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import shardflow.orca.data.pandas as zpd
from shardflow.orca.data import XShards


def _frame(shards):
    return pd.concat(shards.collect(), ignore_index=True)


@pytest.fixture
def people(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    rng = np.random.default_rng(7)
    parts = []
    for i in range(3):
        df = pd.DataFrame(
            {
                "user": rng.integers(0, 5, 8),
                "item": rng.integers(0, 50, 8),
                "rating": rng.random(8).round(3),
            }
        )
        df.to_csv(folder / f"part{i}.csv", index=False)
        parts.append(df)
    return folder, pd.concat(parts, ignore_index=True)


# -- item 1: readers with Orca's defaults ---------------------------------------------------


def test_readers_with_orcas_defaults(orca_backend, people, tmp_path):
    folder, expected = people
    shards = zpd.read_csv(str(folder))
    pd.testing.assert_frame_equal(_frame(shards), expected)
    glob = zpd.read_csv(str(folder / "part*.csv"), usecols=["user", "rating"], nrows=3)
    got = _frame(glob)
    assert list(got.columns) == ["user", "rating"] and len(got) == 9
    raw = tmp_path / "raw.csv"
    raw.write_text("1,2.5,a\n3,4.5,b\n")
    headless = _frame(zpd.read_csv(str(raw), header=None, dtype={0: np.float32}))
    assert list(headless.columns) == ["0", "1", "2"]
    assert headless["0"].dtype == np.float32 and headless["2"].tolist() == ["a", "b"]
    named = _frame(zpd.read_csv(str(raw), header=None, names=["x", "y", "z"], skiprows=1))
    assert named.to_dict("list") == {"x": [3], "y": [4.5], "z": ["b"]}
    series = zpd.read_csv(str(raw), header=None, usecols=[1], squeeze=True).collect()
    assert isinstance(series[0], pd.Series) and series[0].tolist() == [2.5, 4.5]
    lines = tmp_path / "rows.json"
    lines.write_text("\n".join(json.dumps({"a": i, "b": f"s{i}"}) for i in range(4)))
    pd.testing.assert_frame_equal(
        _frame(zpd.read_json(str(lines))), pd.read_json(lines, lines=True)
    )
    # Errors come at the read call, naming the file, before anything is parsed.
    with pytest.raises(FileNotFoundError, match="nothere.csv"):
        zpd.read_csv(str(tmp_path / "nothere.csv"))
    with pytest.raises(KeyError, match="not in current dataframe"):
        zpd.read_csv(str(folder), dtype={"nope": "int64"})


# -- item 2: the rest of the XShards surface --------------------------------------------------


def test_dataframe_operations_match_pandas(orca_backend, people):
    folder, expected = people
    shards = zpd.read_csv(str(folder))
    assert shards.is_cached()
    selected = shards.select(["item"])  # select and getitem keep the parent cached
    assert shards.is_cached() and list(selected.first().columns) == ["item"]
    assert shards.max_values("rating") == expected["rating"].max()
    assert sorted(shards["user"].unique().tolist()) == sorted(expected["user"].unique().tolist())
    assert len(shards) == len(expected)
    assert shards.is_cached()
    ordered = _frame(shards.sort_values(["user", "item"], ascending=[True, False]))
    oracle = expected.sort_values(["user", "item"], ascending=[True, False], kind="stable")
    assert list(zip(ordered["user"], ordered["item"])) == list(zip(oracle["user"], oracle["item"]))
    grouped = _frame(shards.group_by("user", agg={"rating": ["sum", "max"], "item": "count"}))
    grouped = grouped.sort_values("user").reset_index(drop=True)
    oracle = expected.groupby("user").agg(
        s=("rating", "sum"), m=("rating", "max"), c=("item", "count")
    )
    np.testing.assert_allclose(grouped["sum(rating)"], oracle["s"].to_numpy())
    np.testing.assert_allclose(grouped["max(rating)"], oracle["m"].to_numpy())
    assert grouped["count(item)"].tolist() == oracle["c"].tolist()
    by_user = shards.partition_by("user", 2)
    assert by_user.num_partitions() == 2
    homes = [set(df["user"]) for part in by_user.get_partitions() for df in part]
    assert sum(len(h) for h in homes) == expected["user"].nunique()
    pd.testing.assert_frame_equal(
        _frame(by_user).sort_values(["user", "item", "rating"]).reset_index(drop=True),
        expected.sort_values(["user", "item", "rating"]).reset_index(drop=True),
    )
    derived = shards.transform_shard(lambda df: df.assign(r2=df.rating * 2))
    assert not shards.is_cached() and derived.is_cached()
    np.testing.assert_allclose(_frame(derived)["r2"], expected["rating"] * 2)
    with pytest.raises(KeyError, match="Invalid key|nope"):
        shards["nope"].collect()


def test_numpy_shards_partition_zip_split_and_cache(orca_backend):
    data = np.arange(20).reshape(10, 2)
    shards = XShards.partition({"x": data, "y": np.arange(10)}, num_shards=3)
    assert shards.num_partitions() == 3
    assert [len(p) for p in shards.get_partitions()] == [1, 1, 1]
    np.testing.assert_array_equal(np.concatenate([s["x"] for s in shards.collect()]), data)
    again = shards.repartition(2)
    assert [s["y"].tolist() for s in again.collect()] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    pairs = XShards.partition((data, np.arange(10)), num_shards=2)
    x, y = pairs.split()
    zipped = x.zip(y.transform_shard(lambda a: a * 10)).collect()
    assert [z[1].tolist() for z in zipped] == [[0, 10, 20, 30, 40], [50, 60, 70, 80, 90]]
    assert XShards.partition(data, 2).split()[0].collect()[0].shape == (5, 2)
    cached = XShards.partition(np.arange(6), 2).cache()
    cached.transform_shard(lambda a: a + 1).collect()
    assert cached.is_cached()
    assert not cached.uncache().is_cached()
    with pytest.raises(ValueError, match="same number of partitions"):
        x.zip(XShards.partition(np.arange(9), 3))
    with pytest.raises(IndexError, match="transform_shard.*failed"):
        XShards.partition(np.arange(4), 2).transform_shard(lambda a: a["missing"]).collect()


def test_save_and_load_pickle(orca_backend, tmp_path):
    shards = XShards.partition({"x": np.arange(12)}, num_shards=3)
    shards.save_pickle(str(tmp_path / "saved"), batchSize=1)
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == [
        "part-00000",
        "part-00001",
        "part-00002",
    ]
    loaded = XShards.load_pickle(str(tmp_path / "saved"))
    assert [s["x"].tolist() for s in loaded.collect()] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10, 11],
    ]
