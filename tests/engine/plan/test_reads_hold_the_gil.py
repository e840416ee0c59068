"""Datasource.reads_hold_the_gil: reads decoded in Python run in the local backend's worker
processes (as Python row functions do), other reads in threads of the driver."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.engine.execution.backends.base import PROCESS, THREAD
from shardflow.engine.execution.runtime import current_backend
from shardflow.engine.plan.optimizer import optimize
from shardflow.engine.plan.planner import plan_physical
from shardflow.sdk import BlockMetadata, Datasource, ReadTask


def _read_pid():
    yield pa.table({"pid": [os.getpid()]})


class PidSource(Datasource):
    """Two tasks, each yielding the id of the process that ran it."""

    def __init__(self, python_heavy: bool):
        self.python_heavy = python_heavy

    def reads_hold_the_gil(self):
        return self.python_heavy

    def get_read_tasks(self, parallelism, **kwargs):
        return [ReadTask(_read_pid, BlockMetadata(1, 8)) for _ in range(2)]


def _kinds(ds, context):
    physical = plan_physical(optimize(ds._plan), current_backend(context), context)
    return [op.kind for op in physical.shown() if op.kind in (PROCESS, THREAD)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("python_heavy", [True, False])
def test_reads_that_hold_the_gil_run_in_worker_processes(fresh_context, python_heavy):
    sf.init(backend="local")
    fresh_context.num_cpus = 2
    ds = sf.read_datasource(PidSource(python_heavy))
    assert _kinds(ds, fresh_context) == [PROCESS if python_heavy else THREAD]
    pids = {row["pid"] for row in ds.take_all()}
    assert (os.getpid() not in pids) if python_heavy else (pids == {os.getpid()})
    # a cheap map after the read runs where the read runs
    mapped = ds.map_batches(lambda b: b)
    assert _kinds(mapped, fresh_context) == [PROCESS if python_heavy else THREAD]


def test_reads_stay_in_threads_when_processes_are_off_or_one_cpu(fresh_context):
    sf.init(backend="local")
    fresh_context.num_cpus = 2
    fresh_context.python_udfs_in_processes = False
    assert _kinds(sf.read_datasource(PidSource(True)), fresh_context) == [THREAD]
    fresh_context.python_udfs_in_processes = True
    fresh_context.num_cpus = 1
    assert _kinds(sf.read_datasource(PidSource(True)), fresh_context) == [THREAD]


def test_the_record_formats_declare_it(tmp_path):
    from shardflow.connectors.avro import AvroDatasource
    from shardflow.connectors.images import ImageDatasource
    from shardflow.connectors.parquet import ParquetDatasource
    from shardflow.connectors.tfrecords import TFRecordDatasource
    from shardflow.connectors.webdataset import WebDatasetDatasource

    sf.range(1).write_parquet(str(tmp_path))
    # Images too: Pillow holds the GIL for much of a decode (16 threads decoded a quarter of
    # what 16 processes did on a 16-core machine, and starved a GPU stage behind them).
    for cls in (AvroDatasource, TFRecordDatasource, WebDatasetDatasource, ImageDatasource):
        assert cls(str(tmp_path)).reads_hold_the_gil()
    assert not ParquetDatasource(str(tmp_path)).reads_hold_the_gil()
