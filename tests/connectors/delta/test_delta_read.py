"""read_delta on local tables written by deltalake itself, with deltalake as the oracle."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shardflow as sf
from shardflow.connectors.delta import DeltaDatasource

deltalake = pytest.importorskip("deltalake")


def _events(start, n):
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([["mon", "tue", "wed"][i % 3] for i in ids], pa.string()),
            "value": pa.array([i * 0.5 for i in ids], pa.float64()),
        }
    )


@pytest.fixture
def table_path(tmp_path):
    """A table partitioned by day over three versions (0, 1, 2) of 100 rows each."""
    path = str(tmp_path / "events")
    for version in range(3):
        deltalake.write_deltalake(
            path, _events(version * 100, 100), mode="append", partition_by=["day"]
        )
    return path


def _oracle(path, version=None, filter=None, columns=None):
    table = deltalake.DeltaTable(path, version=version).to_pyarrow_dataset()
    return table.to_table(filter=filter, columns=columns)


def _rows(table, key="id"):
    return table.sort_by(key).to_pylist()


def test_read_matches_deltalake(table_path, backend):
    table = sf.read_delta(table_path).to_arrow()
    assert table.schema == _oracle(table_path).schema
    assert _rows(table) == _rows(_oracle(table_path))


def test_partition_pruning_and_statistics_skip_files(table_path):
    everything = DeltaDatasource(table_path).get_read_tasks(64)
    all_files = {f for t in everything for f in t.metadata.input_files}
    assert len(all_files) == 9  # three versions x three days
    by_day = DeltaDatasource(table_path, filter=sf.col("day") == "tue").get_read_tasks(64)
    files = {f for t in by_day for f in t.metadata.input_files}
    assert len(files) == 3 and all("day=tue" in f for f in files)
    by_stats = DeltaDatasource(table_path, filter=sf.col("id") >= 250).get_read_tasks(64)
    assert len({f for t in by_stats for f in t.metadata.input_files}) == 3  # version 2's files
    got = sf.read_delta(table_path, filter=(sf.col("id") >= 250) & (sf.col("day") != "mon"))
    expected = _oracle(table_path, filter=(pc.field("id") >= 250) & (pc.field("day") != "mon"))
    assert _rows(got.to_arrow()) == _rows(expected)


def test_dataset_filter_and_select_are_pushed_into_the_scan(table_path):
    ds = (
        sf.read_delta(table_path)
        .filter(expr=sf.col("day") == "wed")
        .select_columns(["value", "id"])
    )
    assert _rows(ds.to_arrow()) == _rows(
        _oracle(table_path, filter=pc.field("day") == "wed", columns=["value", "id"])
    )
    source = DeltaDatasource(table_path).apply_projection({"id": "key"})
    blocks = [b for task in source.get_read_tasks(2) for b in task()]
    assert all(b.column_names == ["key"] for b in blocks)
    assert sorted(k for b in blocks for k in b.column("key").to_pylist()) == list(range(300))


def test_columns_and_pyarrow_filters(table_path):
    table = sf.read_delta(table_path, columns=["day", "id"], filter=pc.field("id") < 10).to_arrow()
    assert table.column_names == ["day", "id"]
    assert _rows(table) == _rows(
        _oracle(table_path, filter=pc.field("id") < 10, columns=["day", "id"])
    )
    with pytest.raises(TypeError, match="filter must be"):
        sf.read_delta(table_path, filter="id < 10")
    with pytest.raises(ValueError, match="not in Delta table"):
        sf.read_delta(table_path, columns=["nope"]).take_all()


def test_time_travel(table_path):
    for version in range(3):
        got = sf.read_delta(table_path, version=version).to_arrow()
        assert _rows(got) == _rows(_oracle(table_path, version=version))
        assert got.num_rows == 100 * (version + 1)
    with pytest.raises(ValueError, match="no version 7"):
        sf.read_delta(table_path, version=7).count()
    with pytest.raises(ValueError, match="version must be"):
        sf.read_delta(table_path, version=-1)


def test_count_comes_from_the_log(table_path, tmp_path):
    victim = sorted((tmp_path / "events").rglob("*.parquet"))[0]
    victim.write_bytes(b"PAR1 not parquet")
    assert sf.read_delta(table_path).count() == 300  # no data file is opened
    with pytest.raises(Exception, match=victim.name):
        sf.read_delta(table_path).take_all()


def test_a_missing_table_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="No Delta table at"):
        sf.read_delta(str(tmp_path / "nowhere")).count()
    with pytest.raises(ValueError, match="single Delta Lake table"):
        sf.read_delta([str(tmp_path)])


def test_an_empty_table(tmp_path):
    path = str(tmp_path / "empty")
    deltalake.write_deltalake(path, _events(0, 0))
    ds = sf.read_delta(path)
    assert ds.count() == 0 and ds.take_all() == []
