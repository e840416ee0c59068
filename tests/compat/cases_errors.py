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


def _ray_names_of_task_errors(m):
    """The exception classes Ray users catch around a failing task, from ``m``'s modules."""
    exceptions = submodule(m, "exceptions")
    if m.__name__ == "ray.data":
        import ray.exceptions

        return ray.exceptions.RayTaskError, exceptions.UserCodeException
    return exceptions.RayTaskError, exceptions.UserCodeException


@case(
    "exceptions.UserCodeException",
    "exceptions.RayTaskError",
    "exceptions.RayDataUserCodeException",
    note="a UDF error caught as RayTaskError (ray.exceptions) and UserCodeException",
)
def task_errors_under_rays_names(m, tmp):
    """except RayTaskError and except UserCodeException catch a failing map"""
    task_error, user_code = _ray_names_of_task_errors(m)
    try:
        m.range(2).map(_fail).take_all()
        out = ["no error"]
    except Exception as exc:
        out = [isinstance(exc, task_error), isinstance(exc, user_code)]
    out.append(issubclass(submodule(m, "exceptions").RayDataUserCodeException, Exception))
    out.append(issubclass(submodule(m, "exceptions").SystemException, Exception))
    return out


# Calls that raise a ValueError, and the words of Ray Data's message that users match with
# ``pytest.raises(ValueError, match=...)``.
VALUE_ERROR_WORDINGS = [
    (lambda ds: ds.map_batches(lambda b: b, batch_format="xx").take_all(), "isn't allowed"),
    (lambda ds: ds.map_batches(lambda b: b, batch_size=0), "Batch size can't be negative or 0"),
    (
        lambda ds: ds.map_batches(lambda b: b, fn_constructor_args=(1,)),
        "can only be specified if providing a callable class",
    ),
    (lambda ds: ds.split(0), "The number of splits 0 is not positive"),
    (lambda ds: ds.split_at_indices([3, 1]), "indices must be sorted"),
    (lambda ds: ds.split_proportionately([0.5, 0.6]), "proportions must sum to less than 1"),
    (lambda ds: ds.train_test_split(test_size=1.5), "must be bigger than 0 and smaller than 1"),
    (lambda ds: ds.random_sample(1.5), "Fraction must be between 0 and 1"),
    (lambda ds: ds.zip(ds.limit(3)).take_all(), "Cannot zip datasets of different number of rows"),
    (
        lambda ds: ds.rename_columns(["a", "b"]),
        r"rename_columns requires 'names': \['a', 'b'\] length match",
    ),
    (lambda ds: ds.sort("nope").take_all(), "You specified the column 'nope', but there's no"),
    (lambda ds: ds.groupby("nope").count().take_all(), "but there's no such column"),
]


@case(
    "Dataset.map_batches",
    "Dataset.split",
    "Dataset.split_at_indices",
    "Dataset.split_proportionately",
    "Dataset.train_test_split",
    "Dataset.random_sample",
    "Dataset.zip",
    "Dataset.rename_columns",
    "Dataset.sort",
    "Dataset.groupby",
    note="ValueErrors carry Ray Data's words (what pytest.raises(match=...) looks for)",
)
def value_error_wordings(m, tmp):
    """each call raises a ValueError whose message Ray Data's words match"""
    import re

    ds = m.range(4, override_num_blocks=1)
    out = []
    for call, words in VALUE_ERROR_WORDINGS:
        try:
            call(ds)
            out.append("no error")
        except ValueError as exc:
            out.append(bool(re.search(words, str(exc))))
    return out


@case("Dataset.zip", note="zip of datasets with the same column names renames Ray Data's way")
def zip_renames_clashing_columns(m, tmp):
    """x, y twice: x_1, y_1; three datasets: _1 and _2 suffixes; the schema's names"""
    a = m.from_items([{"x": 1, "y": 2}], override_num_blocks=1)
    b = m.from_items([{"x": 3, "y": 4}], override_num_blocks=1)
    return [a.zip(b).take_all(), a.zip(b, b).take_all(), a.zip(b).schema().names]
