"""groupby aggregations, Dataset.aggregate and the global sum/min/max/mean/std/unique,
against per-group computations in plain Python: nulls in keys and values, skewed keys, one
group, many groups, empty input, ignore_nulls both ways, on both backends.

shardflow gives groups sorted by key, nulls last (Ray Data's order is arbitrary), so the
expected rows are in key order too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
from a2a_support import (
    PROPERTY_SETTINGS,
    block_cuts,
    canonical,
    dataset_of,
    group_rows,
    oracle_sort,
    rows_close,
    values_close,
)
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf
from shardflow.aggregate import Count, Max, Mean, Min, Std, Sum

SCHEMA = pa.schema([("k", pa.int64()), ("g", pa.string()), ("v", pa.float64()), ("w", pa.int64())])

# Skewed keys: key 0 is far more frequent than the others.
skewed_ints = st.one_of(
    st.just(0), st.just(0), st.just(0), st.none(), st.integers(min_value=-2, max_value=40)
)
labels = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
float_values = st.one_of(st.none(), st.sampled_from([-2.5, 0.0, 1.0, 3.5, 1e6, 0.25]))
int_values = st.one_of(st.none(), st.integers(min_value=-1000, max_value=1000))
row = st.fixed_dictionaries({"k": skewed_ints, "g": labels, "v": float_values, "w": int_values})
rows_strategy = st.lists(row, max_size=60)
keys_strategy = st.sampled_from([["k"], ["g"], ["k", "g"], ["g", "k"]])


def oracle_value(kind: str, values: list[Any], ignore_nulls: bool, ddof: int = 1) -> Any:
    """One aggregation over one group's values, computed directly."""
    present = [v for v in values if v is not None]
    if kind == "count":
        return len(present) if ignore_nulls else len(values)
    if not ignore_nulls and len(present) < len(values):
        return None
    if not present:
        return None
    if kind == "sum":
        return sum(present)
    if kind == "min":
        return min(present)
    if kind == "max":
        return max(present)
    if kind == "mean":
        return sum(present) / len(present)
    if kind == "std":
        n = len(present)
        if n - ddof <= 0:
            return float("nan")
        mean = sum(present) / n
        return math.sqrt(sum((x - mean) ** 2 for x in present) / (n - ddof))
    raise AssertionError(kind)


def empty_value(kind: str, ignore_nulls: bool) -> Any:
    """An aggregation of no rows at all, as Ray Data gives it: null when nulls are ignored,
    else the aggregation's zero (so Count(col, ignore_nulls=True) of nothing is None)."""
    if ignore_nulls:
        return None
    return {
        "count": 0,
        "sum": 0,
        "min": float("inf"),
        "max": float("-inf"),
        "mean": float("nan"),
        "std": float("nan"),
    }[kind]


AGGS = {"count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean, "std": Std}


def oracle_groupby(
    rows: list[dict[str, Any]], keys: list[str], specs: list[tuple]
) -> list[dict[str, Any]]:
    """One row per group in key order; ``specs`` are (kind, column, ignore_nulls, name)."""
    out = []
    for group in group_rows(rows, keys).values():
        result = {k: group[0][k] for k in keys}
        for kind, column, ignore_nulls, name in specs:
            if column is None:
                result[name] = len(group)
            else:
                result[name] = oracle_value(kind, [r[column] for r in group], ignore_nulls)
        out.append(result)
    return oracle_sort(out, keys, [False] * len(keys))


def aggregations(specs: list[tuple]) -> list[Any]:
    made = []
    for kind, column, ignore_nulls, _ in specs:
        made.append(Count() if column is None else AGGS[kind](column, ignore_nulls=ignore_nulls))
    return made


spec_strategy = st.lists(
    st.tuples(st.sampled_from(sorted(AGGS)), st.sampled_from(["v", "w"]), st.booleans()),
    min_size=1,
    max_size=4,
    unique=True,
)


def named(specs: list[tuple]) -> list[tuple]:
    """Specs with the output names Ray Data gives them."""
    out = []
    for kind, column, ignore_nulls in specs:
        out.append((kind, column, ignore_nulls, f"{kind}({column})"))
    return out


@PROPERTY_SETTINGS
@given(
    rows=rows_strategy,
    cuts=block_cuts(),
    keys=keys_strategy,
    raw=spec_strategy,
    num_partitions=st.sampled_from([None, 1, 3]),
)
def test_groupby_aggregate_matches_per_group_oracle(backend, rows, cuts, keys, raw, num_partitions):
    # One name per aggregation: the same kind on the same column twice is tested elsewhere.
    seen, specs = set(), []
    for kind, column, ignore_nulls, name in named(raw):
        if name not in seen:
            seen.add(name)
            specs.append((kind, column, ignore_nulls, name))
    specs = [("count", None, False, "count()")] + specs
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)
    got = ds.groupby(keys, num_partitions=num_partitions).aggregate(*aggregations(specs)).take_all()
    assert rows_close(got, oracle_groupby(rows, keys, specs))


