"""Top-k (sort followed by a limit): the same rows, in the same order, as a full stable sort.

The oracle is Arrow's stable ``sort_indices`` over the whole input (nulls last, NaN after
numbers), ties included: a stable sort keeps tied rows in input order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.engine.execution.exchange.top_k import top_k_block
from shardflow.engine.plan.logical import Limit, Sort, SortKey, TopK
from shardflow.engine.plan.optimizer import optimize


def _oracle(table: pa.Table, key: SortKey, k: int) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=key.arrow_sort_keys())).slice(0, k)


def _rows(table: pa.Table) -> list[int]:
    """The ``row`` column: compares order without comparing NaN keys."""
    return table.column("row").to_pylist()


FEW_VALUES = st.lists(st.integers(-3, 3), min_size=0, max_size=80)


@st.composite
def keyed_tables(draw):
    """Tables with many ties: small integers, floats with NaN and nulls, strings, nulls."""
    n = draw(st.integers(0, 80))
    kind = st.sampled_from(["int", "uint", "float", "float_nulls", "string", "int_nulls"])
    columns = {}
    names = []
    for i in range(draw(st.integers(1, 3))):
        name = f"k{i}"
        names.append(name)
        chosen = draw(kind)
        if chosen == "int":
            values = draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n))
            columns[name] = pa.array(values, pa.int64())
        elif chosen == "uint":
            values = draw(
                st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 2), min_size=n, max_size=n)
            )
            columns[name] = pa.array(values, pa.uint64())
        elif chosen == "int_nulls":
            values = draw(st.lists(st.none() | st.integers(-2, 2), min_size=n, max_size=n))
            columns[name] = pa.array(values, pa.int32())
        elif chosen == "float":
            floats = st.sampled_from([0.0, -0.0, 1.5, -2.0, float("nan"), float("inf")])
            values = draw(st.lists(floats, min_size=n, max_size=n))
            columns[name] = pa.array(values, pa.float64())
        elif chosen == "float_nulls":
            values = draw(
                st.lists(
                    st.none() | st.sampled_from([1.0, float("nan"), -1.0]), min_size=n, max_size=n
                )
            )
            columns[name] = pa.array(values, pa.float64())
        else:
            values = draw(
                st.lists(st.none() | st.sampled_from(["", "a", "b", "ab"]), min_size=n, max_size=n)
            )
            columns[name] = pa.array(values, pa.string())
    columns["row"] = pa.array(np.arange(n, dtype=np.int64))
    table = pa.table(columns)
    width = draw(st.integers(1, len(names)))
    key = SortKey(
        tuple(names[:width]), tuple(draw(st.lists(st.booleans(), min_size=width, max_size=width)))
    )
    return table, key


@settings(max_examples=150, deadline=None)
@given(keyed_tables(), st.integers(0, 90))
def test_top_k_block_is_the_head_of_the_stable_sort(table_and_key, k):
    table, key = table_and_key
    assert _rows(top_k_block(table, key, k)) == _rows(_oracle(table, key, k))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(keyed_tables(), st.integers(0, 90), st.integers(1, 6))
def test_sort_then_limit_equals_the_full_sort(fresh_context, table_and_key, k, blocks):
    table, key = table_and_key
    pieces = [table.slice(o, length) for o, length in _even(table.num_rows, blocks)]
    ds = sf.from_arrow(pieces).sort(list(key.columns), descending=list(key.descending))
    got = ds.limit(k).take_all()
    assert [r["row"] for r in got] == _rows(_oracle(table, key, k))
    assert [r["row"] for r in got] == [r["row"] for r in ds.take_all()][:k]


def _even(n: int, parts: int) -> list[tuple[int, int]]:
    bounds = [n * j // parts for j in range(parts + 1)]
    return [(bounds[j], bounds[j + 1] - bounds[j]) for j in range(parts)]


def test_numeric_fast_path_matches_on_many_rows():
    rng = np.random.default_rng(3)
    for values in (
        rng.integers(0, 50, 200_000),
        rng.random(200_000),
        rng.integers(-(2**62), 2**62, 200_000),
    ):
        table = pa.table({"k": values, "row": np.arange(len(values))})
        for descending in (False, True):
            key = SortKey(("k",), (descending,))
            for k in (1, 10, 1000):
                assert _rows(top_k_block(table, key, k)) == _rows(_oracle(table, key, k))


def test_take_after_sort_on_each_backend(backend):
    rng = np.random.default_rng(5)
    table = pa.table({"x": rng.integers(0, 100, 40_000), "row": np.arange(40_000)})
    ds = sf.from_arrow([table.slice(i * 5000, 5000) for i in range(8)])
    key = SortKey(("x",), (True,))
    expected = _rows(_oracle(table, key, 25))
    assert [r["row"] for r in ds.sort("x", descending=True).take(25)] == expected
    assert [r["row"] for r in ds.sort("x", descending=True).limit(25).take_all()] == expected


def test_optimizer_plans_top_k_only_before_a_limit():
    base = sf.range(100)._plan
    key = SortKey(("id",), (False,))
    plan = optimize(base.with_op(Sort(key)).with_op(Limit(5)))
    assert [type(op) for op in plan.ops] == [TopK, Limit]
    assert plan.ops[0].limit == 5
    plan = optimize(base.with_op(Sort(key)))
    assert [type(op) for op in plan.ops] == [Sort]
    # A row-preserving map in between keeps the rewrite; a filter does not.
    mapped = sf.range(100).sort("id").map(lambda r: r).limit(3)
    assert isinstance(optimize(mapped._plan).ops[0], TopK)
    filtered = sf.range(100).sort("id").filter(lambda r: r["id"] % 2 == 0).limit(3)
    assert isinstance(optimize(filtered._plan).ops[0], Sort)
    assert [r["id"] for r in filtered.take_all()] == [0, 2, 4]


def test_unknown_key_column_fails_as_the_sort_does(fresh_context):
    with pytest.raises(ValueError, match="no such column"):
        sf.range(10).sort("nope").take(3)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(
    "make",
    [
        lambda rng, n: rng.integers(0, 50, n),  # ties at the k-th row, beyond the sample
        lambda rng, n: rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64),  # ~ at the edges
        lambda rng, n: np.where(rng.random(n) < 0.3, np.nan, rng.random(n)),  # NaNs
        lambda rng, n: np.concatenate([np.full(70_000, np.nan), rng.random(n - 70_000)]),
        lambda rng, n: np.sort(rng.random(n))[::-1].copy(),  # the best rows after the sample
    ],
    ids=["ties", "int_edges", "nans", "nan_sample", "descending_run"],
)
@pytest.mark.parametrize("k", [1, 10, 500, 2000])
def test_large_blocks_bounded_by_a_sample_match_the_full_sort(make, k, descending):
    # Blocks of 4x the sample or more: only rows at most the sample's k-th key are partitioned.
    rng = np.random.default_rng(k)
    n = 300_000
    table = pa.table({"v": make(rng, n), "row": np.arange(n)})
    key = SortKey(("v",), (descending,))
    assert _rows(top_k_block(table, key, k)) == _rows(_oracle(table, key, k))
