"""Differential cases: the Dataset's own surface (repr, schema, columns, len, names) and the
column methods' validation."""

from __future__ import annotations

import pyarrow as pa
from harness import Raised, case, exception_kind, submodule


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


@case(
    "Dataset.__repr__",
    "Dataset.__str__",
    note="tabular repr of a lazy dataset whose schema is known",
)
def repr_of_lazy_datasets(m, tmp):
    """the table of columns and types, the shape, '(Dataset isn't materialized)'"""
    ds = m.range(5)
    return [
        repr(ds),
        str(ds),
        repr(ds.select_columns(["id"])),
        repr(ds.limit(2)),
        repr(ds.rename_columns({"id": "x"})),
        repr(ds.filter(expr="id > 2")),
    ]


@case("Dataset.__repr__", note="materialized datasets show their first and last rows")
def repr_of_materialized_datasets(m, tmp):
    """rows of in-memory and materialized data, head and tail of 12 rows, long cells cut"""
    twelve = m.from_items([{"a": i, "s": "x" * i} for i in range(12)], override_num_blocks=1)
    return [
        repr(m.from_items([{"a": 1, "b": "x"}])),
        repr(twelve),
        repr(m.from_items([{"a": "y" * 50}])),
        repr(m.range(3, override_num_blocks=1).map(lambda r: r).materialize()),
        repr(m.from_items([])),
    ]


@case("Dataset.__repr__", note="a plan whose schema is unknown: operations over the source")
def repr_of_plans(m, tmp):
    """operation names over Dataset(num_rows=..., schema=...), long schemas wrapped"""
    wide = m.from_items([{f"column_number_{i}": i for i in range(8)}])
    return [
        repr(m.range(3).map(lambda r: r).map_batches(lambda b: b)),
        repr(wide.map(lambda r: r)),
        repr(m.range(3).map(lambda r: r).materialize().map(lambda r: r)),
    ]


@case("Dataset.set_name", "Dataset.name")
def dataset_names(m, tmp):
    """a name shows in the repr and carries over to derived datasets"""
    ds = m.from_items([{"a": 1}])
    unnamed = ds.name
    ds.set_name("features")
    return [unnamed, ds.name, ds.map(lambda r: r).name, repr(ds)]


@case("Dataset.schema", "Schema", note="Schema's names, types, equality and repr")
def schema_object(m, tmp):
    """schema() is a Schema: names, types, base_schema, ==, Column/Type repr; fetch_if_missing"""
    ds = m.from_items([{"a": 1, "name": "x", "f": 0.5}])
    schema = ds.schema()
    mapped = m.range(3).map(lambda r: {"v": float(r["id"])})
    return [
        type(schema).__name__,
        schema.names,
        [str(t) for t in schema.types],
        isinstance(schema.base_schema, pa.Schema),
        repr(schema),
        schema == m.from_items([{"a": 2, "name": "y", "f": 1.5}]).schema(),
        schema == m.range(1).schema(),
        mapped.schema(fetch_if_missing=False),
        mapped.schema(),
        m.range(3).schema(fetch_if_missing=False),
        m.from_items([]).schema(),
    ]


@case("Dataset.columns", note="columns() and columns(fetch_if_missing=False)")
def columns_fetch_if_missing(m, tmp):
    """column names, None when unknown without running and fetch_if_missing=False"""
    mapped = m.range(2).map(lambda r: {"v": r["id"]})
    return [
        m.range(2).columns(),
        mapped.columns(fetch_if_missing=False),
        mapped.columns(),
        m.range(2).columns(fetch_if_missing=False),
    ]


@case(
    "Dataset.__len__", "Dataset.__bool__", note="len() raises AttributeError; a dataset is truthy"
)
def len_and_truth(m, tmp):
    """len(ds) raises AttributeError (use count()); bool(ds) is True even when empty"""
    ds = m.range(3)
    return [_raises(lambda: len(ds)), bool(ds), bool(m.from_items([]))]


