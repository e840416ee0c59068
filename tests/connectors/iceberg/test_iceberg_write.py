"""Dataset.write_iceberg on real pyiceberg SqlCatalogs (local and S3 warehouses), both backends.

Results are checked against pyiceberg's own scan and pandas. Every failure case also checks
that the table's snapshot is unchanged and that no data file is left that no snapshot
references (an orphan).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pyarrow as pa
import pytest

pytest.importorskip("pyiceberg")

from iceberg_tables import (
    EVENTS_SCHEMA,
    create_table,
    data_files,
    events,
    local_warehouse,
    s3_warehouse,
)

import shardflow as sf
from shardflow.connectors.iceberg.commit import WRITE_ID_PROPERTY, IcebergCommitConflictError
from shardflow.connectors.iceberg.writing import IcebergSchemaError


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


def ids(table) -> list:
    return sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def snapshot_id(table):
    snapshot = table.refresh().current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


def referenced_files(table) -> set:
    """Data files any snapshot of the table references."""
    table = table.refresh()
    paths = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path.split("://", 1)[1])
    return paths


def assert_no_orphans(warehouse, table):
    on_storage = set(warehouse.files(table))
    orphans = on_storage - referenced_files(table)
    assert not orphans, f"data files no snapshot references: {sorted(orphans)}"


def pyiceberg_append(table, data):
    """Append with pyiceberg itself (which wants required columns typed non-nullable)."""
    required = {f.name for f in table.schema().fields if f.required}
    table.append(
        data.cast(pa.schema([f.with_nullable(f.name not in required) for f in data.schema]))
    )


def write(ds, warehouse, name="db.events", **kwargs):
    ds.write_iceberg(name, catalog_kwargs=warehouse.catalog_kwargs, **kwargs)


def blocks(table, parts):
    step = -(-table.num_rows // parts)
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


def _identity(batch):
    return batch


# -- append ----------------------------------------------------------------------------------


def test_append_round_trip_in_one_commit(any_warehouse, backend):
    table = create_table(any_warehouse, "events", EVENTS_SCHEMA, partition_by=["region"])
    table.append(events(10))
    before = table.refresh().current_snapshot()
    data = events(300, 10)
    # map_batches: the schema is not known when the write starts (checked in the tasks)
    ds = sf.from_arrow(blocks(data, 4)).map_batches(_identity, batch_format="pyarrow")
    write(ds, any_warehouse, snapshot_properties={"job": "nightly"})
    table = table.refresh()
    after = table.current_snapshot()
    assert after.parent_snapshot_id == before.snapshot_id  # exactly one new snapshot
    assert after.summary.operation.value == "append"
    assert after.summary["job"] == "nightly" and after.summary[WRITE_ID_PROPERTY]
    assert ids(table) == list(range(310))
    got = table.scan(row_filter="id >= 10").to_arrow().sort_by("id")
    assert got.equals(data.sort_by("id"))
    assert sf.read_iceberg("db.events", catalog_kwargs=any_warehouse.catalog_kwargs).count() == 310
    assert_no_orphans(any_warehouse, table)


def test_append_converts_types_without_loss(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    data = pa.table(
        {
            "name": pa.array(["a", "b"], pa.large_string()),
            "id": pa.array([1, 2], pa.int32()),
            "value": pa.array([0.5, 1.5], pa.float32()),
        }
    )  # other column order, narrower types, no 'region' (optional: nulls)
    write(sf.from_arrow(data), warehouse)
    got = table.refresh().scan().to_arrow().sort_by("id")
    assert got.schema == EVENTS_SCHEMA
    assert got.to_pylist() == [
        {"id": 1, "region": None, "value": 0.5, "name": "a"},
        {"id": 2, "region": None, "value": 1.5, "name": "b"},
    ]


def test_writing_no_rows_commits_nothing(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    write(sf.from_arrow(events(5)).filter(expr=sf.col("id") > 100), warehouse)
    assert table.refresh().current_snapshot() is None


# -- schema checks -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            pa.table({"id": pa.array([1], pa.int64()), "colour": ["red"]}),
            "'colour'.*not in Iceberg table",
        ),
        (pa.table({"id": ["one"]}), "'id' has type string.*int64"),
        (pa.table({"id": pa.array([1.5], pa.float64())}), "'id' has type double"),
    ],
)
@pytest.mark.parametrize("schema_known", [True, False])
def test_schema_mismatch_fails_before_any_file(warehouse, bad, message, schema_known):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(3))
    before = snapshot_id(table)
    ds = sf.from_arrow(bad)
    if not schema_known:
        ds = ds.map_batches(_identity, batch_format="pyarrow")
    with pytest.raises(IcebergSchemaError, match=message):
        write(ds, warehouse)
    assert snapshot_id(table) == before
    assert_no_orphans(warehouse, table)


def test_required_columns_must_be_given_and_not_null(warehouse):
    table = create_table(warehouse, "events", EVENTS_SCHEMA, identifier=["id"])
    with pytest.raises(IcebergSchemaError, match=r"requires column\(s\) \['id'\]"):
        write(sf.from_arrow(events(3).drop_columns(["id"])), warehouse)
    nulls = events(3).set_column(0, "id", pa.array([1, None, 3], pa.int64()))
    with pytest.raises(IcebergSchemaError, match="'id' is required.*1 of"):
        write(sf.from_arrow(nulls).map_batches(_identity, batch_format="pyarrow"), warehouse)
    assert table.refresh().current_snapshot() is None
    assert_no_orphans(warehouse, table)


# -- overwrite -------------------------------------------------------------------------------------


def test_overwrite_everything(any_warehouse, backend):
    table = create_table(any_warehouse, "events", EVENTS_SCHEMA, partition_by=["region"])
    table.append(events(100))
    write(sf.from_arrow(events(10, 1000)), any_warehouse, mode="overwrite")
    assert ids(table) == list(range(1000, 1010))
    assert table.refresh().current_snapshot().summary.operation.value == "overwrite"


@pytest.mark.parametrize(
    "overwrite_filter",
    [sf.col("region") == "north", "region = 'north'"],
    ids=["expression", "string"],
)
def test_overwrite_a_partition_drops_its_files_unread(warehouse, backend, overwrite_filter):
    table = create_table(warehouse, "events", EVENTS_SCHEMA, partition_by=["region"])
    table.append(events(100))
    kept = {f.file_path for f in data_files(table) if f.partition[0] != "north"}
    replacement = events(8, 1000).set_column(1, "region", pa.array(["north"] * 8))
    write(
        sf.from_arrow(replacement), warehouse, mode="overwrite", overwrite_filter=overwrite_filter
    )
    table = table.refresh()
    assert kept <= {f.file_path for f in data_files(table)}  # other partitions untouched
    df = pd.DataFrame(events(100).to_pydict())
    expected = sorted(df[df.region != "north"].id.tolist() + list(range(1000, 1008)))
    assert ids(table) == expected


def test_overwrite_rows_inside_files_rewrites_them(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(100))
    table.append(events(100, 100))
    # value >= 75 rows go; '% 2' is evaluated by Arrow (Iceberg cannot), still exactly
    condition = (sf.col("value") >= 75.0) & (sf.col("id") % 2 == 0)
    write(sf.from_arrow(events(3, 5000)), warehouse, mode="overwrite", overwrite_filter=condition)
    df = pd.DataFrame(pa.concat_tables([events(100), events(100, 100)]).to_pydict())
    kept = df[~((df.value >= 75.0) & (df.id % 2 == 0))].id.tolist()
    assert ids(table) == sorted(kept + [5000, 5001, 5002])
    got = table.refresh().scan().to_arrow()
    assert got.num_rows == len(kept) + 3
    assert_no_orphans(warehouse, table)


def test_overwrite_with_no_rows_empties_what_it_replaces(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(10))
    empty = sf.from_arrow(events(3)).filter(expr=sf.col("id") > 100)
    write(empty, warehouse, mode="overwrite", overwrite_filter=sf.col("id") < 4)
    assert ids(table) == list(range(4, 10))


# -- upsert ----------------------------------------------------------------------------------------


def test_upsert_by_identifier_fields(any_warehouse, backend):
    table = create_table(any_warehouse, "events", EVENTS_SCHEMA, identifier=["id"])
    pyiceberg_append(table, events(50))
    pyiceberg_append(table, events(50, 50))
    changes = events(20, 90).set_column(
        3, "name", pa.array([f"changed-{i}" for i in range(90, 110)])
    )
    write(sf.from_arrow(blocks(changes, 3)), any_warehouse, mode="upsert")
    got = table.refresh().scan().to_arrow().sort_by("id").to_pandas()
    assert got.id.tolist() == list(range(110))
    expected_names = [f"name-{i}" for i in range(90)] + [f"changed-{i}" for i in range(90, 110)]
    assert got.name.tolist() == expected_names
    assert table.current_snapshot().summary.operation.value == "overwrite"
    assert_no_orphans(any_warehouse, table)


def test_upsert_with_join_cols_and_null_keys(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(10))
    changes = pa.table(
        {
            "id": pa.array([3, 20, None], pa.int64()),
            "region": ["x", "y", "z"],
            "value": [1.0, 2.0, 3.0],
            "name": ["three", "twenty", "nobody"],
        }
    )
    write(sf.from_arrow(changes), warehouse, mode="upsert", upsert_kwargs={"join_cols": ["id"]})
    got = table.refresh().scan().to_arrow().to_pandas()
    assert sorted(got.name.tolist()) == sorted(
        [f"name-{i}" for i in range(10) if i != 3] + ["three", "twenty", "nobody"]
    )


def test_upsert_refuses_duplicate_keys_and_leaves_the_table(warehouse):
    table = create_table(warehouse, "events", EVENTS_SCHEMA, identifier=["id"])
    pyiceberg_append(table, events(5))
    before = snapshot_id(table)
    duplicated = pa.concat_tables([events(2), events(2)])
    with pytest.raises(ValueError, match="more than once"):
        write(sf.from_arrow(duplicated), warehouse, mode="upsert")
    assert snapshot_id(table) == before
    assert_no_orphans(warehouse, table)


def test_argument_checks(warehouse):
    create_table(warehouse, "events", EVENTS_SCHEMA)
    ds = sf.from_arrow(events(3))
    with pytest.raises(ValueError, match="mode must be one of"):
        write(ds, warehouse, mode="merge")
    with pytest.raises(ValueError, match="overwrite_filter"):
        write(ds, warehouse, overwrite_filter=sf.col("id") > 1)
    with pytest.raises(ValueError, match="upsert_kwargs"):
        write(ds, warehouse, upsert_kwargs={"join_cols": ["id"]})
    with pytest.raises(ValueError, match="identifier fields"):
        write(ds, warehouse, mode="upsert")
    with pytest.raises(ValueError, match="'nope'"):
        write(ds, warehouse, mode="upsert", upsert_kwargs={"join_cols": ["nope"]})
    with pytest.raises(ValueError, match="db.missing"):
        write(ds, warehouse, "db.missing")


# -- failures and concurrency ------------------------------------------------------------------


class FailOnBlock:
    """Fails on the block holding ``id == bad_id``, after other blocks were written."""

    def __init__(self, bad_id):
        self.bad_id = bad_id

    def __call__(self, batch):
        if self.bad_id in batch.column("id").to_pylist():
            raise RuntimeError("injected failure in a write task")
        return batch


def test_failure_mid_write_leaves_table_and_storage_unchanged(any_warehouse, backend):
    table = create_table(any_warehouse, "events", EVENTS_SCHEMA, partition_by=["region"])
    table.append(events(10))
    before = snapshot_id(table)
    data = events(400, 100)
    ds = sf.from_arrow(blocks(data, 8)).map_batches(FailOnBlock(475), batch_format="pyarrow")
    with pytest.raises(Exception, match="injected failure"):
        write(ds, any_warehouse)
    assert snapshot_id(table) == before
    assert ids(table) == list(range(10))
    assert_no_orphans(any_warehouse, table)


def test_commit_that_keeps_conflicting_fails_cleanly(warehouse, monkeypatch):
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table import Transaction

    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(10))
    before = snapshot_id(table)

    def always_conflicts(self):
        raise CommitFailedException("Table has been updated by another process (injected)")

    monkeypatch.setattr(Transaction, "commit_transaction", always_conflicts)
    monkeypatch.setattr("shardflow.connectors.iceberg.commit.time.sleep", lambda s: None)
    with pytest.raises(IcebergCommitConflictError, match="Nothing was committed"):
        write(sf.from_arrow(events(50, 100)), warehouse)
    monkeypatch.undo()
    assert snapshot_id(table) == before
    assert_no_orphans(warehouse, table)


def test_conflicting_overwrite_is_planned_again_on_the_new_state(warehouse, monkeypatch):
    from pyiceberg.table import Transaction

    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(10))
    original = Transaction.commit_transaction
    calls = []

    def concurrent_writer_first(self):
        if not calls:  # another writer commits between our planning and our commit
            calls.append(1)
            warehouse.catalog().load_table("db.events").append(events(5, 500))
        return original(self)

    monkeypatch.setattr(Transaction, "commit_transaction", concurrent_writer_first)
    write(
        sf.from_arrow(events(3, 900)),
        warehouse,
        mode="overwrite",
        overwrite_filter=sf.col("id") < 1000,
    )
    monkeypatch.undo()
    # serializable: the overwrite happened after the concurrent append, replacing its rows too
    assert ids(table) == [900, 901, 902]
    assert_no_orphans(warehouse, table)


WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    import shardflow as sf
    catalog_kwargs = dict(name="default", type="sql", uri=sys.argv[1], warehouse=sys.argv[2])
    start = int(sys.argv[3])
    for i in range(3):
        data = pa.table({"id": pa.array(range(start + i * 100, start + i * 100 + 100), pa.int64())})
        sf.from_arrow(data).write_iceberg("db.events", catalog_kwargs=catalog_kwargs)
    """
)


