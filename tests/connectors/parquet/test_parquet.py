"""Parquet specifics: pushdown of columns, filters and limits; schema unification; splits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.connectors.parquet import ParquetDatasource
from shardflow.engine.plan.optimizer import optimize

ROWS, ROW_GROUP = 20_000, 2_000


@pytest.fixture
def wide_file(tmp_path):
    """One file, 10 row groups sorted by ``id``, with a large ``payload`` column."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "small": (np.arange(ROWS) % 7).astype(np.int32),
            "payload": [rng.bytes(64).hex() for _ in range(ROWS)],
        }
    )
    path = tmp_path / "wide.parquet"
    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False),
        path,
        row_group_size=ROW_GROUP,
        compression="none",
    )
    return str(path), df


def bytes_to_read(instrumented_fs, make_ds, consume):
    fs = instrumented_fs()
    ds = make_ds(fs)
    result = consume(ds)
    return fs.bytes_read, result


def test_column_pushdown_reads_fewer_bytes(wide_file, instrumented_fs):
    path, df = wide_file
    full, table = bytes_to_read(
        instrumented_fs,
        lambda fs: sf.read_parquet(path, filesystem=fs),
        lambda ds: ds.to_arrow().to_pandas(),
    )
    pd.testing.assert_frame_equal(table, df)

    few, table = bytes_to_read(
        instrumented_fs,
        lambda fs: sf.read_parquet(path, filesystem=fs, columns=["id"]),
        lambda ds: ds.to_arrow().to_pandas(),
    )
    pd.testing.assert_frame_equal(table, df[["id"]])
    assert few < full / 5

    # the engine's select/rename reaches the datasource
    ds = sf.read_parquet(path).select_columns(["small", "id"]).rename_columns({"small": "s"})
    plan = optimize(ds._plan)
    assert plan.source.datasource.get_projection_map() == {"small": "s", "id": "id"}
    assert not plan.ops
    pd.testing.assert_frame_equal(
        ds.to_arrow().to_pandas(), df[["small", "id"]].rename(columns={"small": "s"})
    )


