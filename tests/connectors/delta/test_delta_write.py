"""write_delta: one Delta transaction per write, read back with deltalake itself; a failed
write (a failing task, a killed worker, a schema error) leaves the table as it was."""

from __future__ import annotations

import datetime
import functools
import os
import signal

import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.connectors.delta import DeltaDatasink

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.timeout(180)


def _data(start, n):
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([None if i % 7 == 0 else f"p {i % 3}/x%" for i in ids], pa.string()),
            "at": pa.array(
                [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) for _ in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "score": pa.array([i / 4 for i in ids], pa.float32()),
        }
    )


def _read(path, version=None):
    return deltalake.DeltaTable(path, version=version).to_pyarrow_table().sort_by("id")


def _files(folder):
    return sorted(
        os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs
    )


def test_write_creates_a_partitioned_table(tmp_path, backend):
    path = str(tmp_path / "t")
    data = _data(0, 500)
    sf.from_arrow(data).repartition(4).write_delta(path, partition_by=["part"], name="events")
    table = deltalake.DeltaTable(path)
    assert table.version() == 0 and table.metadata().partition_columns == ["part"]
    assert table.metadata().name == "events"
    got = _read(path)
    assert got.select(data.column_names).to_pylist() == data.to_pylist()
    # The partition values (null, spaces, slashes, percent signs) prune files on read.
    pruned = sf.read_delta(path, filter=sf.col("part") == "p 1/x%").to_arrow()
    assert sorted(pruned.column("id").to_pylist()) == [
        i for i in range(500) if i % 7 and i % 3 == 1
    ]
    stats = pa.table(table.get_add_actions(flatten=True))
    assert sum(stats.column("num_records").to_pylist()) == 500


def test_each_write_is_one_transaction(tmp_path):
    path = str(tmp_path / "t")
    sf.from_arrow(_data(0, 100)).repartition(3).write_delta(path)
    sf.from_arrow(_data(100, 50)).repartition(3).write_delta(path, mode="append")
    assert deltalake.DeltaTable(path).version() == 1
    assert _read(path).num_rows == 150 and _read(path, version=0).num_rows == 100
    # A narrower type converts on append; overwrite replaces the rows (and the schema).
    narrower = _data(150, 10).set_column(0, "id", pa.array(range(150, 160), pa.int32()))
    sf.from_arrow(narrower).write_delta(path, partition_cols=None)
    assert _read(path).num_rows == 160
    sf.from_items([{"id": 1, "name": "only"}]).write_delta(path, mode="overwrite")
    assert deltalake.DeltaTable(path).version() == 3
    assert _read(path).to_pylist() == [{"id": 1, "name": "only"}]
    history = [h["operation"] for h in deltalake.DeltaTable(path).history()]
    assert len(history) == 4


def _fail_on(marker_id, batch):
    if marker_id in batch["id"].to_pylist():
        raise RuntimeError("injected failure in a write task")
    return batch


def test_a_failed_write_leaves_the_table_as_it_was(tmp_path, backend):
    path = str(tmp_path / "t")
    sf.from_arrow(_data(0, 100)).write_delta(path, partition_by=["part"])
    before_files, before_rows = _files(path), _read(path)
    ds = sf.from_arrow([_data(100 + 10 * i, 10) for i in range(6)]).map_batches(
        functools.partial(_fail_on, 145), batch_format="pyarrow"
    )
    DeltaDatasink.file_bytes = 1  # every block its own file, so tasks write before the failure
    try:
        with pytest.raises(Exception, match="injected failure"):
            ds.write_delta(path)
    finally:
        DeltaDatasink.file_bytes = 128 * 1024 * 1024
    assert deltalake.DeltaTable(path).version() == 0
    assert _files(path) == before_files
    assert _read(path).equals(before_rows)


def test_a_failed_write_to_a_new_table_leaves_no_folder(tmp_path):
    path = str(tmp_path / "new" / "t")
    ds = sf.from_arrow([_data(0, 10), _data(10, 10)]).map_batches(
        functools.partial(_fail_on, 15), batch_format="pyarrow"
    )
    with pytest.raises(Exception, match="injected failure"):
        ds.write_delta(path, partition_by=["part"])
    assert not os.path.exists(path)


class KillOnce:
    """Kills its own worker process at row ``at`` the first time (a marker file remembers)."""

    def __init__(self, marker, at):
        self.marker, self.at = marker, at

    def __call__(self, row):
        if row["id"] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return row


def test_a_killed_write_task_is_rerun_and_leaves_no_stray_file(tmp_path):
    path = str(tmp_path / "t")
    ds = sf.range(200, override_num_blocks=2).map(KillOnce(str(tmp_path / "killed"), at=170))
    DeltaDatasink.file_bytes = 1
    try:
        ds.write_delta(path)
    finally:
        DeltaDatasink.file_bytes = 128 * 1024 * 1024
    assert os.path.exists(tmp_path / "killed")
    assert _read(path).column("id").to_pylist() == list(range(200))
    committed = {
        a["path"] for a in pa.table(deltalake.DeltaTable(path).get_add_actions()).to_pylist()
    }
    on_disk = {f for f in _files(path) if f.endswith(".parquet")}
    assert on_disk == committed


def test_schema_errors_name_the_column_before_any_file(tmp_path):
    path = str(tmp_path / "t")
    sf.from_arrow(_data(0, 10)).write_delta(path, partition_by=["part"])
    before = _files(path)
    wrong_type = _data(10, 5).set_column(3, "score", pa.array(["x"] * 5))
    with pytest.raises(TypeError, match="column 'score'"):
        sf.from_arrow(wrong_type).write_delta(path)
    with pytest.raises(ValueError, match=r"\['extra'\] are not in the table"):
        sf.from_arrow(_data(10, 5).append_column("extra", pa.array([1] * 5))).write_delta(path)
    with pytest.raises(ValueError, match="partitioned by"):
        sf.from_arrow(_data(10, 5)).write_delta(path, partition_by=["id"])
    with pytest.raises(TypeError, match="uint64"):
        sf.from_items([{"u": 1}]).map_batches(lambda b: {"u": b["u"].astype("uint64")}).write_delta(
            str(tmp_path / "u")
        )
    assert _files(path) == before and deltalake.DeltaTable(path).version() == 0
    with pytest.raises(ValueError, match="mode must be"):
        sf.from_arrow(_data(0, 1)).write_delta(path, mode="upsert")
    with pytest.raises(ValueError, match="differ"):
        sf.from_arrow(_data(0, 1)).write_delta(path, partition_by=["a"], partition_cols=["b"])


def test_nanosecond_and_unsigned_columns_are_stored_as_delta_types(tmp_path):
    path = str(tmp_path / "t")
    table = pa.table(
        {
            "id": pa.array([1, 2], pa.uint32()),
            "at": pa.array([0, 1000], pa.timestamp("ns")),
            "text": pa.array(["a", "b"], pa.large_string()),
        }
    )
    sf.from_arrow(table).write_delta(path)
    got = _read(path)
    assert got.schema.field("id").type == pa.int64()
    assert got.column("at").to_pylist() == [
        datetime.datetime(1970, 1, 1),
        datetime.datetime(1970, 1, 1, 0, 0, 0, 1),
    ]
    assert got.column("text").to_pylist() == ["a", "b"]


def test_writing_no_rows(tmp_path):
    path = str(tmp_path / "t")
    sf.from_arrow(_data(0, 0)).write_delta(path)
    assert deltalake.DeltaTable(path).version() == 0 and _read(path).num_rows == 0
