"""Resumable writes: a rerun after the driver was killed midway skips the write tasks already
done and gives the same output as an uninterrupted run."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pytest

import shardflow as sf

pytestmark = pytest.mark.timeout(180)

SCRIPT = """
    import os, sys, time
    import shardflow as sf
    src, out, marks, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    sf.DataContext.get_current().num_cpus = 1  # tasks one after another

    def work(batch):
        open(os.path.join(marks, f"{os.getpid()}-{int(batch['id'][0])}"), "w").close()
        time.sleep(delay)
        batch["y"] = batch["id"] * 3
        return batch

    sf.read_parquet(src).map_batches(work).write_parquet(out, resume=True)
    print("done", flush=True)
"""


def _run(args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
        **kwargs,
    )


def _rows(folder):
    table = pq.read_table(str(folder))
    return sorted(zip(table.column("id").to_pylist(), table.column("y").to_pylist()))


def test_a_resumed_write_skips_done_tasks_and_matches_a_full_run(tmp_path):
    src = tmp_path / "src"
    sf.range(80, override_num_blocks=8).write_parquet(str(src))  # 8 files: 8 read tasks
    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out"
    first = _run([src, out, marks, 0.4])
    try:
        deadline = time.monotonic() + 60
        journal = []
        while len(journal) < 3 and time.monotonic() < deadline:
            journal = glob.glob(str(out / ".shardflow-staging-resume-*" / "_task-*.json"))
            time.sleep(0.05)
        assert len(journal) >= 3, "the first run never got going"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        first.kill()
    done_before = len(glob.glob(str(out / ".shardflow-staging-resume-*" / "_task-*.json")))
    ran_first = len(os.listdir(marks))

    second = _run([src, out, marks, 0.0])
    assert second.communicate(timeout=120)[0].strip() == "done"
    ran_second = len(os.listdir(marks)) - ran_first
    assert not glob.glob(str(out / ".shardflow-staging-*"))  # committed, staging gone
    tasks = len(os.listdir(out))  # one file per write task
    assert done_before < tasks
    assert ran_second == tasks - done_before  # exactly the tasks not done before ran again

    reference = tmp_path / "reference"
    sf.read_parquet(str(src)).map_batches(lambda b: {**b, "y": b["id"] * 3}).write_parquet(
        str(reference)
    )
    assert _rows(out) == _rows(reference) == [(i, 3 * i) for i in range(80)]
    files = sorted(p.split("_", 1)[1] for p in os.listdir(out))  # names less the write's id
    assert files == sorted(p.split("_", 1)[1] for p in os.listdir(reference))


def test_resume_is_refused_where_tasks_cannot_be_skipped(tmp_path):
    with pytest.raises(ValueError, match="same tasks as the read"):
        sf.range(10).random_shuffle().write_parquet(str(tmp_path / "x"), resume=True)


def test_a_resumable_write_that_finishes_leaves_no_journal(tmp_path):
    sf.range(30, override_num_blocks=3).write_csv(str(tmp_path / "csv"), resume=True)
    assert sorted(os.listdir(tmp_path / "csv"))
    assert not any(p.startswith(".") for p in os.listdir(tmp_path / "csv"))
    assert sf.read_csv(str(tmp_path / "csv")).count() == 30


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
    staged = [p for p in store.listing("out") if "_task-" in p]
    assert 0 < len(staged) < 6  # the tasks before the failure are recorded
    marker.touch()
    ds.write_parquet(folder, resume=True, **store.options())
    listing = store.listing("out")
    assert not [p for p in listing if p.startswith(".")]  # committed, no staging left
    got = sorted(sf.read_parquet(folder, **store.options()).to_pandas()["id"].tolist())
    assert got == list(range(60))
    assert len(listing) == 6
