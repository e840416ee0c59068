"""read_lance and write_lance against pylance itself: pushdowns, versions, modes, one commit."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shardflow as sf

lance = pytest.importorskip("lance")

from shardflow.connectors.lance import LanceDatasource
from shardflow.sdk.testing import assert_same_rows

TABLE = pa.table(
    {
        "id": pa.array(np.arange(200), pa.int64()),
        "label": pa.array([i % 5 for i in range(200)], pa.int32()),
        "text": pa.array([f"t{i}" if i % 9 else None for i in range(200)]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(800, dtype=np.float32)), 4),
    }
)


@pytest.fixture
def uri(tmp_path):
    path = str(tmp_path / "t.lance")
    lance.write_dataset(TABLE, path, max_rows_per_file=30)  # 7 fragments
    return path


def test_read_matches_pylance(uri):
    ds = sf.read_lance(uri)
    assert ds.count() == 200
    assert ds.schema().names == TABLE.column_names
    assert_same_rows(ds.to_arrow(), lance.dataset(uri).to_table(), "read_lance")


def test_columns_and_sql_filter_are_pushed_into_the_scan(uri):
    ds = sf.read_lance(uri, columns=["id", "text"], filter="label = 2 AND text IS NOT NULL")
    expected = lance.dataset(uri).to_table(
        columns=["id", "text"], filter="label = 2 AND text IS NOT NULL"
    )
    assert_same_rows(ds.to_arrow(), expected, "columns + filter")


@pytest.mark.parametrize(
    "predicate",
    [
        sf.col("id") >= 150,
        sf.col("text").is_null(),
        (sf.col("label") == 3) & (sf.col("id") < 100),
        sf.col("id") * 2 > sf.col("label") + 300,  # Lance cannot take it: Arrow applies it
    ],
)
def test_engine_filters_reach_the_read(uri, predicate):
    source = LanceDatasource(uri).apply_predicate(predicate)
    spec = source._scan_spec()
    assert spec.lance_filter is not None or spec.post_filter is not None
    got = sf.read_lance(uri).filter(expr=predicate).select_columns(["id"]).to_arrow()
    expected = TABLE.filter(predicate.to_pyarrow()).select(["id"])
    assert_same_rows(got, expected, repr(predicate))


def test_sql_filter_and_engine_filter_together(uri):
    got = sf.read_lance(uri, filter="label < 2").filter(expr=sf.col("id") > 100).to_arrow()
    expected = TABLE.filter((pc.field("label") < 2) & (pc.field("id") > 100))
    assert_same_rows(got, expected, "both filters")


def test_limit_and_projection_with_renames(uri):
    rows = sf.read_lance(uri).rename_columns({"id": "key"}).select_columns(["key"]).limit(7)
    assert [r["key"] for r in rows.take_all()] == list(range(7))


def test_version_and_several_uris(uri, tmp_path):
    lance.write_dataset(TABLE.slice(0, 10), uri, mode="append")
    assert sf.read_lance(uri).count() == 210
    assert sf.read_lance(uri, version=1).count() == 200
    other = str(tmp_path / "other.lance")
    lance.write_dataset(TABLE.slice(0, 5).drop_columns(["vec"]), other)
    both = sf.read_lance([uri, other]).to_arrow()
    assert both.num_rows == 215 and both.column_names == TABLE.column_names
    assert both.filter(pc.field("vec").is_null()).num_rows == 5


def test_arguments_are_checked(uri, tmp_path):
    with pytest.raises(FileNotFoundError, match="No Lance dataset"):
        sf.read_lance(str(tmp_path / "missing.lance"))
    with pytest.raises(ValueError, match="must not be empty"):
        sf.read_lance([])
    with pytest.raises(ValueError, match="not found"):
        sf.read_lance(uri, columns=["nope"])
    with pytest.raises(ValueError, match="scanner_options"):
        sf.read_lance(uri, scanner_options={"limit": 3})


def test_corrupt_data_file_names_it(uri):
    data = os.path.join(uri, "data")
    name = sorted(os.listdir(data))[0]
    with open(os.path.join(data, name), "wb") as f:
        f.write(b"garbage")
    with pytest.raises(Exception, match=name) as info:
        sf.read_lance(uri).to_arrow()
    assert "Lance" in str(info.value)


def _data_files(uri):
    return sorted(os.listdir(os.path.join(uri, "data")))


def test_write_modes_commit_once_each(tmp_path):
    uri = str(tmp_path / "w.lance")
    sf.from_arrow(TABLE).repartition(4).write_lance(uri, min_rows_per_file=1, max_rows_per_file=40)
    written = lance.dataset(uri)
    assert written.version == 1 and len(written.get_fragments()) >= 4
    assert_same_rows(written.to_table(), TABLE, "create")
    with pytest.raises(ValueError, match="already exists"):
        sf.from_arrow(TABLE).write_lance(uri)
    sf.from_arrow(TABLE.slice(0, 10).select(["id", "label"])).write_lance(uri, mode="append")
    appended = lance.dataset(uri)
    assert appended.version == 2 and appended.count_rows() == 210
    assert appended.to_table(filter="id < 10 AND text IS NULL").num_rows >= 10
    sf.from_arrow(TABLE.slice(0, 3)).write_lance(uri, mode=sf.SaveMode.OVERWRITE)
    assert lance.dataset(uri).version == 3 and lance.dataset(uri).count_rows() == 3
    assert lance.dataset(uri, version=1).count_rows() == 200  # older versions stay readable
    assert not os.path.exists(os.path.join(uri, "_shardflow_writes"))


def test_failed_write_commits_nothing_and_leaves_no_file(tmp_path):
    uri = str(tmp_path / "w.lance")
    sf.from_arrow(TABLE).write_lance(uri)
    files = _data_files(uri)

    def fail_late(batch):
        if batch["id"].max() >= 150:
            raise RuntimeError("injected failure")
        return batch

    failing = sf.from_arrow(TABLE).repartition(4).map_batches(fail_late)
    with pytest.raises(Exception, match="injected failure"):
        failing.write_lance(uri, mode="append", min_rows_per_file=1)
    assert lance.dataset(uri).version == 1
    assert _data_files(uri) == files
    assert sorted(os.listdir(uri)) == ["_transactions", "_versions", "data"]
    with pytest.raises(Exception, match="injected failure"):
        failing.write_lance(str(tmp_path / "new.lance"), min_rows_per_file=1)
    assert not os.path.exists(tmp_path / "new.lance")


def test_write_arguments_are_checked(tmp_path):
    uri = str(tmp_path / "w.lance")
    with pytest.raises(ValueError, match="mode"):
        sf.range(3).write_lance(uri, mode="upsert")
    with pytest.raises(FileNotFoundError, match="append"):
        sf.range(3).write_lance(uri, mode="append")
    with pytest.raises(ValueError, match="max_rows_per_file"):
        sf.range(3).write_lance(uri, max_rows_per_file=0)


def test_round_trip_through_shardflow_keeps_types(tmp_path):
    uri = str(tmp_path / "rt.lance")
    sf.from_arrow(TABLE).write_lance(uri)
    back = sf.read_lance(uri).to_arrow()
    assert back.schema.equals(TABLE.schema)
    assert_same_rows(back, TABLE, "round trip")
