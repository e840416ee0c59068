"""Differential cases: what a user sees without running anything (the schema of a file
read from its metadata), and the exception types of errors at the edges (built-in operators
given a wrong column, UDFs returning the wrong shapes)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from harness import Raised, case, exception_kind, raised_at_run


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _schema(schema):
    return None if schema is None else [(n, str(t)) for n, t in zip(schema.names, schema.types)]


@case("read_parquet", "Dataset.schema", note="a Parquet read's schema comes from its footer")
def parquet_schema_without_execution(m, tmp):
    """schema(fetch_if_missing=False) of read_parquet: the first file's footer, with hive
    partition columns and the path column; columns= projects it"""
    folder = tmp / "table" / "part=a"
    folder.mkdir(parents=True)
    table = pa.table(
        {"i": pa.array([1, 2], pa.int32()), "s": ["x", "y"], "f": pa.array([0.5, 1.5])}
    )
    pq.write_table(table, folder / "f.parquet")
    root = tmp / "table"
    return [
        _schema(m.read_parquet(root).schema(fetch_if_missing=False)),
        _schema(m.read_parquet(root, columns=["s", "i"]).schema(fetch_if_missing=False)),
        _schema(m.read_parquet(folder / "f.parquet").schema(fetch_if_missing=False)),
    ]


@case("Dataset.select_columns", "Dataset.map_batches")
def wrong_columns_and_ragged_outputs(m, tmp):
    """a missing column in select_columns after a UDF is a UserCodeException; a UDF
    returning columns of different lengths raises ValueError"""
    ds = m.range(4, override_num_blocks=1)
    return [
        raised_at_run(m, lambda: ds.map_batches(lambda b: b).select_columns(["nope"]).take_all()),
        _raises(lambda: ds.map_batches(lambda b: {"a": [1, 2, 3], "b": [1]}).take_all()),
        _raises(lambda: ds.map_batches(lambda b: {"a": b["id"], "b": b["id"][:1]}).take_all()),
    ]


@case(
    "DataContext.log_internal_stack_trace",
    "ExecutionOptions.verbose_progress",
    "DataContext.enable_operator_progress_bars",
    note="debugging and progress settings are real settings, with Ray Data's names",
)
def debugging_and_progress_settings(m, tmp):
    """log_internal_stack_trace (and its older name), verbose_progress and
    enable_operator_progress_bars take and keep their values"""
    import warnings

    context = m.DataContext.get_current()
    saved = (context.log_internal_stack_trace, context.enable_operator_progress_bars)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Ray Data deprecates the older name
            context.log_internal_stack_trace = True
            first = context.log_internal_stack_trace
            context.log_internal_stack_trace_to_stdout = False
            second = context.log_internal_stack_trace
        context.enable_operator_progress_bars = False
        bars = context.enable_operator_progress_bars
    finally:
        context.log_internal_stack_trace, context.enable_operator_progress_bars = saved
    options = m.ExecutionOptions(verbose_progress=False)
    return [first, second, bars, options.verbose_progress, m.ExecutionOptions().verbose_progress]
