"""Resumable writes: a rerun after the driver was killed midway recognises finished work by what
it read (files by path, size and version, and byte ranges), so a rerun with other
``override_num_blocks`` or more CPUs writes every row exactly once; a rerun whose inputs or plan
changed refuses, naming the change, and never writes duplicates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.sdk.write_journal import ResumeMismatchError

pytestmark = pytest.mark.timeout(240)

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
sys.path.insert(0, SCRIPTS)
import write_pipeline

FILES, ROWS_PER_FILE = 12, 500


def _write_source(store, folder="src"):
    """12 Parquet files of 500 rows (ids 0..5999), written by pyarrow."""
    fs = store.fs
    for i in range(FILES):
        table = pa.table(
            {"id": pa.array(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE), pa.int64())}
        )
        path = fs._strip_protocol(store.path(folder, f"f{i:02d}.parquet"))
        if store.kind == "local":
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with fs.open(path, "wb") as f:
            pq.write_table(table, f, row_group_size=100)
    fs.invalidate_cache()


def _spec(store, **extra):
    return {
        "src": store.path("src"),
        "dest": store.path("out"),
        "options": store.storage_options,
        "resume": True,
        **extra,
    }


def _kill_midway(spec, kill_at_id):
    """Run the write in a child with one write task at a time; the child kills itself when
    its map function meets row ``kill_at_id``."""
    env = dict(
        os.environ,
        SHARDFLOW_DISABLE_PROGRESS_BARS="1",
        SHARDFLOW_TEST_KILL_DRIVER_AT_ID=str(kill_at_id),
    )
    child = subprocess.run(
        [
            sys.executable,
            os.path.join(SCRIPTS, "write_pipeline.py"),
            json.dumps({**spec, "num_cpus": 1}),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr[-2000:]


def _journal(store):
    """The task entries of the resumable staging folder (beside a new local destination,
    inside the destination on S3)."""
    base = () if store.kind == "local" else ("out",)
    entries = []
    for rel in store.listing(*base):
        if "-resume/_task-" in rel:
            with store.fs.open(store.fs._strip_protocol(store.path(*base, rel)), "rb") as f:
                entries.append(json.load(f))
    return entries


def _rows(store, folder="out"):
    """(id, y) of every row of the folder's files, read by pyarrow (it skips hidden files)."""
    fs = store.fs
    fs.invalidate_cache()
    dataset = pads.dataset(fs._strip_protocol(store.path(folder)), format="parquet", filesystem=fs)
    table = dataset.to_table()
    return Counter(zip(table.column("id").to_pylist(), table.column("y").to_pylist()))


def _expected(factor=3, ids=range(FILES * ROWS_PER_FILE)):
    return Counter((i, factor * i) for i in ids)


def _read_in_rerun(marks):
    return sum(int(name.rsplit("-", 1)[1]) for name in os.listdir(marks))


def _staging_left(store):
    where = store.listing() if store.kind == "local" else store.listing("out")
    return [p for p in where if ".shardflow-" in p or "_shardflow_commit" in p]


