"""read_hudi on local tables: snapshot and incremental queries, filters, partitioning, both
backends; rows compared with the model of each table (conftest.ModelTable) and with what the
hudi library itself reads."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hudi_models import ModelTable, rows_of, trips

import shardflow as sf
from shardflow.connectors.hudi.sample_tables import (
    MERGE_ON_READ,
    META_COLUMNS,
    SampleHudiTable,
)

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.timeout(120)

COLUMNS = ("id", "city", "fare", "note", "_hoodie_commit_time")


def _hudi_reads(path: str, **query) -> pa.Table:
    """What hudi reads by itself (its own snapshot or incremental read), either API."""
    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    if hasattr(hudi, "HudiReadOptions"):
        options = hudi.HudiReadOptions(filters=query.get("filters"))
        if "start" in query:
            options = (
                options.with_query_type(hudi.HudiQueryType.Incremental)
                .with_start_timestamp(query["start"])
                .with_end_timestamp(query["end"])
            )
        return pa.Table.from_batches(table.read(options))
    if "start" in query:
        return pa.Table.from_batches(table.read_incremental_records(query["start"], query["end"]))
    return pa.Table.from_batches(table.read_snapshot(filters=query.get("filters")))


def _sorted_rows(table: pa.Table) -> list[dict]:
    return table.select(list(COLUMNS)).sort_by("id").to_pylist()


def test_snapshot_reads_latest_records_on_both_backends(trips_table, backend):
    ds = sf.read_hudi(trips_table.path)
    assert rows_of(ds) == trips_table.snapshot()
    assert ds.count() == 32
    assert ds.schema().names == [*META_COLUMNS, "id", "city", "fare", "note"]
    reference = _hudi_reads(trips_table.path)
    assert ds.to_arrow().schema == reference.schema
    assert rows_of(ds) == _sorted_rows(reference)


def test_snapshot_dtypes_and_meta_columns(trips_table):
    table = sf.read_hudi(trips_table.path).to_arrow().sort_by("id")
    assert table.schema.field("id").type == pa.int64()
    assert table.schema.field("fare").type == pa.float64()
    assert all(table.schema.field(c).type == pa.string() for c in META_COLUMNS)
    assert table.column("_hoodie_record_key").to_pylist() == [str(i) for i in range(32)]
    assert table.column("_hoodie_partition_path").to_pylist() == table.column("city").to_pylist()
    # each record names the base file it is in: the latest slice of its file group
    names = set(table.column("_hoodie_file_name").to_pylist())
    assert all(n.endswith(".parquet") for n in names)


@pytest.mark.parametrize("blocks", [1, 3, 50])
def test_number_of_blocks_does_not_change_rows(trips_table, blocks):
    ds = sf.read_hudi(trips_table.path, override_num_blocks=blocks)
    assert rows_of(ds) == trips_table.snapshot()


def test_count_comes_from_the_plan_when_the_library_knows(trips_table):
    ds = sf.read_hudi(trips_table.path)
    assert ds.count() == len(trips_table.snapshot())
    filtered = sf.read_hudi(trips_table.path, filters=[("fare", "<", "0")])
    assert filtered.count() == sum(1 for r in trips_table.snapshot() if r["fare"] < 0)


@pytest.mark.parametrize(
    "filters",
    [
        [("city", "=", "la")],
        [("city", "!=", "la")],
        [("fare", ">", "10")],
        [("fare", "<=", "0")],
        [("city", "=", "sf"), ("id", ">=", "20")],
        [("city", ">", "la"), ("note", "<", "trip 3")],
    ],
)
def test_filters_select_rows_exactly(trips_table, filters):
    expected = pa.Table.from_pylist(trips_table.snapshot())
    ops = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal}
    ops |= {">": pc.greater, ">=": pc.greater_equal}
    for column, op, value in filters:
        literal = pa.scalar(value).cast(expected.schema.field(column).type)
        expected = expected.filter(ops[op](expected[column], literal))
    ds = sf.read_hudi(trips_table.path, filters=filters)
    assert rows_of(ds) == expected.select(list(COLUMNS)).sort_by("id").to_pylist()


def test_partition_filter_matches_hudi_pruning(trips_table):
    ds = sf.read_hudi(trips_table.path, filters=[("city", "=", "nyc")])
    reference = _hudi_reads(trips_table.path, filters=[("city", "=", "nyc")])
    assert rows_of(ds) == _sorted_rows(reference)
    assert {r["city"] for r in rows_of(ds)} == {"nyc"}


@pytest.mark.parametrize("window", [(0, 1), (0, 2), (1, 2), (0, None), (None, 1)])
def test_incremental_reads_records_committed_in_the_window(trips_table, window, backend):
    instants = trips_table.instants
    start = None if window[0] is None else instants[window[0]]
    end = None if window[1] is None else instants[window[1]]
    options = {}
    if start is not None:
        options["hoodie.read.file_group.start_timestamp"] = start
    if end is not None:
        options["hoodie.read.file_group.end_timestamp"] = end
    ds = sf.read_hudi(trips_table.path, query_type="incremental", hudi_options=options)
    assert rows_of(ds) == trips_table.incremental(start, end)


def test_incremental_takes_hudi_05_option_names(trips_table):
    first, second, _ = trips_table.instants
    ds = sf.read_hudi(
        trips_table.path,
        query_type="INCREMENTAL",
        hudi_options={"hoodie.read.start.timestamp": first, "hoodie.read.end.timestamp": second},
    )
    assert rows_of(ds) == trips_table.incremental(first, second)
    if hasattr(hudi.HudiTable, "read_incremental_records"):  # hudi 0.4 reads it itself too
        assert rows_of(ds) == _sorted_rows(_hudi_reads(trips_table.path, start=first, end=second))


def test_incremental_after_the_last_commit_is_empty(trips_table):
    ds = sf.read_hudi(
        trips_table.path,
        query_type="incremental",
        hudi_options={"hoodie.read.file_group.start_timestamp": trips_table.instants[-1]},
    )
    assert ds.take_all() == []


def test_projection_reads_the_selected_columns(trips_table):
    ds = sf.read_hudi(trips_table.path, filters=[("city", "=", "la")]).select_columns(
        ["fare", "id"]
    )
    expected = [{"fare": r["fare"], "id": r["id"]} for r in trips_table.snapshot()]
    expected = [e for e, r in zip(expected, trips_table.snapshot()) if r["city"] == "la"]
    assert sorted(ds.take_all(), key=lambda r: r["id"]) == expected
    assert ds.schema().names == ["fare", "id"]


def test_table_without_partitions(tmp_path):
    model = ModelTable(SampleHudiTable(tmp_path / "flat", max_file_rows=4))
    model.commit(trips(list(range(10)), [float(i) for i in range(10)]))
    model.commit(trips([2, 3, 11], [-2.0, -3.0, 11.0]))
    assert rows_of(sf.read_hudi(model.path)) == model.snapshot()
    assert rows_of(sf.read_hudi(tmp_path / "flat")) == model.snapshot()  # a PathLike
    assert {r["_hoodie_partition_path"] for r in sf.read_hudi(model.path).take_all()} == {""}


def test_hive_style_partitions(tmp_path):
    model = ModelTable(SampleHudiTable(tmp_path / "hive", partition_field="city", hive_style=True))
    model.commit(trips(list(range(9)), [float(i) for i in range(9)]))
    model.commit(trips([0, 1], [-1.0, -2.0]))
    ds = sf.read_hudi(model.path, filters=[("city", "=", "sf")])
    assert rows_of(ds) == [r for r in model.snapshot() if r["city"] == "sf"]
    paths = {r["_hoodie_partition_path"] for r in sf.read_hudi(model.path).take_all()}
    assert paths == {"city=sf", "city=la", "city=nyc"}


def test_merge_on_read_table_of_base_files(tmp_path):
    model = ModelTable(
        SampleHudiTable(tmp_path / "mor", partition_field="city", table_type=MERGE_ON_READ)
    )
    first = model.commit(trips(list(range(6)), [float(i) for i in range(6)]))
    model.commit(trips([6, 7, 8], [6.0, 7.0, 8.0]))
    assert hudi.HudiTableBuilder.from_base_uri(model.path).build().is_mor
    assert rows_of(sf.read_hudi(model.path)) == model.snapshot()
    ds = sf.read_hudi(
        model.path,
        query_type="incremental",
        hudi_options={"hoodie.read.file_group.start_timestamp": first},
    )
    assert rows_of(ds) == model.incremental(first, None)


def test_empty_table_reads_empty(tmp_path):
    table = SampleHudiTable(tmp_path / "empty", partition_field="city")
    ds = sf.read_hudi(table.path)
    assert ds.take_all() == []
    assert ds.count() == 0


def test_ray_task_arguments_are_taken_and_checked(trips_table):
    ds = sf.read_hudi(
        trips_table.path,
        num_cpus=1,
        memory=2**20,
        concurrency=2,
        label_selector={"zone": "a"},
        ray_remote_args={"max_retries": 1},
    )
    assert ds.count() == 32
    with pytest.raises(TypeError, match="num_cpus"):
        sf.read_hudi(trips_table.path, num_cpus="1")
    with pytest.raises(ValueError, match="memory"):
        sf.read_hudi(trips_table.path, memory=-1)


def test_read_hudi_by_connector_name(trips_table):
    ds = sf.read_datasource("hudi", table_uri=trips_table.path, filters=[("city", "=", "la")])
    assert {r["city"] for r in ds.take_all()} == {"la"}
