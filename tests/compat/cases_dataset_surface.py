"""Differential cases: Dataset.mix, Dataset.summary, the ObjectRef conversions, and the
methods that describe a dataset (copy, context, get_dataset_id).

Mix is deterministic in both (the next block always comes from the input furthest behind
its share of the rows, waiting for it when it has none ready), so rows compare exactly when
the inputs have the same blocks: the cases build them with ``from_items`` and
``override_num_blocks``, whose blocks both cut alike.
"""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import Raised, case, exception_kind, submodule


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return [Raised(exception_kind(exc)), str(exc)]
    return "no error"


def _items(start, count):
    return [{"x": start + i} for i in range(count)]


def _xs(ds):
    return [r["x"] for r in ds.take_all()]


@case("Dataset.mix", "MixStoppingCondition", note="weighted interleaving of whole blocks")
def mix_weights_and_stopping(m, tmp):
    """equal and unequal weights, three inputs, blocks of different sizes, both stopping
    conditions; the enum's members"""
    a = m.from_items(_items(0, 6), override_num_blocks=6)
    b = m.from_items(_items(100, 4), override_num_blocks=2)
    c = m.from_items(_items(200, 3), override_num_blocks=3)
    shortest = m.MixStoppingCondition.STOP_ON_SHORTEST
    return [
        _xs(a.mix(b)),
        _xs(a.mix(b, weights=[3, 1])),
        _xs(a.mix(b, c, weights=[0.5, 0.3, 0.2])),
        _xs(a.mix(b, stopping_condition=shortest)),
        _xs(a.mix(b, c, weights=[1, 2, 1], stopping_condition=shortest)),
        _xs(a.mix()),
        [(s.name, s.value) for s in m.MixStoppingCondition],
    ]


@case("Dataset.mix", note="mix's argument errors")
def mix_errors(m, tmp):
    """a weight per dataset, and positive weights"""
    a = m.from_items(_items(0, 2))
    b = m.from_items(_items(10, 2))
    return [
        _raises(lambda: a.mix(b, weights=[1.0, 2.0, 3.0])),
        _raises(lambda: a.mix(b, weights=[1, 0])),
        _raises(lambda: a.mix(b, weights=[1, -2])),
    ]


def _summary_items():
    day = datetime.datetime(2024, 1, 1)
    return [
        {
            "age": [25, 30, 0, 41][i],
            "salary": [50000.0, 60000.0, None, 0.0][i],
            "name": ["Alice", None, "Bob", "Alice"][i],
            "flag": [True, False, None, True][i],
            "when": None if i == 2 else day + datetime.timedelta(days=i),
            "blob": [b"a", b"b", b"a", None][i],
        }
        for i in range(4)
    ]


def _rounded(frame):
    """Floats to 9 decimals: std adds up blocks in another order in each (last-digit
    differences)."""
    return frame.round(9)


@case("Dataset.summary", "DatasetSummary", note="statistics chosen by type, in two tables")
def summary_of_every_kind_of_column(m, tmp):
    """numeric, boolean, string, binary and temporal columns: to_pandas, get_column_stats,
    the two typed tables, the schema and the columns summarized"""
    ds = m.from_items(_summary_items(), override_num_blocks=2)
    summary = ds.summary()
    return [
        _rounded(summary.to_pandas()),
        _rounded(summary.get_column_stats("age")),
        summary.get_column_stats("when"),
        summary.get_column_stats("name"),
        summary._stats_matching_column_dtype,
        summary._stats_mismatching_column_dtype,
        summary.dataset_schema,
        sorted(summary.columns),
        type(summary).__name__,
    ]


@case("Dataset.summary", note="summary's columns, overrides and errors")
def summary_columns_and_overrides(m, tmp):
    """columns= picks columns; override_dtype_agg_mapping replaces a type's statistics (by
    DataType, or the "temporal" category); unknown columns and get_column_stats of a column
    not summarized raise ValueError"""
    ds = m.from_items(_summary_items())
    aggregate = submodule(m, "aggregate")
    DataType = submodule(m, "datatype").DataType
    mapping = {DataType.int64(): lambda c: [aggregate.Count(on=c), aggregate.Sum(on=c)]}
    temporal = {"temporal": lambda c: [aggregate.Max(on=c)]}
    picked = ds.summary(columns=["age", "salary"])
    return [
        _rounded(picked.to_pandas()),
        ds.summary(columns=["age"], override_dtype_agg_mapping=mapping).to_pandas(),
        ds.summary(columns=["when"], override_dtype_agg_mapping=temporal).to_pandas(),
        _raises(lambda: ds.summary(columns=["nope"])),
        _raises(lambda: picked.get_column_stats("name")),
    ]


@case("Dataset.summary", note="summary of floats with NaN and of a column of nulls")
def summary_nan_and_nulls(m, tmp):
    """NaN counts as missing; a column of nulls gets its count only; the repr"""
    ds = m.from_arrow(
        pa.table(
            {
                "f": pa.array([1.5, float("nan"), None, 0.0], pa.float32()),
                "n": pa.nulls(4),
                "u": pa.array([1, 2, 3, 4], pa.uint8()),
            }
        )
    )
    summary = ds.summary()
    return [_rounded(summary.to_pandas()), repr(summary)]