@pytest.mark.parametrize(
    "where, change",
    [
        ("local", "override_num_blocks"),
        ("local", "num_cpus"),
        ("s3", "override_num_blocks"),
        pytest.param("s3", "num_cpus", marks=pytest.mark.slow),
    ],
)
def test_a_rerun_split_into_other_tasks_writes_every_row_once(
    request, tmp_path, monkeypatch, where, change
):
    store = request.getfixturevalue(f"{where}_store")
    _write_source(store)
    # Run 1: four tasks of three files (override_num_blocks=4, or auto parallelism at 1 CPU),
    # killed inside the third: the first two tasks are recorded.
    first = _spec(store, blocks=4) if change == "override_num_blocks" else _spec(store)
    _kill_midway(first, kill_at_id=7 * ROWS_PER_FILE + 10)
    recorded = _journal(store)
    assert len(recorded) == 2, recorded
    done_rows = sum(entry["rows"] for entry in recorded)
    assert 0 < done_rows < FILES * ROWS_PER_FILE
    # Run 2 in this process, split otherwise: five tasks (one holds done and undone files), or
    # one file per task on a machine with eight CPUs.
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("SHARDFLOW_TEST_MARKS", str(marks))
    second = _spec(store, blocks=5) if change == "override_num_blocks" else _spec(store, num_cpus=8)
    write_pipeline.run(second)
    assert _rows(store) == _expected()
    assert _read_in_rerun(marks) == FILES * ROWS_PER_FILE - done_rows  # only what was not done
    assert not _staging_left(store)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_rerun_refuses_changed_inputs_or_plan_and_starts_over_when_told(request, where):
    store = request.getfixturevalue(f"{where}_store")
    _write_source(store)
    spec = _spec(store, blocks=4)
    _kill_midway(spec, kill_at_id=7 * ROWS_PER_FILE + 10)
    staged = _staging_left(store)
    assert staged
    fs = store.fs

    def refused(match, **changes):
        with pytest.raises(ResumeMismatchError, match=match) as info:
            write_pipeline.run({**spec, **changes})
        assert "shardflow staging clean" in str(info.value) and "resume=False" in str(info.value)
        assert _staging_left(store) == staged  # the staged work is untouched
        assert not fs.exists(fs._strip_protocol(store.path("out", "_SUCCESS")))

    # Another plan: another function, other columns.
    refused(r"step MapBatches\(quadruple\) .*changed|steps were", plan="quadruple")
    refused(
        r"steps were ReadParquet -> MapBatches\(triple\) and are now .*SelectColumns", plan="select"
    )
    # Another input: a file added, removed, rewritten.
    extra = pa.table({"id": pa.array([10**6], pa.int64())})
    added = fs._strip_protocol(store.path("src", "g.parquet"))
    with fs.open(added, "wb") as f:
        pq.write_table(extra, f)
    refused(r"1 added: .*g\.parquet")
    fs.rm(added)
    removed = fs._strip_protocol(store.path("src", "f03.parquet"))
    with fs.open(removed, "rb") as f:
        kept = f.read()
    fs.rm(removed)
    refused(r"1 removed: .*f03\.parquet")
    with fs.open(removed, "wb") as f:
        pq.write_table(pa.table({"id": pa.array(range(20_000, 20_500), pa.int64())}), f)
    fs.invalidate_cache()
    refused(r"1 rewritten .*f03\.parquet")
    assert kept  # the old bytes are gone for good: the staged work of f03 is stale
    # Starting over as the message says: resume=False writes everything and drops the staging.
    write_pipeline.run({**spec, "resume": False})
    ids = [i for i in range(FILES * ROWS_PER_FILE) if not 1500 <= i < 2000] + list(
        range(20_000, 20_500)
    )
    assert _rows(store) == _expected(ids=ids)
    assert not _staging_left(store)


def test_the_staging_clean_command_is_the_other_way_to_start_over(local_store):
    from shardflow.cli import main

    _write_source(local_store)
    spec = _spec(local_store, blocks=4)
    _kill_midway(spec, kill_at_id=7 * ROWS_PER_FILE + 10)
    with pytest.raises(ResumeMismatchError):
        write_pipeline.run({**spec, "plan": "quadruple"})
    assert main(["staging", "clean", spec["dest"]]) == 0
    write_pipeline.run({**spec, "plan": "quadruple"})
    assert _rows(local_store) == _expected(factor=4)
    assert not _staging_left(local_store)


def test_row_groups_are_recognised_when_files_are_split_otherwise(tmp_path, monkeypatch):
    """Files larger than a split are cut into byte ranges; a rerun with other ranges skips
    exactly the row groups the first run wrote."""
    from shardflow.connectors.parquet import ParquetDatasource

    monkeypatch.setattr(ParquetDatasource, "_MIN_SPLIT_BYTES", 64)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2):
        table = pa.table({"id": pa.array(range(i * 1000, (i + 1) * 1000), pa.int64())})
        pq.write_table(table, str(src / f"f{i}.parquet"), row_group_size=50)
    out = str(tmp_path / "out")
    marks, marker = tmp_path / "marks", tmp_path / "fixed"
    marks.mkdir()
    monkeypatch.setenv("SHARDFLOW_TEST_MARKS", str(marks))
    sf.DataContext.get_current().num_cpus = 1
    udf = FailWhileMissing(str(marker), 1234)
    with pytest.raises(RuntimeError, match="injected failure"):
        sf.read_parquet(str(src), override_num_blocks=7).map_batches(udf).write_parquet(
            out, resume=True
        )
    read_first = _read_in_rerun(marks)
    for name in os.listdir(marks):
        os.remove(marks / name)
    marker.touch()
    # The same plan, cut into other byte ranges: 11 tasks.
    sf.read_parquet(str(src), override_num_blocks=11).map_batches(udf).write_parquet(
        out, resume=True
    )
    table = pq.read_table(out)
    assert sorted(table.column("id").to_pylist()) == list(range(2000))
    assert table.column("y").to_pylist() == [3 * i for i in table.column("id").to_pylist()]
    read_again = _read_in_rerun(marks)
    assert 0 < read_again < 2000 <= read_first + read_again


def test_resume_is_refused_where_tasks_cannot_be_skipped(tmp_path):
    with pytest.raises(ValueError, match="same tasks as the read"):
        sf.range(10).random_shuffle().write_parquet(str(tmp_path / "x"), resume=True)
    with pytest.raises(ValueError, match="tells what it reads"):
        sf.from_items([{"a": 1}]).write_parquet(str(tmp_path / "y"), resume=True)
    assert not os.listdir(tmp_path)