@case("Dataset.drop_columns", note="dropping columns, every column, and the errors")
def drop_columns(m, tmp):
    """drop some, none, every column (no rows remain); missing and duplicate names"""
    ds = m.from_items([{"a": 1, "b": 2}, {"a": 3, "b": 4}], override_num_blocks=1)
    everything = ds.drop_columns(["a", "b"])
    return [
        ds.drop_columns(["b"]).take_all(),
        ds.drop_columns("a").take_all(),
        ds.drop_columns([]).take_all(),
        everything.take_all(),
        everything.count(),
        everything.schema(),
        ds.drop_columns(["a"]).count(),
        _raises(lambda: ds.drop_columns(["zz"])),
        _raises(lambda: ds.drop_columns(["a", "a"])),
    ]


@case("Dataset.select_columns", note="selection and its argument errors")
def select_columns(m, tmp):
    """a name, a list, and Ray Data's exception types for bad arguments"""
    ds = m.from_items([{"a": 1, "b": 2}])
    return [
        ds.select_columns("a").take_all(),
        ds.select_columns(["b", "a"]).take_all(),
        ds.select_columns(["b"]).schema(fetch_if_missing=False),
        _raises(lambda: ds.select_columns(["a", "a"])),
        _raises(lambda: ds.select_columns([1])),
        _raises(lambda: ds.select_columns(("a",))),
    ]


@case("Dataset.rename_columns", note="renames by mapping and list, and their argument errors")
def rename_columns(m, tmp):
    """renames, a swap, a list of new names; Ray Data's exception types for bad arguments"""
    ds = m.from_items([{"a": 1, "b": 2}])
    return [
        ds.rename_columns({"a": "x"}).take_all(),
        ds.rename_columns({"a": "b", "b": "a"}).take_all(),
        ds.rename_columns(["x", "y"]).take_all(),
        ds.rename_columns({"a": "x"}).schema(fetch_if_missing=False),
        _raises(lambda: ds.rename_columns({})),
        _raises(lambda: ds.rename_columns({"a": "q", "b": "q"})),
        _raises(lambda: ds.rename_columns({"a": 1})),
        _raises(lambda: ds.rename_columns(["x"])),
        _raises(lambda: ds.rename_columns(["x", "x"])),
        _raises(lambda: ds.rename_columns([])),
        _raises(lambda: ds.rename_columns("x")),
        _raises(lambda: ds.rename_columns(("x", "y"))),
    ]


@case("Dataset.add_column", note="add_column with pandas, pyarrow and numpy batches")
def add_column_formats(m, tmp):
    """a Series, a scalar, a replaced column, strings; pyarrow and numpy; bad arguments"""
    ds = m.from_items([{"a": 1, "b": 2}, {"a": 3, "b": 4}], override_num_blocks=1)
    return [
        ds.add_column("c", lambda df: df["a"] * 2).take_all(),
        ds.add_column("c", lambda df: 7).take_all(),
        ds.add_column("a", lambda df: df["b"]).take_all(),
        ds.add_column("c", lambda df: df["a"].astype(str)).take_all(),
        ds.add_column("c", lambda df: df["a"] * 1.5).schema(),
        ds.add_column("c", lambda b: b["a"] + 1, batch_format="numpy").take_all(),
        ds.add_column("a", lambda t: t["b"], batch_format="pyarrow").take_all(),
        _raises(lambda: ds.add_column("c", lambda b: 1, batch_format="xx")),
        _raises(lambda: ds.add_column("c", 5)),
    ]


@case("Dataset.filter", note="filter's argument rules")
def filter_arguments(m, tmp):
    """exactly one of fn and expr; a string given as fn is rejected; both take expressions"""
    ds = m.range(5)
    return [
        ds.filter(expr="id > 2").take_all(),
        ds.filter(expr=submodule(m, "expressions").col("id") >= 3).take_all(),
        _raises(lambda: ds.filter(fn="id > 2")),
        _raises(lambda: ds.filter()),
        _raises(lambda: ds.filter(lambda r: True, expr="id > 2")),
        ds.filter(lambda r: r["id"] % 2).take_all(),
        ds.filter(lambda r: None).take_all(),
    ]
