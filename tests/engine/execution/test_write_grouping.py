"""Datasink.min_rows_per_write groups blocks; supports_distributed_writes=False runs on the driver."""

from __future__ import annotations

import os

import shardflow as sf
from shardflow.sdk import Datasink


class RecordingSink(Datasink):
    def __init__(self, min_rows=None, distributed=True):
        self._min_rows = min_rows
        self._distributed = distributed
        self.returns = None

    @property
    def min_rows_per_write(self):
        return self._min_rows

    @property
    def supports_distributed_writes(self):
        return self._distributed

    def write(self, blocks, ctx):
        rows = [v for b in blocks for v in b.column("id").to_pylist()]
        return os.getpid(), rows

    def on_write_complete(self, write_result):
        self.returns = write_result.write_returns


def test_min_rows_per_write_groups_blocks(backend):
    sink = RecordingSink(min_rows=250)
    sf.range(1000, override_num_blocks=10).write_datasink(sink)
    sizes = [len(rows) for _, rows in sink.returns]
    assert all(size >= 250 for size in sizes[:-1])
    assert sum(sizes) == 1000
    assert sorted(v for _, rows in sink.returns for v in rows) == list(range(1000))
    assert len(sizes) < 10


def test_non_distributed_sink_writes_in_driver_process(backend):
    sink = RecordingSink(distributed=False)
    sf.range(100, override_num_blocks=4).map_batches(lambda b: b).write_datasink(sink)
    assert {pid for pid, _ in sink.returns} == {os.getpid()}
    assert sorted(v for _, rows in sink.returns for v in rows) == list(range(100))