def test_filter_pushdown_is_exact_and_skips_row_groups(wide_file, instrumented_fs, backend):
    path, df = wide_file
    ds = sf.read_parquet(path).filter(sf.col("id") >= 18_500).select_columns(["id", "small"])
    plan = optimize(ds._plan)
    assert repr(plan.source.datasource.get_current_predicate()) == "(col('id') >= 18500)"
    assert not plan.ops  # exact: the engine does not filter again
    expected = df[df.id >= 18_500][["id", "small"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(ds.to_arrow().to_pandas(), expected)

    if backend == "local":
        full, _ = bytes_to_read(
            instrumented_fs, lambda fs: sf.read_parquet(path, filesystem=fs), lambda d: d.count()
        )
        some, got = bytes_to_read(
            instrumented_fs,
            lambda fs: sf.read_parquet(path, filesystem=fs).filter(sf.col("id") >= 18_500),
            lambda d: d.to_arrow().to_pandas(),
        )
        assert some < full / 4  # 1 row group of 10 (plus the footer)
        pd.testing.assert_frame_equal(got, df[df.id >= 18_500].reset_index(drop=True))


def test_pyarrow_filter_argument(wide_file):
    path, df = wide_file
    ds = sf.read_parquet(path, filter=(pads.field("small") == 3) & (pads.field("id") < 100))
    expected = df[(df.small == 3) & (df.id < 100)].reset_index(drop=True)
    pd.testing.assert_frame_equal(ds.to_arrow().to_pandas(), expected)
    with pytest.raises(TypeError, match="pyarrow.dataset expression"):
        sf.read_parquet(path, filter="id < 100")


def test_limit_stops_reading_early(wide_file, instrumented_fs, fresh_context):
    path, df = wide_file
    fresh_context.target_min_block_size = 1
    full, _ = bytes_to_read(
        instrumented_fs,
        lambda fs: sf.read_parquet(path, filesystem=fs),
        lambda d: d.to_arrow().to_pandas(),
    )
    few, rows = bytes_to_read(
        instrumented_fs, lambda fs: sf.read_parquet(path, filesystem=fs), lambda d: d.take(5)
    )
    assert rows == df.head(5).to_dict("records")
    assert few < full / 3


def test_predicate_on_partition_column_prunes_files(tmp_path):
    df = pd.DataFrame(
        {"x": np.arange(60, dtype=np.int64), "year": np.repeat([2021, 2022, 2023], 20)}
    )
    sf.from_pandas(df).write_parquet(str(tmp_path / "t"), partition_cols=["year"])
    typed = sf.Partitioning("hive", field_types={"year": int})  # values are strings otherwise
    ds = sf.read_parquet(str(tmp_path / "t"), partitioning=typed).filter(sf.col("year") == 2022)
    source = optimize(ds._plan).source.datasource
    tasks = source.get_read_tasks(8)
    assert [f for t in tasks for f in t.metadata.input_files] and all(
        "year=2022" in f for t in tasks for f in t.metadata.input_files
    )
    got = ds.to_arrow().to_pandas().sort_values("x").reset_index(drop=True)
    got["year"] = got["year"].astype(np.int64)
    pd.testing.assert_frame_equal(got, df[df.year == 2022].reset_index(drop=True)[["x", "year"]])
    mixed = (
        sf.read_parquet(str(tmp_path / "t"), partitioning=typed)
        .filter((sf.col("year") >= 2022) & (sf.col("x") % 2 == 0))
        .to_pandas()
    )
    assert sorted(mixed["x"]) == [x for x in range(20, 60) if x % 2 == 0]


def test_schemas_are_unified_across_files(tmp_path):
    a = pa.table({"x": pa.array([1, 2], pa.int32()), "y": ["a", "b"]})
    b = pa.table({"x": pa.array([3, 4_000_000_000], pa.int64()), "z": [0.5, 1.5]})
    pq.write_table(a, tmp_path / "a.parquet")
    pq.write_table(b, tmp_path / "b.parquet")
    table = sf.read_parquet(str(tmp_path)).to_arrow()
    assert table.schema.field("x").type == pa.int64()
    oracle = pd.concat([a.to_pandas(), b.to_pandas()], ignore_index=True)
    got = table.to_pandas().sort_values("x").reset_index(drop=True)
    pd.testing.assert_frame_equal(got[oracle.columns], oracle, check_dtype=False)
    assert got["y"].isna().sum() == 2 and got["z"].isna().sum() == 2

    given = pa.schema([("x", pa.float64()), ("z", pa.float64())])
    typed = sf.read_parquet(str(tmp_path), schema=given).to_arrow()
    assert typed.schema == given and sorted(typed.column("x").to_pylist()) == [1.0, 2.0, 3.0, 4e9]


def test_incompatible_file_names_the_file_and_both_types(tmp_path):
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": ["one", "two"]}), tmp_path / "b.parquet")
    with pytest.raises(Exception) as info:
        sf.read_parquet(str(tmp_path)).to_arrow()
    message = str(info.value)
    assert "b.parquet" in message and "int64" in message and "string" in message


def test_large_file_is_split_by_row_groups(wide_file, monkeypatch, backend):
    path, df = wide_file
    monkeypatch.setattr(ParquetDatasource, "_MIN_SPLIT_BYTES", 1)
    ds = sf.read_parquet(path, override_num_blocks=4)
    tasks = optimize(ds._plan).source.datasource.get_read_tasks(4)
    assert len(tasks) == 4  # more tasks than files
    pd.testing.assert_frame_equal(ds.to_arrow().to_pandas(), df)  # every row once, in order


def test_truncated_parquet_file(tmp_path):
    pq.write_table(pa.table({"x": list(range(100))}), tmp_path / "good.parquet")
    data = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "bad.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception, match="bad.parquet"):
        sf.read_parquet(str(tmp_path)).to_arrow()
    ds = sf.read_parquet(str(tmp_path), on_bad_file="skip")
    assert sorted(ds.to_arrow().to_pandas()["x"]) == list(range(100))
    assert "1 bad files skipped" in ds.stats()