@PROPERTY_SETTINGS
@given(
    rows=rows_strategy,
    cuts=block_cuts(),
    key=st.sampled_from(["k", "g"]),
    kind=st.sampled_from(["sum", "min", "max", "mean", "std"]),
    ignore_nulls=st.booleans(),
)
def test_grouped_shortcuts_match_oracle(backend, rows, cuts, key, kind, ignore_nulls):
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)
    got = getattr(ds.groupby(key), kind)("v", ignore_nulls=ignore_nulls).take_all()
    assert rows_close(got, oracle_groupby(rows, [key], [(kind, "v", ignore_nulls, f"{kind}(v)")]))
    counted = ds.groupby(key).count().take_all()
    assert rows_close(counted, oracle_groupby(rows, [key], [("count", None, False, "count()")]))


@PROPERTY_SETTINGS
@given(
    rows=rows_strategy,
    cuts=block_cuts(),
    ignore_nulls=st.booleans(),
    shortcut=st.sampled_from(["sum", "min", "max", "mean", "std"]),
    column=st.sampled_from(["v", "w"]),
)
def test_global_aggregations_match_oracle(backend, rows, cuts, ignore_nulls, shortcut, column):
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)

    def expected(kind, col):
        values = [r[col] for r in rows]
        return oracle_value(kind, values, ignore_nulls) if rows else empty_value(kind, ignore_nulls)

    specs = [(kind, col) for col in ("v", "w") for kind in ("sum", "min", "max", "mean", "std")]
    result = ds.aggregate(
        Count(), *[AGGS[kind](col, ignore_nulls=ignore_nulls) for kind, col in specs]
    )
    assert list(result) == ["count()"] + [f"{kind}({col})" for kind, col in specs]
    assert result["count()"] == len(rows)
    for kind, col in specs:
        assert values_close(result[f"{kind}({col})"], expected(kind, col)), (kind, col, result)
    got = getattr(ds, shortcut)(column, ignore_nulls=ignore_nulls)
    assert values_close(got, expected(shortcut, column)), (got, expected(shortcut, column))
    counted = ds.aggregate(Count("v", ignore_nulls=True))["count(v)"]
    # Ray Data counts no rows as None when nulls are ignored (see empty_value).
    assert counted == (sum(r["v"] is not None for r in rows) if rows else None)


@PROPERTY_SETTINGS
@given(
    rows=rows_strategy,
    cuts=block_cuts(),
    column=st.sampled_from(["k", "g", "v"]),
    ignore_nulls=st.booleans(),
)
def test_unique_matches_set_of_values(backend, rows, cuts, column, ignore_nulls):
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)
    got = ds.unique(column, ignore_nulls=ignore_nulls)
    expected = {canonical(r[column]) for r in rows if not (ignore_nulls and r[column] is None)}
    assert len(got) == len(expected)
    assert {canonical(v) for v in got} == expected


def test_sum_and_min_of_several_and_of_every_column(backend):
    ds = sf.from_items([{"a": 1, "b": 2.5}, {"a": 3, "b": None}])
    assert ds.sum(["a", "b"]) == {"sum(a)": 4, "sum(b)": 2.5}
    assert ds.min() == {"min(a)": 1, "min(b)": 2.5}
    assert ds.max(["b"]) == 2.5
    assert ds.sum("b", ignore_nulls=False) is None


def test_groupby_one_group_and_many_groups(backend):
    n = 3000
    one = sf.from_arrow([pa.table({"k": np.zeros(500, np.int64), "v": np.arange(500)})] * 6)
    assert one.groupby("k").sum("v").take_all() == [{"k": 0, "sum(v)": 6 * sum(range(500))}]
    keys = np.random.default_rng(1).permutation(n)
    many = sf.from_arrow([pa.table({"k": c, "v": c * 2}) for c in np.array_split(keys, 7)])
    got = many.groupby("k", num_partitions=4).aggregate(Count(), Max("v")).take_all()
    assert got == [{"k": i, "count()": 1, "max(v)": 2 * i} for i in range(n)]


def test_groupby_of_empty_dataset_gives_no_rows_and_global_aggregate_gives_empty_values(backend):
    empty = sf.from_arrow(pa.Table.from_pylist([], schema=SCHEMA))
    assert empty.groupby("k").count().take_all() == []
    assert empty.groupby("g").aggregate(Sum("v"), Mean("w")).take_all() == []
    assert empty.aggregate(Count(), Sum("v"), Min("w")) == {
        "count()": 0,
        "sum(v)": None,
        "min(w)": None,
    }
    assert empty.sum("v") is None and empty.mean("w") is None and empty.std("v") is None
    assert empty.unique("g") == []
    filtered = sf.range(50).filter(lambda r: r["id"] > 100)
    assert filtered.groupby("id").count().take_all() == []
    assert filtered.count() == 0 and filtered.sum("id") is None


