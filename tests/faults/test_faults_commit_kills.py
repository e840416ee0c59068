"""A commit that a kill cannot tear: the driver is killed (SIGKILL) at every step of the commit,
on local disk and on S3 (moto), and after each kill

(a) rerunning the same command finishes the interrupted commit, or starts over when nothing
    was visible yet, and the result is exactly the rows of one run (no DestinationExistsError
    for its own commit, no file twice);
(b) a new local destination is either absent or whole;
(c) shardflow's readers never return part of a commit: they read the old content or the new
    one whole, or raise InterruptedCommitError naming the command that finishes it.

Each kill is a child process (tests/faults/scripts/write_pipeline.py) that the commit kills
at its k-th step (``SHARDFLOW_TEST_KILL_AT_COMMIT_STEP``); k grows until the child finishes.
"""

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
from shardflow.sdk.staging import InterruptedCommitError

pytestmark = pytest.mark.timeout(300)

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
sys.path.insert(0, SCRIPTS)
import write_pipeline

NEW_IDS = range(300)
OLD_IDS = range(1000, 1100)


def _put(store, rel, table):
    fs = store.fs
    path = fs._strip_protocol(store.path(rel))
    if store.kind == "local":
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with fs.open(path, "wb") as f:
        pq.write_table(table, f)
    fs.invalidate_cache()


def _source(store, files):
    """``files`` Parquet files holding the ids of NEW_IDS, written by pyarrow."""
    ids = list(NEW_IDS)
    step = len(ids) // files
    for i in range(files):
        chunk = ids[i * step : (i + 1) * step if i < files - 1 else None]
        _put(store, f"src/f{i}.parquet", pa.table({"id": pa.array(chunk, pa.int64())}))


def _reset(store, old_files):
    """The destination as before the write: absent, or holding ``old_files`` old files."""
    fs = store.fs
    for rel in store.listing():
        if not rel.startswith("src/"):
            fs.rm(fs._strip_protocol(store.path(rel)))
    if store.kind == "local":
        import shutil

        for name in os.listdir(store.root):
            if name != "src":
                shutil.rmtree(os.path.join(store.root, name))
    fs.invalidate_cache()
    ids = list(OLD_IDS)
    for i in range(old_files):
        chunk = ids[i::old_files]
        table = pa.table(
            {"id": pa.array(chunk, pa.int64()), "y": pa.array([-1] * len(chunk), pa.int64())}
        )
        _put(store, f"out/old-{i}.parquet", table)


def _rows(store):
    """The rows of the destination read by pyarrow (which skips hidden files); None when the
    destination does not exist."""
    fs = store.fs
    fs.invalidate_cache()
    folder = fs._strip_protocol(store.path("out"))
    if not fs.exists(folder):
        return None
    table = pads.dataset(folder, format="parquet", filesystem=fs).to_table()
    if "id" not in table.column_names:  # no visible file
        return Counter()
    return Counter(zip(table.column("id").to_pylist(), table.column("y").to_pylist()))


def _shardflow_rows(store):
    try:
        table = sf.read_parquet(store.path("out"), **store.options()).to_arrow()
    except InterruptedCommitError as exc:
        return exc
    except FileNotFoundError:
        return None
    return Counter(zip(table.column("id").to_pylist(), table.column("y").to_pylist()))


def _left_behind(store):
    listing = store.listing() if store.kind == "local" else store.listing("out")
    return [p for p in listing if ".shardflow-" in p or "_shardflow_commit" in p]


def _kill_at(spec, step):
    env = dict(
        os.environ,
        SHARDFLOW_DISABLE_PROGRESS_BARS="1",
        SHARDFLOW_TEST_KILL_AT_COMMIT_STEP=str(step),
    )
    child = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, "write_pipeline.py"), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode in (0, -9), child.stderr[-3000:]
    return child.returncode == 0


def _sweep(store, mode, old_files, new_files):
    """Kill the commit at step 1, 2, ... until a run finishes; check (a)-(c) after each."""
    _source(store, new_files)
    new = Counter((i, 3 * i) for i in NEW_IDS)
    old = Counter((i, -1) for i in OLD_IDS) if old_files else None
    expected = new + old if mode == "append" else new
    spec = {
        "src": store.path("src"),
        "dest": store.path("out"),
        "options": store.storage_options,
        "mode": mode,
    }
    outcomes = []
    for step in range(1, 40):
        _reset(store, old_files)
        finished = _kill_at(spec, step)
        on_disk = _rows(store)
        # (b) a new local destination is absent or whole
        if store.kind == "local" and not old_files:
            assert on_disk in (None, expected), f"step {step}: a partial new folder"
        # (c) shardflow reads the old content, or the new whole, or refuses naming the fix
        seen = _shardflow_rows(store)
        if isinstance(seen, InterruptedCommitError):
            assert "shardflow staging clean" in str(seen) and "Rerun the write" in str(seen)
            if step % 3 == 1:  # a glob lists only what it matches, and is refused too
                with pytest.raises(InterruptedCommitError):
                    sf.read_parquet(store.path("out") + "/*.parquet", **store.options()).count()
            outcomes.append("refused")
        else:
            assert seen in (old, expected), f"step {step}: shardflow read part of a commit"
            outcomes.append("old" if seen == old and seen != expected else "new")
        if finished:
            assert on_disk == expected and not _left_behind(store)
            return outcomes
        # (a) rerunning the same command finishes the job, exactly once
        write_pipeline.run(spec)
        assert _rows(store) == expected, f"step {step}: the rerun's result is not exact"
        assert not _left_behind(store), f"step {step}: {_left_behind(store)}"
        if store.kind != "local":
            assert "_SUCCESS" in store.listing("out")
    raise AssertionError("the commit never finished")


def test_killing_a_new_local_folder_s_commit_at_every_step(local_store):
    outcomes = _sweep(local_store, "error", old_files=0, new_files=2)
    assert "refused" not in outcomes  # one rename: nothing to refuse, never part of it
    assert len(outcomes) >= 3


def test_killing_a_local_overwrite_at_every_step(local_store):
    outcomes = _sweep(local_store, "overwrite", old_files=1, new_files=2)
    assert outcomes.count("refused") >= 5 and outcomes[-1] == "new"


@pytest.mark.slow
def test_killing_an_s3_overwrite_at_every_step(s3_store):
    outcomes = _sweep(s3_store, "overwrite", old_files=1, new_files=1)
    assert outcomes.count("refused") >= 7 and outcomes[-1] == "new"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["append", "overwrite"])
@pytest.mark.parametrize("where", ["local", "s3"])
def test_killing_a_larger_commit_at_every_step(request, where, mode):
    store = request.getfixturevalue(f"{where}_store")
    outcomes = _sweep(store, mode, old_files=2, new_files=3)
    assert outcomes[-1] == "new"


@pytest.mark.slow
def test_killing_a_gcs_overwrite_at_every_step(gcs_bucket, gcs_options):
    from storage_fixtures import Store

    outcomes = _sweep(Store("gcs", f"{gcs_bucket}/data", gcs_options), "overwrite", 2, 3)
    assert outcomes[-1] == "new"
