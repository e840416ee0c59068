"""read_iceberg on real pyiceberg SqlCatalogs: local and S3 (moto) warehouses, both backends.

Oracles: pyiceberg's own scan (``table.scan(...).to_arrow()``) and pandas. Pruning is shown
through the real pipeline by deleting, from storage, the data files a read must not open.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest

pytest.importorskip("pyiceberg")

from iceberg_tables import (
    EVENTS_SCHEMA,
    add_equality_deletes,
    add_position_deletes,
    create_table,
    data_files,
    events,
    local_warehouse,
    s3_warehouse,
)

import shardflow as sf
from shardflow.connectors.iceberg import IcebergDatasource


def rows(table: pa.Table):
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


@pytest.fixture
def warehouse(tmp_path):
    return local_warehouse(tmp_path)


@pytest.fixture(params=["local", "s3"])
def any_warehouse(request, tmp_path):
    if request.param == "local":
        return local_warehouse(tmp_path)
    return s3_warehouse(
        tmp_path, request.getfixturevalue("s3_endpoint"), request.getfixturevalue("s3_bucket")
    )


def partitioned_events(warehouse, appends=4, rows_each=100):
    """``db.events``, identity-partitioned by region: each append adds one file per region."""
    table = create_table(warehouse, "events", EVENTS_SCHEMA, partition_by=["region"])
    for i in range(appends):
        table.append(events(rows_each, i * rows_each))
    return table.refresh()


def read(warehouse, name="db.events", **kwargs):
    return sf.read_iceberg(name, catalog_kwargs=warehouse.catalog_kwargs, **kwargs)


def remove_files(warehouse, paths):
    for path in paths:
        warehouse.fs.delete_file(path.split("://", 1)[1])


# -- whole reads -----------------------------------------------------------------------------


def test_read_matches_pyiceberg_scan(any_warehouse, backend):
    table = partitioned_events(any_warehouse)
    ds = read(any_warehouse)
    expected = table.scan().to_arrow()
    got = ds.to_arrow()
    assert got.schema == expected.schema
    assert rows(got) == rows(expected)
    assert ds.count() == expected.num_rows == 400


def test_count_comes_from_manifests_without_reading_data(warehouse, backend):
    table = partitioned_events(warehouse)
    remove_files(warehouse, [f.file_path for f in data_files(table)])  # nothing left to read
    assert read(warehouse).count() == 400
    assert read(warehouse, row_filter=sf.col("region").is_in(["east", "west"])).count() == 200
    assert read(warehouse, row_filter="region = 'south'").count() == 100
    assert read(warehouse).select_columns(["id"]).limit(30).count() == 30


def test_read_tasks_are_balanced_by_file_size(warehouse):
    table = create_table(warehouse, "sizes", EVENTS_SCHEMA)
    for n in (4000, 100, 100, 100, 100, 3000, 200, 200):
        table.append(events(n))
    tasks = IcebergDatasource("db.sizes", catalog_kwargs=warehouse.catalog_kwargs).get_read_tasks(3)
    assert len(tasks) == 3
    assert sorted(len(t.metadata.input_files) for t in tasks) == [1, 1, 6]
    assert sum(t.metadata.num_rows for t in tasks) == 7800
    tasks = IcebergDatasource("db.sizes", catalog_kwargs=warehouse.catalog_kwargs).get_read_tasks(
        100
    )
    assert len(tasks) == 8  # never more tasks than files


def test_empty_table_and_empty_result(warehouse, backend):
    create_table(warehouse, "empty", EVENTS_SCHEMA)
    assert read(warehouse, "db.empty").count() == 0
    assert read(warehouse, "db.empty").take_all() == []
    partitioned_events(warehouse)
    assert read(warehouse, row_filter="id > 100000").take_all() == []


# -- pushdowns ---------------------------------------------------------------------------------


def test_partition_filter_prunes_files_in_the_pipeline(warehouse, backend):
    table = partitioned_events(warehouse)
    expected = table.scan(row_filter="region == 'north' and id >= 150").to_arrow()
    others = [f.file_path for f in data_files(table) if f.partition[0] != "north"]
    assert len(others) == 12
    remove_files(warehouse, others)  # reading any of them would fail
    ds = read(warehouse).filter(expr=(sf.col("region") == "north") & (sf.col("id") >= 150))
    assert rows(ds.to_arrow()) == rows(expected)
    assert read(warehouse).filter(expr=sf.col("region") == "north").count() == 100


def test_statistics_prune_files_and_projection_reads_fewer_columns(warehouse):
    partitioned_events(warehouse)
    source = IcebergDatasource("db.events", catalog_kwargs=warehouse.catalog_kwargs)
    narrowed = source.apply_predicate(sf.col("id") < 100).apply_projection({"id": "key"})
    tasks = narrowed.get_read_tasks(8)
    assert sum(len(t.metadata.input_files) for t in tasks) == 4  # the first append's files
    got = pa.concat_tables([b for t in tasks for b in t()])
    assert got.column_names == ["key"] and sorted(got.column("key").to_pylist()) == list(range(100))
    full = sum(t.metadata.size_bytes for t in source.get_read_tasks(8))
    assert sum(t.metadata.size_bytes for t in narrowed.get_read_tasks(8)) < full / 3
    assert source.get_current_predicate() is None and source.get_projection_map() is None


def test_row_filter_and_selected_fields(warehouse, backend):
    from pyiceberg.expressions import And, EqualTo, GreaterThan

    table = partitioned_events(warehouse)
    cases = [
        "value > 100.0 and region = 'east'",
        And(GreaterThan("value", 100.0), EqualTo("region", "east")),
        (sf.col("value") > 100.0) & (sf.col("region") == "east"),
    ]
    expected = table.scan(
        row_filter="value > 100.0 and region = 'east'", selected_fields=("name", "id")
    ).to_arrow()
    for row_filter in cases:
        ds = read(warehouse, row_filter=row_filter, selected_fields=("name", "id"))
        got = ds.to_arrow()
        assert got.column_names == ["name", "id"]
        assert rows(got) == rows(expected)


def test_filters_iceberg_cannot_evaluate_are_still_exact(warehouse, backend):
    import pandas as pd

    partitioned_events(warehouse)
    df = pd.DataFrame(events(400).to_pydict())
    ds = read(warehouse).filter(
        expr=((sf.col("id") % 7 == 0) | (sf.col("value") >= 190.5)) & (sf.col("id") > 1.5)
    )
    want = df[((df.id % 7 == 0) | (df.value >= 190.5)) & (df.id > 1.5)]
    assert sorted(r["id"] for r in ds.take_all()) == sorted(want.id.tolist())


def test_select_rename_and_limit(warehouse, backend):
    partitioned_events(warehouse)
    ds = read(warehouse).select_columns(["name", "id"]).rename_columns({"name": "label"})
    got = ds.to_arrow()
    assert got.column_names == ["label", "id"] and got.num_rows == 400
    assert {r["label"] for r in got.to_pylist()} == {f"name-{i}" for i in range(400)}
    few = read(warehouse).limit(7).take_all()
    assert len(few) == 7 and all(r["name"] == f"name-{r['id']}" for r in few)
    assert read(warehouse, scan_kwargs={"limit": 5}).count() == 5


def test_limit_per_task_stops_reading(warehouse):
    table = partitioned_events(warehouse)
    source = IcebergDatasource("db.events", catalog_kwargs=warehouse.catalog_kwargs)
    tasks = source.get_read_tasks(2, per_task_row_limit=3)
    assert all(t.per_task_row_limit == 3 and t.metadata.num_rows == 3 for t in tasks)
    assert [sum(b.num_rows for b in t()) for t in tasks] == [3, 3]
    assert table.scan().count() == 400


# -- time travel -----------------------------------------------------------------------------


def test_time_travel_by_snapshot_id_and_timestamp(warehouse, backend):
    table = create_table(warehouse, "history", EVENTS_SCHEMA)
    table.append(events(10))
    first = table.refresh().current_snapshot()
    time.sleep(0.02)
    between = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.02)
    table.append(events(5, 10))
    table.refresh().delete("id < 3")
    assert read(warehouse, "db.history").count() == 12
    old = read(warehouse, "db.history", snapshot_id=first.snapshot_id)
    assert rows(old.to_arrow()) == rows(table.scan(snapshot_id=first.snapshot_id).to_arrow())
    assert read(warehouse, "db.history", as_of_timestamp=between).count() == 10
    assert read(warehouse, "db.history", as_of_timestamp=first.timestamp_ms).count() == 10
    via_kwargs = read(warehouse, "db.history", scan_kwargs={"snapshot_id": first.snapshot_id})
    assert via_kwargs.count() == 10
    with pytest.raises(ValueError, match="no snapshot at or before"):
        read(warehouse, "db.history", as_of_timestamp=1000).count()
    with pytest.raises(ValueError, match="no snapshot with id 42"):
        read(warehouse, "db.history", snapshot_id=42).count()


# -- deletes and schema evolution --------------------------------------------------------------


def test_position_deletes(any_warehouse, backend):
    table = partitioned_events(any_warehouse)
    target = data_files(table)[0]
    add_position_deletes(table, target, [0, 3, 5, 24])
    expected = table.refresh().scan().to_arrow()
    assert expected.num_rows == 396
    ds = read(any_warehouse)
    assert rows(ds.to_arrow()) == rows(expected)
    assert ds.count() == 396
    filtered = ds.filter(expr=sf.col("id") > 10)
    assert rows(filtered.to_arrow()) == rows(table.scan(row_filter="id > 10").to_arrow())


def test_equality_deletes(warehouse, backend):
    table = create_table(warehouse, "flat", EVENTS_SCHEMA)
    table.append(events(50))
    table.append(events(50, 50))
    add_equality_deletes(table, pa.table({"id": pa.array([1, 2, 60, 1000], pa.int64())}))
    add_equality_deletes(
        table, pa.table({"region": ["north", None], "id": pa.array([8, 3], pa.int64())})
    )
    table.append(events(10, 1))  # newer rows: the older deletes do not apply to them
    expected = sorted(set(range(100)) - {1, 2, 60, 8}) + list(range(1, 11))
    ds = read(warehouse, "db.flat")
    assert sorted(ds.to_pandas().id.tolist()) == sorted(expected)
    assert ds.count() == len(expected)
    assert sorted(r["id"] for r in ds.filter(expr=sf.col("id") < 5).take_all()) == [
        0,
        1,
        2,
        3,
        3,
        4,
        4,
    ]


def test_equality_deletes_scoped_to_a_partition(warehouse):
    table = partitioned_events(warehouse, appends=1)
    north = next(f for f in data_files(table) if f.partition[0] == "north")
    add_equality_deletes(
        table, pa.table({"id": pa.array([4, 5], pa.int64())}), north.partition, north.spec_id
    )
    ids = read(warehouse).to_pandas().id.tolist()
    assert 4 not in ids and 5 in ids and len(ids) == 99  # id 5 lives in another partition


def test_schema_evolution_reads_old_files_by_field_id(warehouse, backend):
    from pyiceberg.types import LongType

    table = create_table(
        warehouse, "evolving", pa.schema([("id", pa.int32()), ("name", pa.string())])
    )
    table.append(pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]}))
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.add_column("score", LongType())
        update.update_column("id", LongType())
    table.append(
        pa.table(
            {"id": pa.array([3], pa.int64()), "label": ["c"], "score": pa.array([7], pa.int64())}
        )
    )
    got = read(warehouse, "db.evolving").to_arrow()
    expected = table.refresh().scan().to_arrow()
    assert got.schema == expected.schema and got.column_names == ["id", "label", "score"]
    assert rows(got) == rows(expected)
    assert read(warehouse, "db.evolving").filter(expr=sf.col("label") == "a").take_all() == [
        {"id": 1, "label": "a", "score": None}
    ]


# -- errors and packaging ----------------------------------------------------------------------


def test_clear_errors(warehouse):
    partitioned_events(warehouse)
    with pytest.raises(ValueError, match="db.missing"):
        read(warehouse, "db.missing").count()
    with pytest.raises(ValueError, match="'nope'"):
        read(warehouse).select_columns(["nope"]).take_all()
    with pytest.raises(ValueError, match="'nope'"):
        read(warehouse).filter(expr=sf.col("nope") > 1).take_all()
    with pytest.raises(TypeError, match="row_filter"):
        read(warehouse, row_filter=42)
    with pytest.raises(ValueError, match="Cannot parse row_filter"):
        read(warehouse, row_filter="id >>> 3")
    with pytest.raises(TypeError, match="Unknown scan_kwargs"):
        read(warehouse, scan_kwargs={"colour": "red"})
    with pytest.raises(ValueError, match="table_identifier"):
        sf.read_iceberg("")
    remove_files(warehouse, [data_files(warehouse.catalog().load_table("db.events"))[0].file_path])
    with pytest.raises(Exception, match=r"\.parquet"):
        read(warehouse).take_all()


def test_import_shardflow_does_not_import_pyiceberg():
    code = (
        "import sys, shardflow as sf\n"
        "assert 'pyiceberg' not in sys.modules\n"
        "assert 'shardflow.connectors.iceberg' not in sys.modules\n"
        "assert callable(sf.read_iceberg)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_catalog_object_and_connector_name(warehouse, backend):
    table = partitioned_events(warehouse, appends=1)
    catalog = warehouse.catalog()
    ds = sf.read_iceberg("db.events", catalog=catalog, selected_fields=("id",))
    assert sorted(r["id"] for r in ds.take_all()) == list(range(100))
    by_name = sf.read_datasource(
        "iceberg", table_identifier="db.events", catalog_kwargs=warehouse.catalog_kwargs
    )
    assert rows(by_name.to_arrow()) == rows(table.scan().to_arrow())
    with pytest.raises(ValueError, match="cannot be given together"):
        sf.read_iceberg("db.events", catalog=catalog, catalog_kwargs=warehouse.catalog_kwargs)
    with pytest.raises(TypeError, match="pyiceberg Catalog"):
        sf.read_iceberg("db.events", catalog="default")
