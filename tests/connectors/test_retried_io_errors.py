"""DataContext.retried_io_errors (Ray Data's setting): reads and writes retry errors whose
message holds one of its fragments, besides the transient errors recognised anyway; other
errors fail at once. Faults are injected into a real local filesystem (fsspec's)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from fsspec.implementations.local import LocalFileSystem

import shardflow as sf


class _FailingOpens(LocalFileSystem):
    """The first ``failures`` opens (for reading or for writing) of data files raise
    OSError(message). The hidden bookkeeping files of a write's staging folder (its owner
    marker) open normally: these tests are about the data files."""

    cachable = False

    def __init__(self, failures: int, message: str):
        super().__init__()
        self.failures, self.message, self.raised = failures, message, 0

    def _open(self, path, mode="rb", block_size=None, **kwargs):
        if self.raised < self.failures and not os.path.basename(path).startswith("."):
            self.raised += 1
            raise OSError(f"{self.message} ({path})")
        return super()._open(path, mode, block_size=block_size, **kwargs)


def _csv(tmp_path):
    pacsv.write_csv(pa.table({"id": [1, 2, 3]}), tmp_path / "a.csv")
    return str(tmp_path / "a.csv")


def test_ray_s_default_fragments_are_retried(tmp_path, fast_retries):
    fs = _FailingOpens(2, "AWS Error SLOW_DOWN during GetObject operation")
    assert sf.read_csv(_csv(tmp_path), filesystem=fs).sum("id") == 6
    assert fs.raised == 2


def test_a_fragment_added_by_the_user_makes_an_error_retried(tmp_path, fast_retries):
    path = _csv(tmp_path)
    fs = _FailingOpens(1, "storage says: quota hiccup")
    with pytest.raises(Exception, match="quota hiccup"):
        sf.read_csv(path, filesystem=fs).take_all()
    assert fs.raised == 1  # not retried: not a transient error

    fast_retries.retried_io_errors = [*fast_retries.retried_io_errors, "quota hiccup"]
    fs = _FailingOpens(2, "storage says: quota hiccup")
    assert sf.read_csv(path, filesystem=fs).sum("id") == 6
    assert fs.raised == 2


def test_writes_retry_the_same_errors(tmp_path, fast_retries):
    fast_retries.retried_io_errors = ["quota hiccup"]
    fs = _FailingOpens(2, "storage says: quota hiccup")
    sf.range(5).write_csv(str(tmp_path / "out"), filesystem=fs)
    assert fs.raised == 2
    assert sorted(r["id"] for r in sf.read_csv(str(tmp_path / "out")).take_all()) == list(range(5))

    fast_retries.retried_io_errors = []
    fs = _FailingOpens(1, "storage says: quota hiccup")
    with pytest.raises(Exception, match="quota hiccup"):
        sf.range(5).write_csv(str(tmp_path / "out2"), filesystem=fs)
    assert not (tmp_path / "out2").exists() or not list((tmp_path / "out2").iterdir())