def _get(value):
    import ray

    return ray.get(value) if isinstance(value, ray.ObjectRef) else value


@case(
    "Dataset.to_pandas_refs",
    "Dataset.to_numpy_refs",
    note="one DataFrame or NumPy batch per block (ObjectRefs on Ray, the objects locally)",
)
def to_pandas_and_numpy_refs(m, tmp):
    """per block: DataFrames with their dtypes, dicts of ndarrays, one column's ndarray"""
    ds = m.from_items(
        [{"a": i, "b": f"s{i}", "c": [i, i]} for i in range(6)], override_num_blocks=3
    )
    return [
        [_get(r) for r in ds.to_pandas_refs()],
        [_get(r) for r in ds.to_numpy_refs()],
        [_get(r) for r in ds.to_numpy_refs(column="a")],
    ]


@case(
    "from_arrow_refs",
    "from_pandas_refs",
    "from_numpy_refs",
    note="datasets from ObjectRefs of tables, DataFrames and ndarrays",
)
def from_object_refs(m, tmp):
    """one ObjectRef or a list; rows, schema and block count; a list holding something
    else than ObjectRefs raises ValueError"""
    import ray

    tables = [ray.put(pa.table({"x": [1, 2]})), ray.put(pa.table({"x": [3]}))]
    frames = [ray.put(pd.DataFrame({"a": [1.5, 2.5], "s": ["u", "v"]}))]
    arrays = [ray.put(np.arange(3)), ray.put(np.ones((2, 2), dtype=np.float32))]
    from_arrow = m.from_arrow_refs(tables)
    from_pandas = m.from_pandas_refs(frames[0])
    return [
        from_arrow.take_all(),
        from_arrow.num_blocks(),
        from_pandas.to_pandas(),
        m.from_numpy_refs(arrays[:1]).take_all(),
        [r["data"].tolist() for r in m.from_numpy_refs(arrays[1]).take_all()],
        _raises(lambda: m.from_pandas_refs([1, 2]))[0],
    ]


@case(
    "Dataset.copy",
    "Dataset.context",
    "Dataset.get_dataset_id",
    "NodeIdStr",
    note="a dataset's id, copies and context",
)
def copy_context_and_id(m, tmp):
    """get_dataset_id: name, unique id and the count of executions; Dataset.copy keeps the
    rows, name and context (a deep copy copies the context) and takes an id of its own;
    derived datasets share their parent's context"""
    ds = m.from_items(_items(0, 3))
    first = ds.get_dataset_id()
    ds.take_all()
    second = ds.get_dataset_id()
    ds.set_name("numbers")
    named = ds.get_dataset_id()
    copied = m.Dataset.copy(ds)
    deep = m.Dataset.copy(ds, _deep_copy=True)
    derived = ds.map(lambda r: r)
    return [
        first.startswith("dataset_"),
        first.rsplit("_", 1)[1],
        second.rsplit("_", 1)[1],
        second.split("_")[1] == first.split("_")[1],
        named.startswith("numbers_"),
        copied.take_all(),
        copied.name,
        copied.get_dataset_id().split("_")[1] != named.split("_")[1],
        copied.context is ds.context,
        deep.context is ds.context,
        type(deep.context).__name__,
        derived.context is ds.context,
        type(ds.context).__name__,
        m.NodeIdStr is str,
    ]


@case(
    "Dataset.get_stats_summary",
    "list_stats_summaries",
    note="execution statistics as data; summaries kept when collection is on",
    slow=True,
)
def stats_summaries(m, tmp):
    """before and after an execution; the rows out of the last operator; a summary is
    listed per finished execution once enable_stats_summary_collection is set"""
    context = m.DataContext.get_current()
    saved = context.enable_stats_summary_collection
    context.enable_stats_summary_collection = True  # before the dataset: Ray Data copies it
    try:
        ds = m.from_items(_items(0, 6), override_num_blocks=2).map_batches(lambda b: b)
        before_run = ds.get_stats_summary()
        listed = len(m.list_stats_summaries())
        ds.take_all()
        new = m.list_stats_summaries()[listed:]
    finally:
        context.enable_stats_summary_collection = saved
    summary = ds.get_stats_summary()
    last = summary.operators_stats[-1]
    return [
        type(before_run).__name__,
        before_run.operators_stats,
        type(summary).__name__,
        last.output_num_rows.sum,
        type(last.output_num_rows.to_dict()).__name__,
        isinstance(summary.to_string(), str),
        summary.time_total_s >= 0,
        [type(s).__name__ for s in new],
    ]


@case("Dataset.summary", note="summary of list and struct columns")
def summary_of_lists_and_structs(m, tmp):
    """lists and structs get count, missing% and their most frequent values (a column of
    Python objects in the table of statistics)"""
    ds = m.from_arrow(
        pa.table(
            {
                "l": pa.array([[1, 2], [1, 2], None, [3]]),
                "s": pa.array([{"a": 1}, {"a": 1}, {"a": 2}, None]),
            }
        )
    )
    summary = ds.summary()
    return [summary.to_pandas(), summary.get_column_stats("s")]
