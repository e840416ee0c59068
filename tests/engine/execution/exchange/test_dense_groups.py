"""Group-by over dense key codes (bincount) gives the rows Arrow's hash aggregation gives.

The oracle is ``pyarrow.Table.group_by`` over the whole input, sorted by key. Values are
multiples of 1/8 (and NaN), so every sum is exact in any order and results compare exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.aggregate import Count, Max, Mean, Sum
from shardflow.engine.execution.exchange.dense_groups import (
    CHUNK_ROWS,
    SPAN_PER_CHUNK,
    dense_combine,
    dense_keys,
    dense_partial,
    grouped_sums,
)
from shardflow.engine.execution.exchange.vectorized import vectorized


@st.composite
def grouped_tables(draw):
    n = draw(st.integers(1, 120))
    spread = draw(st.sampled_from([3, 50, 10**12]))  # 10**12: too wide, Arrow's path
    columns = {
        "i": pa.array(draw(st.lists(st.integers(-spread, spread), min_size=n, max_size=n))),
        "u": pa.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), pa.uint8()),
        "s": pa.array(
            draw(st.lists(st.sampled_from(["b", "a", "", "ab"]), min_size=n, max_size=n))
        ),
    }
    eighths = st.integers(-80, 80).map(lambda x: x / 8) | st.just(float("nan"))
    if draw(st.booleans()):
        eighths = eighths | st.none()  # nulls: Arrow's path
    columns["v"] = pa.array(draw(st.lists(eighths, min_size=n, max_size=n)), pa.float64())
    keys = draw(st.sampled_from([["i"], ["u"], ["s"], ["s", "u"], ["u", "i"]]))
    return pa.table(columns), keys


def _oracle(table: pa.Table, keys: list[str]) -> list[tuple]:
    grouped = table.group_by(keys).aggregate(
        [([], "count_all"), ("v", "sum", pc.ScalarAggregateOptions(min_count=1)), ("v", "count")]
    )
    grouped = grouped.sort_by([(k, "ascending") for k in keys])
    rows = []
    for r in grouped.to_pylist():
        total = r["v_sum"]
        if total is not None and math.isnan(total):
            total = None  # Ray's rule: with ignore_nulls a NaN sum is null
        mean = None if total is None or not r["v_count"] else total / r["v_count"]
        rows.append(tuple(r[k] for k in keys) + (r["count_all"], total, mean))
    return rows


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(grouped_tables(), st.integers(1, 4))
def test_grouped_count_sum_mean_equal_arrow(fresh_context, table_and_keys, blocks):
    table, keys = table_and_keys
    bounds = [table.num_rows * j // blocks for j in range(blocks + 1)]
    pieces = [table.slice(bounds[j], bounds[j + 1] - bounds[j]) for j in range(blocks)]
    out = (
        sf.from_arrow(pieces)
        .groupby(keys if len(keys) > 1 else keys[0])
        .aggregate(Count(), Sum("v"), Mean("v"))
        .take_all()
    )
    got = [tuple(r[k] for k in keys) + (r["count()"], r["sum(v)"], r["mean(v)"]) for r in out]
    assert got == _oracle(table, keys)


def test_dense_path_applies_and_keeps_key_types():
    table = pa.table(
        {
            "k": pa.array([5, 3, 5, 4], pa.int32()),
            "s": ["x", "y", "x", "x"],
            "v": [1.0, 2.0, 3.0, 4.0],
        }
    )
    aggs = (Count(), Sum("v"), Mean("v"))
    bulks = [vectorized(a, f"__s{i}") for i, a in enumerate(aggs)]
    partial = dense_partial(table, ("k",), aggs, bulks)
    assert partial.schema.field("k").type == pa.int32()
    assert partial.column("k").to_pylist() == [3, 4, 5]
    assert partial.column("__s1_0").to_pylist() == [2.0, 4.0, 4.0]
    # Other aggregations, nulls in a key or a range far wider than the rows take Arrow's path.
    assert dense_partial(table, ("k",), (Max("v"),), [vectorized(Max("v"), "__s0")]) is None
    with_null = table.set_column(0, "k", pa.array([5, None, 5, 4], pa.int32()))
    assert dense_keys(with_null, ("k",)) is None
    assert dense_keys(pa.table({"k": np.array([0, 10**9])}), ("k",)) is None
    # A string key alone too (dictionary-encoding it costs more than Arrow's hash
    # aggregation); beside another key it has codes.
    assert dense_keys(table, ("s",)) is None
    assert dense_keys(table, ("k", "s")) is not None


def test_sum_and_mean_of_one_column_share_its_sum():
    table = pa.table({"k": np.array([2, 0, 2, 1]), "v": [0.5, 1.0, 2.0, 4.0]})
    aggs = (Mean("v"), Sum("v"), Count())
    bulks = [vectorized(a, f"__s{i}") for i, a in enumerate(aggs)]
    partial = dense_partial(table, ("k",), aggs, bulks)
    assert partial.column("k").to_pylist() == [0, 1, 2]
    assert partial.column("__s0_0").to_pylist() == [1.0, 4.0, 2.5]  # Mean's sum
    assert partial.column("__s0_1").to_pylist() == [1, 1, 2]  # Mean's count
    assert partial.column("__s1_0").to_pylist() == [1.0, 4.0, 2.5]
    assert partial.column("__s2_0").to_pylist() == [1, 1, 2]


@pytest.mark.parametrize("compiled", [True, False])
def test_sums_over_slices_of_rows_equal_whole_columns(compiled, monkeypatch):
    # Few groups over many rows: one pass (the compiled module), or without it NumPy's
    # bincounts over cache-sized slices.
    from shardflow.engine.execution.exchange import dense_groups

    if not compiled:
        monkeypatch.setattr(dense_groups, "_grouped_sums", None)
    rng = np.random.default_rng(3)
    rows = 5 * CHUNK_ROWS + 17
    codes = rng.integers(0, 7, rows)
    weights = [rng.integers(-800, 800, rows) / 8, rng.integers(0, 8, rows) / 4]
    counts, totals = grouped_sums(codes, 9, weights)
    assert counts.tolist() == np.bincount(codes, minlength=9).tolist()
    for total, w in zip(totals, weights):
        assert total.tolist() == np.bincount(codes, weights=w, minlength=9).tolist()
    whole_counts, whole = grouped_sums(codes, SPAN_PER_CHUNK + 1, weights)  # not sliced
    assert whole_counts[:9].tolist() == counts.tolist()
    assert [t[:9].tolist() for t in whole] == [t.tolist() for t in totals]


def test_combining_shares_the_sums_of_states_that_are_one_array():
    # Mean's sum and Sum's are one array in each partial block: the combine sums it once,
    # and a state equal in values but elsewhere in memory is summed on its own.
    sums = pa.array([1.5, 2.0, 4.0])
    partial = pa.table(
        {
            "k": [1, 2, 1],
            "a": sums,
            "b": sums,
            "c": pa.array([1.5, 2.0, 4.0]),
            "n": pa.array([1, 2, 3]),
        }
    )
    kinds = {"a": "sum", "b": "sum", "c": "sum", "n": "count"}
    merged = dense_combine(pa.concat_tables([partial.slice(0, 2), partial.slice(2)]), ("k",), kinds)

    def address(name):
        return merged.column(name).chunk(0).buffers()[1].address

    assert address("a") == address("b") != address("c")
    for name in ("a", "b", "c"):
        assert merged.column(name).to_pylist() == [5.5, 2.0]
    assert merged.column("n").to_pylist() == [4, 2]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(0, 3 * CHUNK_ROWS),
    span=st.sampled_from([1, 3, 70, SPAN_PER_CHUNK + 5]),
    weights=st.integers(0, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_one_pass_sums_are_bincounts_bit_for_bit(rows, span, weights, seed):
    # Any float64 values (not only exact ones): the compiled one-pass sums add in row order,
    # as np.bincount over the whole column does (NumPy's slices, without it, need not).
    from shardflow.engine.execution.exchange import dense_groups

    if dense_groups._grouped_sums is None:
        pytest.skip("the compiled module (engine/execution/exchange/_grouped_sums.c) is not built")
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, span, rows)
    columns = [rng.standard_normal(rows) * 10.0 ** rng.integers(-5, 5) for _ in range(weights)]
    counts, totals = grouped_sums(codes, span, columns)
    assert np.array_equal(counts, np.bincount(codes, minlength=span))
    for total, w in zip(totals, columns):
        want = np.bincount(codes, weights=w, minlength=span)
        assert np.array_equal(total.view(np.int64), want.view(np.int64))


def test_codes_outside_the_span_leave_the_sums_to_numpy():
    from shardflow.engine.execution.exchange import dense_groups

    if dense_groups._grouped_sums is None:
        pytest.skip("the compiled module (engine/execution/exchange/_grouped_sums.c) is not built")
    codes = np.array([0, 1, 5], dtype=np.int64)
    counts = np.zeros(3, dtype=np.int64)
    totals = [np.zeros(3)]
    assert not dense_groups._grouped_sums.count_and_sum(codes, 8, 3, counts, [np.ones(3)], totals)
    assert dense_groups._grouped_sums.count_and_sum(
        codes[:2], 8, 3, counts * 0, [np.ones(2)], totals
    )
    with np.testing.assert_raises(ValueError):  # a weight shorter than the codes
        dense_groups._grouped_sums.count_and_sum(
            codes, 8, 6, np.zeros(6, np.int64), [np.ones(2)], [np.zeros(6)]
        )
