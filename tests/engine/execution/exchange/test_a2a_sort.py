"""sort: several keys, per-key order, nulls last, NaN before nulls, over ints, floats,
strings and timestamps, against a plain-Python stable sort; boundaries; both backends."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from a2a_support import (
    PROPERTY_SETTINGS,
    block_cuts,
    blocks_of,
    canonical,
    dataset_of,
    oracle_sort,
    same_rows,
)
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("t", pa.timestamp("us")),
    ]
)
EPOCH = dt.datetime(2024, 1, 1)

# Small domains, so ties between rows are common and later keys matter.
ints = st.one_of(
    st.none(), st.integers(min_value=-3, max_value=3), st.sampled_from([-(2**62), 2**62])
)
floats = st.one_of(
    st.none(),
    st.just(float("nan")),
    st.sampled_from([-1.5, -0.0, 0.5, 2.0, 1e300, -np.inf, np.inf]),
)
strings = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "B", "é", "z" * 20]))
times = st.one_of(
    st.none(), st.integers(min_value=-2, max_value=2).map(lambda d: EPOCH + dt.timedelta(days=d))
)
rows_strategy = st.lists(
    st.fixed_dictionaries({"i": ints, "f": floats, "s": strings, "t": times}), max_size=60
)
keys_strategy = st.lists(st.sampled_from(["i", "f", "s", "t"]), min_size=1, max_size=4, unique=True)


def key_values(rows, keys):
    return [tuple(canonical(r[k]) for k in keys) for r in rows]


@PROPERTY_SETTINGS
@given(rows=rows_strategy, cuts=block_cuts(), keys=keys_strategy, data=st.data())
def test_sort_orders_like_a_stable_multi_key_sort(backend, rows, cuts, keys, data):
    descending = data.draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)
    got = ds.sort(keys, descending=descending).take_all()
    expected = oracle_sort(rows, keys, descending)
    # Rows with equal keys may come in any order (the sort is not promised stable across
    # blocks), so compare the key sequence, and the rows as a multiset.
    assert key_values(got, keys) == key_values(expected, keys)
    assert same_rows(got, rows)


@PROPERTY_SETTINGS
@given(
    rows=rows_strategy,
    cuts=block_cuts(),
    key=st.sampled_from(["i", "f", "s", "t"]),
    desc=st.booleans(),
)
def test_sort_one_key_with_one_flag(backend, rows, cuts, key, desc):
    ds = dataset_of(pa.Table.from_pylist(rows, schema=SCHEMA), cuts)
    got = ds.sort(key, descending=desc).take_all()
    assert key_values(got, [key]) == key_values(oracle_sort(rows, [key], [desc]), [key])
    assert len(got) == len(rows)


def test_sort_puts_nan_before_null_in_both_directions(backend):
    ds = sf.from_arrow(
        [
            pa.table({"x": pa.array([None, 2.0], pa.float64())}),
            pa.table({"x": pa.array([float("nan"), 1.0, None, float("nan")], pa.float64())}),
        ]
    )
    up = [r["x"] for r in ds.sort("x").take_all()]
    down = [r["x"] for r in ds.sort("x", descending=True).take_all()]
    assert [canonical(v) for v in up] == [1, 2, ("~nan",), ("~nan",), ("~null",), ("~null",)]
    assert [canonical(v) for v in down] == [2, 1, ("~nan",), ("~nan",), ("~null",), ("~null",)]


def test_sort_many_blocks_matches_numpy(backend):
    rng = np.random.default_rng(7)
    values = rng.integers(-1000, 1000, size=5000)
    ds = sf.from_arrow([pa.table({"x": chunk}) for chunk in np.array_split(values, 23)])
    got = np.array([r["x"] for r in ds.sort("x", descending=True).take_all()])
    np.testing.assert_array_equal(got, np.sort(values)[::-1])


def test_sort_keeps_schema_and_empty_input(backend):
    table = pa.Table.from_pylist([], schema=SCHEMA)
    ds = sf.from_arrow(table).sort(["s", "i"])
    assert ds.take_all() == []
    ds2 = sf.from_arrow(
        pa.Table.from_pylist([{"i": 1, "f": 1.0, "s": "a", "t": EPOCH}], schema=SCHEMA)
    )
    assert ds2.sort("t").schema().names == SCHEMA.names
    assert ds2.sort("t").to_arrow().schema == SCHEMA


@pytest.mark.parametrize(
    "descending",
    [
        False,
        True,
    ],
)
def test_sort_with_boundaries_cuts_blocks_at_them(backend, descending):
    values = np.arange(100)
    ds = sf.from_arrow([pa.table({"x": chunk}) for chunk in np.array_split(values[::-1], 4)])
    sorted_ds = ds.sort("x", descending=descending, boundaries=[25, 60])
    blocks = [b.column("x").to_pylist() for b in blocks_of(sorted_ds) if b.num_rows]
    flat = [v for b in blocks for v in b]
    assert flat == sorted(values.tolist(), reverse=descending)
    # Each block holds the values between two consecutive boundaries, a boundary value
    # in the block above it (Ray Data: the same ranges, reversed when descending).
    expected = [list(range(25)), list(range(25, 60)), list(range(60, 100))]
    if descending:
        expected = [list(range(99, 59, -1)), list(range(59, 24, -1)), list(range(24, -1, -1))]
    assert blocks == expected


def test_sort_then_map_and_limit_streams_sorted_rows(backend):
    ds = sf.range(200, override_num_blocks=7).random_shuffle(seed=3).sort("id", descending=True)
    assert [r["id"] for r in ds.limit(5).take_all()] == [199, 198, 197, 196, 195]
    doubled = ds.map_batches(lambda b: {"y": b["id"] * 2}).take_all()
    assert [r["y"] for r in doubled] == [2 * i for i in range(199, -1, -1)]