def test_groupby_keeps_nan_and_null_keys_apart_nan_first(backend):
    ds = sf.from_arrow(
        [
            pa.table({"x": pa.array([None, float("nan"), 1.0]), "v": [1, 2, 3]}),
            pa.table({"x": pa.array([float("nan"), None, 1.0]), "v": [10, 20, 30]}),
        ]
    )
    got = ds.groupby("x").sum("v").take_all()
    assert [canonical(r["x"]) for r in got] == [1, ("~nan",), ("~null",)]
    assert [r["sum(v)"] for r in got] == [33, 12, 21]


def test_groupby_none_is_one_group(backend):
    ds = sf.range(10, override_num_blocks=3)
    assert ds.groupby(None).count().take_all() == [{"count()": 10}]
    assert ds.groupby(None).sum("id").take_all() == [{"sum(id)": 45}]


def test_groupby_output_dtypes(backend):
    ds = sf.from_arrow(
        pa.table({"k": pa.array([1, 1, 2], pa.int32()), "v": pa.array([1, 2, 3], pa.int16())})
    )
    out = ds.groupby("k").aggregate(Count(), Sum("v"), Min("v"), Mean("v"), Std("v")).to_arrow()
    assert out.schema.names == ["k", "count()", "sum(v)", "min(v)", "mean(v)", "std(v)"]
    assert out.schema.field("k").type == pa.int32()
    assert out.schema.field("count()").type == pa.int64()
    assert pa.types.is_integer(out.schema.field("sum(v)").type)
    assert out.schema.field("mean(v)").type == pa.float64()
    assert out.schema.field("std(v)").type == pa.float64()


def test_std_with_large_offset_is_accurate(backend):
    # A large mean and a small spread, spread over many blocks: a naive sum of squares
    # would lose every digit here.
    rng = np.random.default_rng(5)
    values = 1e9 + rng.normal(0, 1, size=4000)
    ds = sf.from_arrow(
        [pa.table({"k": np.zeros(len(c), np.int64), "v": c}) for c in np.array_split(values, 9)]
    )
    assert math.isclose(ds.std("v"), np.std(values, ddof=1), rel_tol=1e-6)
    assert math.isclose(ds.std("v", ddof=0), np.std(values, ddof=0), rel_tol=1e-6)
    got = ds.groupby("k").std("v").take_all()[0]["std(v)"]
    assert math.isclose(got, np.std(values, ddof=1), rel_tol=1e-6)


class _GenericSum(Sum):
    """Sum through the generic (non-vectorized) path: a subclass that overrides a method."""

    def aggregate_block(self, block):
        return super().aggregate_block(block)


class _GenericMean(Mean):
    def aggregate_block(self, block):
        return super().aggregate_block(block)


def test_nan_values_aggregate_the_same_on_the_builtin_and_the_generic_path(backend):
    ds = sf.from_arrow(
        [
            pa.table({"k": [1, 1], "v": [2.0, float("nan")]}),
            pa.table({"k": [1, 2], "v": [1.0, 5.0]}),
        ]
    )
    builtin = ds.groupby("k").aggregate(Sum("v"), Mean("v")).take_all()
    generic = ds.groupby("k").aggregate(_GenericSum("v"), _GenericMean("v")).take_all()
    assert rows_close(builtin, generic)
    assert values_close(ds.sum("v"), ds.aggregate(_GenericSum("v"))["sum(v)"])


def test_subclassed_builtins_agree_with_builtins_without_nan(backend):
    rows = [{"k": i % 3, "v": float(i) if i % 4 else None} for i in range(40)]
    ds = dataset_of(pa.Table.from_pylist(rows), [7, 19, 30])
    builtin = ds.groupby("k").aggregate(Sum("v"), Mean("v")).take_all()
    generic = ds.groupby("k").aggregate(_GenericSum("v"), _GenericMean("v")).take_all()
    assert rows_close(builtin, generic)


def test_min_max_of_strings(backend):
    ds = sf.from_items([{"k": 1, "s": "pear"}, {"k": 1, "s": "apple"}, {"k": 2, "s": None}])
    assert ds.min("s") == "apple" and ds.max("s") == "pear"
    assert ds.groupby("k").min("s").take_all() == [
        {"k": 1, "min(s)": "apple"},
        {"k": 2, "min(s)": None},
    ]


def test_decimal_sum_and_mean(backend):
    import decimal

    ds = sf.from_arrow(
        pa.table(
            {"d": pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.25")], pa.decimal128(5, 2))}
        )
    )
    assert ds.sum("d") == decimal.Decimal("3.75")
    assert math.isclose(float(ds.mean("d")), 1.875)


def test_decimal_std(backend):
    import decimal

    ds = sf.from_arrow(
        pa.table(
            {"d": pa.array([decimal.Decimal("1.5"), decimal.Decimal("2.25")], pa.decimal128(5, 2))}
        )
    )
    assert math.isclose(float(ds.std("d")), float(np.std([1.5, 2.25], ddof=1)), rel_tol=1e-3)


def test_groupby_on_a_column_of_null_type(backend):
    ds = sf.from_arrow(pa.table({"n": pa.array([None, None], pa.null()), "v": [1, 2]}))
    assert ds.groupby("n").sum("v").take_all() == [{"n": None, "sum(v)": 3}]
