"""Reading files into XShards (CSV, JSON, Parquet) and pickle files, on both backends."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow.orca.data.pandas as orca_pandas
from shardflow.xshards import XShards, read_csv, read_json, read_parquet


def frames(n_files=3, rows=5):
    return [
        pd.DataFrame(
            {
                "user": np.arange(rows) + 10 * i,
                "score": np.linspace(0, 1, rows) + i,
                "name": [f"u{i}{j}" for j in range(rows)],
            }
        )
        for i in range(n_files)
    ]


@pytest.fixture
def csv_dir(tmp_path):
    folder = tmp_path / "csv"
    folder.mkdir()
    for i, df in enumerate(frames()):
        df.to_csv(folder / f"part{i}.csv", index=False)
    (folder / "_SUCCESS").write_text("")
    return folder


def test_read_csv_folder_matches_pandas(backend, csv_dir):
    shards = orca_pandas.read_csv(str(csv_dir))
    assert 1 <= shards.num_partitions() <= 3
    got = pd.concat(shards.collect(), ignore_index=True)
    want = pd.concat([pd.read_csv(csv_dir / f"part{i}.csv") for i in range(3)], ignore_index=True)
    pd.testing.assert_frame_equal(got, want)
    assert all(list(df.index) == list(range(len(df))) for df in shards.collect())


def test_read_csv_file_lists_and_pandas_options(backend, csv_dir):
    paths = [str(csv_dir / "part2.csv"), str(csv_dir / "part0.csv")]
    listed = pd.concat(
        read_csv(paths, usecols=["user", "score"], dtype={"user": "float64"}).collect()
    )
    assert list(listed.columns) == ["user", "score"] and listed["user"].dtype == np.float64
    assert listed["user"].tolist()[:2] == [20.0, 21.0]  # the given order
    comma = read_csv(",".join(paths), sep=",")
    assert sum(len(df) for df in comma.collect()) == 10
    globbed = read_csv(str(csv_dir / "part[01].csv"))
    assert sum(len(df) for df in globbed.collect()) == 10


def test_read_csv_gzip_and_index_col(backend, tmp_path):
    df = pd.DataFrame({"k": ["a", "b"], "v": [1, 2]})
    with gzip.open(tmp_path / "x.csv.gz", "wt") as f:
        df.to_csv(f, index=False)
    (shard,) = read_csv(str(tmp_path / "x.csv.gz"), index_col="k").collect()
    pd.testing.assert_frame_equal(shard, df.set_index("k"))


def test_read_json_lines(backend, tmp_path):
    for i, df in enumerate(frames(2)):
        df.to_json(tmp_path / f"p{i}.json", orient="records", lines=True)
    shards = read_json(str(tmp_path), orient="records", lines=True)
    got = pd.concat(shards.collect(), ignore_index=True)
    pd.testing.assert_frame_equal(got, pd.concat(frames(2), ignore_index=True))


def test_read_parquet_stays_arrow(backend, tmp_path):
    for i, df in enumerate(frames(2)):
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / f"p{i}.parquet")
    shards = read_parquet(str(tmp_path), columns=["user", "name"])
    got = pd.concat(shards.collect(), ignore_index=True)
    pd.testing.assert_frame_equal(got, pd.concat(frames(2), ignore_index=True)[["user", "name"]])
    assert shards.to_dataset().count() == 10


def test_reader_errors_name_the_file(backend, tmp_path):
    with pytest.raises(FileNotFoundError, match="read_csv: .*missing.csv"):
        read_csv(str(tmp_path / "missing.csv"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="read_json: cannot read .*bad.json"):
        read_json(str(bad)).collect()
    with pytest.raises(ValueError, match="chunksize"):
        read_csv(str(bad), chunksize=10)
    (tmp_path / "a.parquet").write_bytes(b"nope")
    with pytest.raises(Exception, match="a.parquet"):
        read_parquet(str(tmp_path / "a.parquet")).collect()


# -- pickle files ---------------------------------------------------------------------------


def test_save_and_load_pickle_roundtrip(backend, tmp_path):
    data = {"x": np.arange(40).reshape(20, 2), "y": np.arange(20) % 3}
    shards = XShards.partition(data, 4)
    path = str(tmp_path / "saved")
    assert shards.save_pickle(path, batchSize=10) is shards
    assert sorted(os.listdir(path)) == ["part-00000", "part-00001", "part-00002", "part-00003"]
    loaded = XShards.load_pickle(path)
    assert loaded.num_partitions() == 4
    for got, want in zip(loaded.collect(), shards.collect()):
        np.testing.assert_array_equal(got["x"], want["x"])
        np.testing.assert_array_equal(got["y"], want["y"])


def test_save_pickle_of_dataframes_and_empty_partitions(backend, tmp_path):
    df = pd.DataFrame({"k": [1, 1, 1, 1], "v": [1.0, 2.0, 3.0, 4.0]})
    import shardflow as sf

    grouped = sf.from_pandas(df).to_xshards().partition_by("k", 3)  # two partitions are empty
    path = str(tmp_path / "frames")
    grouped.save_pickle(path)
    loaded = XShards.load_pickle(path)
    assert loaded.num_partitions() == 3
    (only,) = loaded.collect()
    pd.testing.assert_frame_equal(only.reset_index(drop=True), df)


def test_load_pickle_min_partitions_splits_between_batches(backend, tmp_path):
    elements = (
        XShards.partition(np.arange(64), 64).transform_shard(lambda x: int(x[0])).repartition(2)
    )
    path = str(tmp_path / "elements")
    elements.save_pickle(path, batchSize=4)  # 2 files of 8 batches of 4
    loaded = XShards.load_pickle(path, minPartitions=6)
    assert loaded.num_partitions() == 6
    assert loaded.collect() == list(range(64))
    assert XShards.load_pickle(path, minPartitions=100).num_partitions() == 16  # one per batch


def test_load_pickle_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="load_pickle: .*nowhere"):
        XShards.load_pickle(str(tmp_path / "nowhere"))
    (tmp_path / "junk").write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="not a file written by XShards.save_pickle"):
        XShards.load_pickle(str(tmp_path / "junk")).collect()
    with pytest.raises(ValueError, match="not a file written by XShards.save_pickle"):
        XShards.load_pickle(str(tmp_path / "junk"), minPartitions=3)
    with pytest.raises(ValueError, match="minPartitions"):
        XShards.load_pickle(str(tmp_path / "junk"), minPartitions=0)


def test_save_pickle_refuses_to_mix_with_existing_data(tmp_path):
    shards = XShards.partition(np.arange(4), 2)
    shards.save_pickle(str(tmp_path / "out"))
    with pytest.raises(ValueError, match="already holds data"):
        shards.save_pickle(str(tmp_path / "out"))
    with pytest.raises(ValueError, match="batchSize"):
        shards.save_pickle(str(tmp_path / "other"), batchSize=0)


def test_load_pickle_docstring_warns_about_trust():
    assert "trust" in XShards.load_pickle.__doc__


def test_s3_read_csv_and_pickle_roundtrip(backend, s3_store):
    import fsspec

    root, options = s3_store
    fs = fsspec.filesystem("s3", **options)
    for i, df in enumerate(frames(2)):
        with fs.open(f"{root}/csv/part{i}.csv", "wb") as f:
            f.write(df.to_csv(index=False).encode())
    shards = read_csv(f"{root}/csv", storage_options=options)
    got = pd.concat(shards.collect(), ignore_index=True)
    pd.testing.assert_frame_equal(got, pd.concat(frames(2), ignore_index=True))
    shards.save_pickle(f"{root}/saved", storage_options=options)
    loaded = XShards.load_pickle(f"{root}/saved", minPartitions=1, storage_options=options)
    assert loaded.num_partitions() == shards.num_partitions()
    pd.testing.assert_frame_equal(pd.concat(loaded.collect(), ignore_index=True), got)