def test_two_concurrent_writers(warehouse):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    kwargs = warehouse.catalog_kwargs
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, kwargs["uri"], kwargs["warehouse"], str(start)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for start in (0, 10_000)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    assert ids(table) == list(range(300)) + list(range(10_000, 10_300))
    assert len(table.refresh().metadata.snapshots) == 6
    assert_no_orphans(warehouse, table)


def test_catalog_object_and_connector_name(warehouse, backend):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    sf.from_arrow(events(5)).write_iceberg("db.events", catalog=warehouse.catalog())
    sf.from_arrow(events(5, 5)).write_datasink(
        "iceberg", table_identifier="db.events", catalog_kwargs=warehouse.catalog_kwargs
    )
    assert ids(table) == list(range(10))


def _row(r):
    return {"id": r["id"], "name": f"row-{r['id']}"}


def test_write_tasks_in_worker_processes(warehouse):
    # A Python row function runs in worker processes on the local backend; the write task
    # runs there too, with a pickled copy of the sink.
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    for _ in range(3):
        table.append(events(2))  # some history, left out of what the tasks receive
    sf.range(1000).map(_row).write_iceberg("db.events", catalog_kwargs=warehouse.catalog_kwargs)
    got = [r for r in table.refresh().scan().to_arrow().to_pylist() if r["name"].startswith("row")]
    assert sorted(r["id"] for r in got) == list(range(1000))
    assert all(r["name"] == f"row-{r['id']}" and r["region"] is None for r in got)


