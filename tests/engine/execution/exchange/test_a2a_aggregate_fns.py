"""shardflow.aggregate classes (AggregateFn, AggregateFnV2, AbsMax, Quantile, Unique,
ApproximateQuantile) and GroupedData.map_groups, against NumPy and plain Python, on both
backends."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from a2a_support import PROPERTY_SETTINGS, block_cuts, canonical, dataset_of, group_rows
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf
from shardflow.aggregate import (
    AbsMax,
    AggregateFn,
    AggregateFnV2,
    Count,
    Max,
    Quantile,
    Sum,
    Unique,
)


def _numbers(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 5, size=n)
    values = rng.normal(0, 10, size=n).round(3)
    return keys, values


def _blocks(keys, values, parts: int = 6):
    return sf.from_arrow(
        [
            pa.table({"k": k, "v": v})
            for k, v in zip(np.array_split(keys, parts), np.array_split(values, parts))
        ]
    )


def test_aggregate_fn_by_rows_and_by_blocks(backend):
    keys, values = _numbers()
    ds = _blocks(keys, values)
    by_row = AggregateFn(
        init=lambda k: 0.0,
        accumulate_row=lambda a, r: a + r["v"] ** 2,
        merge=lambda a, b: a + b,
        finalize=lambda a: math.sqrt(a),
        name="norm",
    )
    by_block = AggregateFn(
        init=lambda k: 0,
        accumulate_block=lambda a, b: a + b.num_rows,
        merge=lambda a, b: a + b,
        name="rows",
    )
    result = ds.aggregate(by_row, by_block)
    assert math.isclose(result["norm"], float(np.linalg.norm(values)), rel_tol=1e-9)
    assert result["rows"] == len(values)
    grouped = ds.groupby("k").aggregate(by_row, by_block).take_all()
    for k in range(5):
        assert grouped[k]["k"] == k
        assert math.isclose(
            grouped[k]["norm"], float(np.linalg.norm(values[keys == k])), rel_tol=1e-9
        )
        assert grouped[k]["rows"] == int((keys == k).sum())


def test_aggregate_fn_init_receives_the_group_key(backend):
    ds = sf.from_items([{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}])
    tagged = AggregateFn(
        init=lambda key: [key],
        accumulate_row=lambda a, r: a + [r["v"]],
        merge=lambda a, b: a + b[1:],
        finalize=lambda a: f"{a[0]}:{sum(a[1:])}",
        name="tag",
    )
    assert ds.groupby("k").aggregate(tagged).take_all() == [
        {"k": "a", "tag": "a:4"},
        {"k": "b", "tag": "b:2"},
    ]


class SumOfSquares(AggregateFnV2):
    """A user aggregation through the AggregateFnV2 methods."""

    def __init__(self, on: str, ignore_nulls: bool = True):
        super().__init__(f"sum_sq({on})", lambda: 0, on=on, ignore_nulls=ignore_nulls)

    def aggregate_block(self, block):
        column = block.column(self.get_target_column())
        return pc.sum(
            pc.multiply(column, column), skip_nulls=self._ignore_nulls, min_count=1
        ).as_py()

    def combine(self, current_accumulator, new):
        return current_accumulator + new


def test_aggregate_fn_v2_subclass_with_null_rules(backend):
    ds = sf.from_arrow(
        [
            pa.table({"k": [1, 1, 2, 3], "v": [1.0, 2.0, None, None]}),
            pa.table({"k": [2, 3, 3], "v": [3.0, None, 4.0]}),
        ]
    )
    got = (
        ds.groupby("k")
        .aggregate(SumOfSquares("v"), SumOfSquares("v", ignore_nulls=False))
        .take_all()
    )
    # The same name twice: the second gets "_2", as in Ray Data.
    assert got == [
        {"k": 1, "sum_sq(v)": 5.0, "sum_sq(v)_2": 5.0},
        {"k": 2, "sum_sq(v)": 9.0, "sum_sq(v)_2": None},
        {"k": 3, "sum_sq(v)": 16.0, "sum_sq(v)_2": None},
    ]
    assert SumOfSquares("v").get_agg_name() == "sum_sq"


def test_repeated_builtin_names_get_suffixes(backend):
    ds = sf.range(5)
    assert ds.aggregate(Sum("id"), Sum("id"), Sum("id", alias_name="total")) == {
        "sum(id)": 10,
        "sum(id)_2": 10,
        "total": 10,
    }


# Values with nulls, but not only nulls (that case is test_quantile_of_only_nulls_is_null).
some_values = st.lists(
    st.one_of(st.none(), st.integers(min_value=-50, max_value=50)), max_size=50
).filter(lambda values: not values or any(v is not None for v in values))


@PROPERTY_SETTINGS
@given(values=some_values, cuts=block_cuts(50), q=st.sampled_from([0.0, 0.1, 0.5, 0.75, 1.0]))
def test_absmax_and_quantile_match_numpy(backend, values, cuts, q):
    ds = dataset_of(pa.table({"x": pa.array(values, pa.int64())}), cuts)
    present = np.array([v for v in values if v is not None], dtype=np.float64)
    result = ds.aggregate(AbsMax("x"), Quantile("x", q=q))
    if len(present):
        assert result["abs_max(x)"] == np.abs(present).max()
        assert math.isclose(
            result["quantile(x)"], float(np.quantile(present, q)), rel_tol=1e-9, abs_tol=1e-9
        )
    else:
        assert result["abs_max(x)"] is None and result["quantile(x)"] is None


@PROPERTY_SETTINGS
@given(
    values=st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])), max_size=40),
    cuts=block_cuts(40),
    ignore_nulls=st.booleans(),
)
def test_unique_aggregation_per_group(backend, values, cuts, ignore_nulls):
    rows = [{"k": i % 3, "s": v} for i, v in enumerate(values)]
    ds = dataset_of(
        pa.Table.from_pylist(rows, schema=pa.schema([("k", pa.int64()), ("s", pa.string())])), cuts
    )
    got = ds.groupby("k").aggregate(Unique("s", ignore_nulls=ignore_nulls)).take_all()
    groups = group_rows(rows, ["k"])
    assert [r["k"] for r in got] == sorted(k[0] for k in groups)
    for r in got:
        expected = {v["s"] for v in groups[(r["k"],)] if not (ignore_nulls and v["s"] is None)}
        assert sorted(map(repr, r["unique(s)"])) == sorted(map(repr, expected))


def test_quantile_of_only_nulls_is_null(backend):
    ds = sf.from_arrow(pa.table({"k": [1, 1, 2], "x": pa.array([None, None, 4], pa.int64())}))
    assert ds.groupby("k").aggregate(Quantile("x")).take_all() == [
        {"k": 1, "quantile(x)": None},
        {"k": 2, "quantile(x)": 4.0},
    ]
    assert ds.filter(lambda r: r["k"] == 1).aggregate(Quantile("x")) == {"quantile(x)": None}


def test_count_and_max_of_one_column_ignore_nulls(backend):
    ds = sf.from_items([{"x": 1}, {"x": None}, {"x": 3}])
    assert ds.aggregate(
        Count("x", ignore_nulls=True), Count("x"), Max("x", ignore_nulls=False)
    ) == {
        "count(x)": 2,
        "count(x)_2": 3,
        "max(x)": None,
    }


def test_approximate_quantile_close_to_numpy(backend):
    pytest.importorskip("datasketches")
    from shardflow.aggregate import ApproximateQuantile

    keys, values = _numbers(4000, seed=2)
    ds = _blocks(keys, values, parts=9)
    result = ds.aggregate(ApproximateQuantile("v", quantiles=[0.1, 0.5, 0.9]))
    got = result["approx_quantile(v)"]
    expected = np.quantile(values, [0.1, 0.5, 0.9])
    spread = values.max() - values.min()
    assert all(abs(g - e) < 0.02 * spread for g, e in zip(got, expected))
    grouped = ds.groupby("k").aggregate(ApproximateQuantile("v", quantiles=[0.5])).take_all()
    for row in grouped:
        median = np.median(values[keys == row["k"]])
        assert abs(row["approx_quantile(v)"][0] - median) < 0.05 * spread


# -- map_groups --------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "k": st.one_of(st.none(), st.integers(min_value=0, max_value=6)),
                "v": st.integers(min_value=-100, max_value=100),
            }
        ),
        max_size=60,
    ),
    cuts=block_cuts(),
    num_partitions=st.sampled_from([None, 1, 4]),
)
def test_map_groups_sees_each_whole_group_once_in_key_order(backend, rows, cuts, num_partitions):
    table = pa.Table.from_pylist(rows, schema=pa.schema([("k", pa.int64()), ("v", pa.int64())]))

    def summarize(batch):
        # pyarrow batches keep a null key null (NumPy batches would make it NaN).
        assert len(set(map(canonical, batch.column("k").to_pylist()))) == 1
        return pa.table(
            {
                "k": batch.column("k").slice(0, 1),
                "n": [batch.num_rows],
                "total": [pc.sum(batch.column("v")).as_py() or 0],
            }
        )

    grouped = dataset_of(table, cuts).groupby("k", num_partitions=num_partitions)
    got = grouped.map_groups(summarize, batch_format="pyarrow").take_all()
    groups = group_rows(rows, ["k"])
    # Groups in key order, the null key last (Ray Data's order is arbitrary).
    order = sorted(
        groups, key=lambda key: (key[0] == ("~null",), key[0] if key[0] != ("~null",) else 0)
    )
    expected = [
        {"k": groups[key][0]["k"], "n": len(groups[key]), "total": sum(r["v"] for r in groups[key])}
        for key in order
    ]
    assert [(r["k"], r["n"], r["total"]) for r in got] == [
        (e["k"], e["n"], e["total"]) for e in expected
    ]


@pytest.mark.parametrize("batch_format", ["pandas", "pyarrow", "numpy"])
def test_map_groups_batch_formats(backend, batch_format):
    ds = sf.from_items([{"k": i % 3, "v": float(i)} for i in range(12)])
    expected_type = {"pandas": pd.DataFrame, "pyarrow": pa.Table, "numpy": dict}[batch_format]

    def center(batch):
        assert isinstance(batch, expected_type)
        if batch_format == "pandas":
            return batch.assign(v=batch["v"] - batch["v"].mean())
        if batch_format == "pyarrow":
            mean = pc.mean(batch.column("v"))
            return batch.set_column(1, "v", pc.subtract(batch.column("v"), mean))
        return {"k": batch["k"], "v": batch["v"] - batch["v"].mean()}

    got = ds.groupby("k").map_groups(center, batch_format=batch_format).take_all()
    assert [r["k"] for r in got] == [0] * 4 + [1] * 4 + [2] * 4
    assert [r["v"] for r in got] == [-4.5, -1.5, 1.5, 4.5] * 3


class Scale:
    """A callable class: constructed once per task, with constructor arguments."""

    def __init__(self, factor):
        self.factor = factor

    def __call__(self, batch, offset, *, sign):
        return {"k": batch["k"][:1], "out": [sign * (self.factor * int(batch["v"].sum()) + offset)]}


def test_map_groups_callable_class_and_arguments(backend):
    ds = sf.from_items([{"k": i % 2, "v": i} for i in range(6)])
    got = (
        ds.groupby("k")
        .map_groups(Scale, fn_constructor_args=(10,), fn_args=(1,), fn_kwargs={"sign": -1})
        .take_all()
    )
    assert got == [{"k": 0, "out": -61}, {"k": 1, "out": -91}]


def test_map_groups_generator_and_none_key(backend):
    ds = sf.range(10, override_num_blocks=3)

    def halves(batch):
        ids = np.sort(batch["id"])
        yield {"id": ids[:5]}
        yield {"id": ids[5:] * 100}

    got = [r["id"] for r in ds.groupby(None).map_groups(halves).take_all()]
    assert got == [0, 1, 2, 3, 4, 500, 600, 700, 800, 900]


def test_map_groups_error_reaches_the_driver(backend):
    def boom(batch):
        raise KeyError("no such thing")

    with pytest.raises(KeyError, match="no such thing"):
        sf.from_items([{"k": 1}]).groupby("k").map_groups(boom).take_all()


def test_aggregations_of_empty_groupby_values(backend):
    # Groups that are all-null in the aggregated column give null, like Ray Data.
    ds = sf.from_arrow(pa.table({"k": [1, 1, 2], "v": pa.array([None, None, 1.5], pa.float64())}))
    got = (
        ds.groupby("k")
        .aggregate(Sum("v"), Max("v"), AbsMax("v"), Unique("v", ignore_nulls=True))
        .take_all()
    )
    assert got == [
        {"k": 1, "sum(v)": None, "max(v)": None, "abs_max(v)": None, "unique(v)": []},
        {"k": 2, "sum(v)": 1.5, "max(v)": 1.5, "abs_max(v)": 1.5, "unique(v)": [1.5]},
    ]
