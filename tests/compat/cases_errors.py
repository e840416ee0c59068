"""Differential cases: errors from user code, wrong UDF outputs, and custom datasources
(``read_datasource`` arguments, ReadTasks yielding pandas DataFrames)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from harness import Raised, case, exception_kind, raised_at_run, submodule


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


class BadRecord(Exception):
    """A user's own exception type (module level, so workers can unpickle it)."""


def _fail(row):
    raise BadRecord(f"bad record {row['id']}")


@case("exceptions.UserCodeException", note="an exception in a UDF is a UserCodeException")
def user_code_exceptions(m, tmp):
    """errors raised by map, map_batches, filter and flat_map functions"""
    exceptions = submodule(m, "exceptions")
    ds = m.range(3)
    calls = [
        lambda: ds.map(_fail).take_all(),
        lambda: ds.map_batches(lambda b: 1 / 0).take_all(),
        lambda: ds.filter(_fail).take_all(),
        lambda: ds.flat_map(_fail).take_all(),
    ]
    out = [raised_at_run(m, call) for call in calls]
    try:
        ds.map(_fail).take_all()
    except exceptions.UserCodeException as exc:
        out.append("bad record" in str(exc))
    return out


@case(
    "Dataset.map",
    "Dataset.map_batches",
    "Dataset.flat_map",
    "Dataset.filter",
    note="a UDF returning the wrong type raises ValueError (TypeError for flat_map's non-list)",
)
def wrong_udf_outputs(m, tmp):
    """map and map_batches returning non-dicts, flat_map returning non-lists; filter truthiness"""
    ds = m.range(2)
    return [
        _raises(lambda: ds.map(lambda r: 5).take_all()),
        _raises(lambda: ds.map(lambda r: [1]).take_all()),
        _raises(lambda: ds.map_batches(lambda b: 5).take_all()),
        _raises(lambda: ds.map_batches(lambda b: [1, 2]).take_all()),
        _raises(lambda: ds.map_batches(lambda b: None).take_all()),
        _raises(lambda: ds.flat_map(lambda r: 5).take_all()),
        _raises(lambda: ds.flat_map(lambda r: r).take_all()),
        ds.filter(lambda r: 1).count(),
        ds.filter(lambda r: "x").count(),
        ds.filter(lambda r: None).count(),
    ]


def _block_metadata(m, rows):
    if m.__name__ == "ray.data":
        from ray.data.block import BlockMetadata
    else:
        from shardflow import BlockMetadata
    return BlockMetadata(num_rows=rows, size_bytes=None, exec_stats=None, input_files=None)


@case("read_datasource", "Datasource", note="read_datasource hands its arguments to create_reader")
def read_datasource_arguments(m, tmp):
    """**read_args reach a datasource's create_reader (or prepare_read), as in Ray Data"""
    meta = _block_metadata(m, 2)

    class Reader:
        def __init__(self, value):
            self.value = value

        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, **kwargs):
            value = self.value
            return [m.ReadTask(lambda: [pa.table({"v": [value, value]})], meta)]

    class WithReader(m.Datasource):
        def create_reader(self, value=0, **read_args):
            return Reader(value)

    class Legacy(m.Datasource):
        def prepare_read(self, parallelism, scale=1):
            return [m.ReadTask(lambda: [pa.table({"v": [scale * i for i in range(2)]})], meta)]

    return [
        m.read_datasource(WithReader(), value=7).take_all(),
        m.read_datasource(WithReader()).take_all(),
        sorted(r["v"] for r in m.read_datasource(Legacy(), scale=10).take_all()),
    ]


@case("ReadTask", "read_datasource", note="ReadTasks may yield pandas DataFrames")
def read_tasks_yield_pandas(m, tmp):
    """pandas blocks from a ReadTask: rows, schema, batches"""
    meta = _block_metadata(m, 2)

    class Frames(m.Datasource):
        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            frame = pd.DataFrame({"a": [1, 2], "f": [0.5, None], "s": ["x", "y"]})
            return [m.ReadTask(lambda: [frame], meta)]

    ds = m.read_datasource(Frames())
    return [
        ds.take_all(),
        ds.count(),
        ds.columns(),
        ds.take_batch(batch_format="numpy")["a"],
        ds.map_batches(lambda df: df.assign(g=df["a"] * 2), batch_format="pandas").take_all(),
    ]


@case("Dataset.map_batches", "Dataset.map", note="concurrency below 1 is a ValueError at the call")
def concurrency_below_one(m, tmp):
    """concurrency=0 and -1 for a function and for a callable class"""

    class Identity:
        def __call__(self, batch):
            return batch

    ds = m.range(4)
    return [
        _raises(lambda: ds.map_batches(lambda b: b, concurrency=0).take_all()),
        _raises(lambda: ds.map_batches(Identity, concurrency=0).take_all()),
        _raises(lambda: ds.map(lambda r: r, concurrency=-1).take_all()),
    ]
