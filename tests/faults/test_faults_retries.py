"""Retries and recovery: a worker killed mid-task is replaced and its task runs again, with
every row exactly once; user errors fail at once unless failed blocks may be skipped."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import shardflow as sf
from shardflow.engine.execution.errors import WorkerCrashedError

pytestmark = pytest.mark.timeout(180)


class KillOnce:
    """Kills its own worker process the first time it sees row ``at`` (a marker file
    remembers across processes)."""

    def __init__(self, marker: str, at: int):
        self.marker, self.at = marker, at

    def __call__(self, row):
        if row["id"] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return row


def test_a_killed_worker_is_replaced_and_every_row_arrives_once(backend, tmp_path):
    sf.DataContext.get_current().target_min_block_size = 1  # many small blocks per task
    ds = (
        sf.range(100, override_num_blocks=2)
        .map_batches(lambda b: b, batch_size=10)
        .map(KillOnce(str(tmp_path / "killed"), at=35))
    )
    ids = [r["id"] for r in ds.take_all()]
    assert ids == list(range(100))  # in order, no row lost, none twice
    assert os.path.exists(tmp_path / "killed")
    assert "tasks retried" in ds.stats()


def test_an_exchange_after_a_killed_worker_sees_every_row_once(backend, tmp_path):
    ds = sf.range(200, override_num_blocks=4).map(KillOnce(str(tmp_path / "killed"), at=120))
    ids = np.concatenate([b["id"] for b in ds.random_shuffle(seed=3).iter_batches(batch_size=None)])
    assert sorted(ids.tolist()) == list(range(200))


def test_user_errors_are_not_retried(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()

    def fail(batch):
        open(calls / str(len(os.listdir(calls))), "w").close()
        raise ValueError("bad data")

    with pytest.raises(ValueError, match="bad data"):
        sf.range(10, override_num_blocks=1).map_batches(fail).take_all()
    assert len(os.listdir(calls)) == 1


def test_failed_blocks_may_be_skipped_and_are_counted(backend):
    def fail_second(batch):
        if batch["id"][0] == 10:
            raise ValueError("corrupt block")
        return batch

    ds = sf.range(40, override_num_blocks=4).map_batches(fail_second)
    with pytest.raises(ValueError, match="corrupt block"):
        ds.take_all()
    sf.DataContext.get_current().max_errored_blocks = 1
    rows = [r["id"] for r in ds.take_all()]
    assert rows == [i for i in range(40) if not 10 <= i < 20]
    assert "1 failed blocks skipped" in ds.stats()


def test_retry_settings_are_validated():
    sf.DataContext.get_current().max_task_retries = -1
    with pytest.raises(ValueError, match="max_task_retries"):
        sf.range(3).take_all()


class FailOnce:
    """Raises ValueError the first time it sees a batch starting at row ``at`` (a marker file
    remembers across processes)."""

    def __init__(self, marker: str, at: int):
        self.marker, self.at = marker, at

    def __call__(self, batch):
        if batch["id"][0] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise ValueError("transient")
        return batch


def test_an_allowed_exception_reruns_its_task_and_every_row_arrives_once(backend, tmp_path):
    sf.DataContext.get_current().target_min_block_size = 1  # many small blocks per task
    ds = sf.range(100, override_num_blocks=2).map_batches(
        FailOnce(str(tmp_path / "failed"), at=70),
        batch_size=10,
        retry_exceptions=[ValueError],
        max_retries=1,
    )
    ids = [r["id"] for r in ds.take_all()]
    assert ids == list(range(100))  # the rerun's first blocks were delivered before: once
    assert os.path.exists(tmp_path / "failed")
    assert "1 tasks retried" in ds.stats()


def _record_and_fail(calls: str, how: str):
    def fn(row):
        open(os.path.join(calls, str(len(os.listdir(calls)))), "w").close()
        if how == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        raise ValueError("always")

    return fn


@pytest.mark.parametrize(
    "how, retry_exceptions, runs",
    [("crash", False, 3), ("raise", True, 3), ("raise", [KeyError], 1), ("raise", False, 1)],
)
def test_a_failing_task_runs_max_retries_more_times_and_no_more(
    backend, tmp_path, how, retry_exceptions, runs
):
    # Each failure is retried by Ray or by the pool, never by both: runs stay 1 + max_retries.
    calls = tmp_path / "calls"
    calls.mkdir()
    ds = sf.range(1, override_num_blocks=1).map(
        _record_and_fail(str(calls), how), max_retries=2, retry_exceptions=retry_exceptions
    )
    with pytest.raises(Exception) as info:
        ds.take_all()
    if how == "raise":
        assert isinstance(info.value, ValueError)
    else:
        assert isinstance(info.value, WorkerCrashedError)
    assert len(os.listdir(calls)) == runs