def test_a_resumable_write_that_finishes_leaves_no_journal(tmp_path):
    sf.range(30, override_num_blocks=3).write_csv(str(tmp_path / "csv"), resume=True)
    assert sorted(os.listdir(tmp_path)) == ["csv"]  # no staging beside it
    assert not any(p.startswith(".") for p in os.listdir(tmp_path / "csv"))
    assert sf.read_csv(str(tmp_path / "csv")).count() == 30


class FailWhileMissing:
    """Fails a batch holding row ``at`` while the marker file does not exist; marks what it
    reads in ``SHARDFLOW_TEST_MARKS``."""

    def __init__(self, marker: str, at: int):
        self.marker, self.at = marker, at

    def __call__(self, batch):
        marks = os.environ.get("SHARDFLOW_TEST_MARKS")
        if marks and len(batch["id"]):
            first = int(batch["id"][0])
            open(os.path.join(marks, f"{first}-{os.getpid()}-{len(batch['id'])}"), "w").close()
        if self.at in set(batch["id"].tolist()) and not os.path.exists(self.marker):
            raise RuntimeError("injected failure")
        batch["y"] = batch["id"] * 3
        return batch


class FailOnce:
    """Fails the block starting at ``at`` while the marker file does not exist."""

    def __init__(self, marker: str, at: int):
        self.marker, self.at = marker, at

    def __call__(self, batch):
        if int(batch["id"][0]) == self.at and not os.path.exists(self.marker):
            raise RuntimeError("injected failure")
        return batch


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_failed_resumable_write_continues_where_it_stopped(request, tmp_path, where):
    store = request.getfixturevalue(f"{where}_store")
    folder = store.path("out")
    marker = tmp_path / "fixed"
    sf.DataContext.get_current().num_cpus = 1
    ds = sf.range(60, override_num_blocks=6).map_batches(FailOnce(str(marker), 40))
    with pytest.raises(RuntimeError, match="injected failure"):
        ds.write_parquet(folder, resume=True, **store.options())
    staged = [
        p for p in (store.listing() if where == "local" else store.listing("out")) if "_task-" in p
    ]
    assert 0 < len(staged) < 6  # the tasks before the failure are recorded
    marker.touch()
    # The rerun splits the range otherwise: rows, not task numbers, are recognised.
    sf.range(60, override_num_blocks=4).map_batches(FailOnce(str(marker), 40)).write_parquet(
        folder, resume=True, **store.options()
    )
    listing = store.listing("out")
    assert not [p for p in listing if p.startswith(".")]  # committed, no staging left
    got = sorted(sf.read_parquet(folder, **store.options()).to_pandas()["id"].tolist())
    assert got == list(range(60))


def test_file_names_of_two_runs_never_collide(tmp_path):
    """A filename_provider that ignores write_uuid would give a rerun's task the name of a
    staged file of an earlier run: refused, instead of overwriting it."""
    from shardflow.sdk.filename_provider import FilenameProvider

    class ByTask(FilenameProvider):
        def get_filename_for_task(self, write_uuid, task_index):
            return f"part-{task_index}.parquet"

    marker = tmp_path / "fixed"
    sf.DataContext.get_current().num_cpus = 1
    ds = sf.range(60, override_num_blocks=6).map_batches(FailOnce(str(marker), 40))
    with pytest.raises(RuntimeError, match="injected failure"):
        ds.write_parquet(str(tmp_path / "out"), resume=True, filename_provider=ByTask())
    marker.touch()
    with pytest.raises(Exception, match="must put write_uuid in file names"):
        sf.range(60, override_num_blocks=3).map_batches(FailOnce(str(marker), 40)).write_parquet(
            str(tmp_path / "out"), resume=True, filename_provider=ByTask()
        )


def test_a_resumed_write_recognises_rows_on_both_backends(backend, tmp_path):
    """On Ray the tasks tell the sink what they read inside Ray workers."""
    out, marker = str(tmp_path / "out"), tmp_path / "fixed"
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        table = pa.table({"id": pa.array(range(i * 25, (i + 1) * 25), pa.int64())})
        pq.write_table(table, str(src / f"f{i}.parquet"))
    udf = FailWhileMissing(str(marker), 60)
    sf.DataContext.get_current().num_cpus = 1
    with pytest.raises(Exception, match="injected failure"):
        sf.read_parquet(str(src), override_num_blocks=4).map_batches(udf).write_parquet(
            out, resume=True
        )
    marker.touch()
    sf.read_parquet(str(src), override_num_blocks=2).map_batches(udf).write_parquet(
        out, resume=True
    )
    table = pq.read_table(out)
    assert Counter(zip(table.column("id").to_pylist(), table.column("y").to_pylist())) == Counter(
        (i, 3 * i) for i in range(100)
    )
