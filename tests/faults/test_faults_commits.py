"""Commits never mix: when any step of making a write visible fails, the destination is back
to exactly its old content and the error names the step; after a failed write no task writes
anymore; a failed write to a new nested folder leaves no folders behind."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

import shardflow as sf
from shardflow.sdk.file_datasink import WriteCommitError

pytestmark = pytest.mark.timeout(120)


def frame(n: int, start: int = 0) -> pd.DataFrame:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pd.DataFrame({"id": ids, "x": ids * 0.5})


def snapshot(store, folder="out"):
    """{relative path: bytes} of everything under the folder, hidden entries included."""
    fs = store.fs
    out = {}
    for rel in store.listing(folder):
        with fs.open(fs._strip_protocol(store.path(folder, rel)), "rb") as f:
            out[rel] = f.read()
    return out


def fail_on_call(monkeypatch, target, method, when):
    """Make ``target.method`` raise on the calls for which ``when(args, n)`` is true.

    ``target`` is a filesystem class, or an instance: fsspec caches one instance per storage
    options, so the writer uses the instance a test gets with the same options (and async
    filesystems set their sync methods on the instance)."""
    original = getattr(target, method)
    calls = []
    bound = not isinstance(target, type)

    def failing(*args, **kwargs):
        real_args = args if bound else args[1:]
        calls.append(real_args)
        if when(real_args, len(calls)):
            raise OSError(f"{method} failed (injected)")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, method, failing)
    return calls


def _write(store, df, mode, blocks=3):
    sf.from_pandas(df, override_num_blocks=blocks).write_parquet(
        store.path("out"), mode=mode, **store.options()
    )


def once(predicate):
    """A fault that happens the first time ``predicate`` holds (a transient failure)."""
    fired = []

    def when(args, n):
        if not fired and predicate(args, n):
            fired.append(True)
            return True
        return False

    return when


OBJECT_STORE_STEPS = [
    # (method, which calls fail (a fresh fault per test), step named in the error)
    ("copy", lambda: lambda args, n: ".shardflow-trash-" in str(args[1]) and n >= 2, "back up"),
    (
        "copy",
        lambda: lambda args, n: ".shardflow-staging-" in str(args[0]) and n >= 4,
        "copy the new files",
    ),
    ("rm", lambda: once(lambda args, n: isinstance(args[0], list)), "delete the files it replaces"),
]


@pytest.mark.parametrize("method, when, step", OBJECT_STORE_STEPS, ids=["backup", "copy", "delete"])
@pytest.mark.parametrize("where", ["s3", "gcs"])
def test_object_store_overwrite_rolls_back_every_step(
    request, monkeypatch, where, method, when, step
):
    bucket = request.getfixturevalue(f"{where}_bucket")
    options = request.getfixturevalue(f"{where}_options")
    from storage_fixtures import Store

    store = Store(where, f"{bucket}/data", options)
    _write(store, frame(40), "error", blocks=3)
    before = snapshot(store)
    assert "_SUCCESS" in before and len(before) == 4  # three files and _SUCCESS
    calls = fail_on_call(monkeypatch, store.fs, method, when())
    with pytest.raises(WriteCommitError, match=step) as info:
        _write(store, frame(25, start=100), "overwrite", blocks=2)
    assert calls, "the fault was never reached"
    assert "restored to its previous content" in str(info.value)
    monkeypatch.undo()
    assert snapshot(store) == before


@pytest.mark.parametrize("where", ["s3", "gcs"])
def test_object_store_append_rolls_back_a_failed_copy(request, monkeypatch, where):
    bucket = request.getfixturevalue(f"{where}_bucket")
    from storage_fixtures import Store

    store = Store(where, f"{bucket}/data", request.getfixturevalue(f"{where}_options"))
    _write(store, frame(20), "error", blocks=2)
    before = snapshot(store)
    fail_on_call(monkeypatch, store.fs, "copy", lambda args, n: n == 2)
    with pytest.raises(WriteCommitError, match="copy the new files"):
        _write(store, frame(30, start=100), "append", blocks=3)
    monkeypatch.undo()
    assert snapshot(store) == before


def test_local_overwrite_rolls_back_and_names_the_step(local_store, monkeypatch):
    import fsspec.implementations.local as local

    _write(local_store, frame(40), "error")
    before = snapshot(local_store)
    fail_on_call(
        monkeypatch,
        local.LocalFileSystem,
        "mv",
        lambda args, n: ".shardflow-staging-" in str(args[0]) and n >= 5,
    )
    with pytest.raises(WriteCommitError, match="move the new files into place"):
        _write(local_store, frame(25, start=100), "overwrite")
    monkeypatch.undo()
    assert snapshot(local_store) == before


def test_failed_write_to_a_new_nested_folder_leaves_no_folders(tmp_path):
    target = tmp_path / "a" / "b" / "c"

    def boom(batch):
        if batch["id"][0] >= 10:
            raise RuntimeError("injected failure")
        return batch

    with pytest.raises(RuntimeError, match="injected failure"):
        sf.from_pandas(frame(30), override_num_blocks=3).map_batches(boom).write_parquet(
            str(target)
        )
    assert not (tmp_path / "a").exists()


def test_no_task_writes_after_a_failed_write(tmp_path):
    target = tmp_path / "out"

    def slow_or_failing(batch):
        if batch["id"][0] == 0:
            raise RuntimeError("injected failure")
        time.sleep(2)  # these tasks are still running when the write fails
        return batch

    start = time.monotonic()
    with pytest.raises(RuntimeError, match="injected failure"):
        sf.from_pandas(frame(40), override_num_blocks=4).map_batches(slow_or_failing).write_parquet(
            str(target)
        )
    time.sleep(max(0.0, 3 - (time.monotonic() - start)))  # longer than any task would run
    assert not target.exists() or not os.listdir(target)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_two_appends_to_one_folder_at_once_both_land(request, where):
    """Each commit has its own marker: two writes appending to one folder at the same time
    both commit, and neither finishes or removes the other's commit."""
    import threading

    store = request.getfixturevalue(f"{where}_store")
    _write(store, frame(10), "error", blocks=1)
    errors = []

    def append(start):
        try:
            _write(store, frame(50, start=start), "append", blocks=5)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(start,)) for start in (1000, 2000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=100)
    assert not errors
    got = sorted(sf.read_parquet(store.path("out"), **store.options()).to_pandas()["id"].tolist())
    assert got == sorted(list(range(10)) + list(range(1000, 1050)) + list(range(2000, 2050)))
    assert not [p for p in store.listing("out") if "shardflow" in p]