def test_overwrite_with_a_filter_only_arrow_evaluates(warehouse):
    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    table.append(events(20))
    ds = sf.from_arrow(events(2, 100))
    write(ds, warehouse, mode="overwrite", overwrite_filter=sf.col("id") % 2 == 0)
    assert ids(table) == [i for i in range(20) if i % 2] + [100, 101]
    assert_no_orphans(warehouse, table)


def test_written_files_carry_field_ids_statistics_and_chosen_dictionaries(warehouse):
    import pyarrow.parquet as pq

    from shardflow.connectors.iceberg import IcebergDatasource

    table = create_table(warehouse, "events", EVENTS_SCHEMA)
    write(sf.from_arrow(events(5000)), warehouse)
    write(sf.from_arrow(events(5000, 5000)), warehouse)
    files = data_files(table)
    path = files[0].file_path.split("://", 1)[1]
    metadata = pq.ParquetFile(path).metadata
    schema = pq.read_schema(path)
    assert [f.metadata[b"PARQUET:field_id"] for f in schema] == [b"1", b"2", b"3", b"4"]
    encodings = {
        metadata.schema.column(i).name: metadata.row_group(0).column(i).encodings
        for i in range(metadata.num_columns)
    }
    assert "RLE_DICTIONARY" not in encodings["id"]  # unique values: no dictionary
    assert "RLE_DICTIONARY" in encodings["region"]  # four values: a dictionary
    assert all(f.lower_bounds and f.upper_bounds and f.record_count == 5000 for f in files)
    # the statistics prune: the second write's file cannot hold id < 100
    source = IcebergDatasource("db.events", catalog_kwargs=warehouse.catalog_kwargs)
    tasks = source.apply_predicate(sf.col("id") < 100).get_read_tasks(4)
    assert sum(len(t.metadata.input_files) for t in tasks) == 1
