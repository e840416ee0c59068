"""AsList, Unique, CountDistinct, ValueCounter, MissingValuePercentage, ZeroPercentage and
ApproximateTopK against plain Python over the same rows, on both backends and on datasets
cut into blocks anywhere (tests/compat compares them with Ray Data)."""

from __future__ import annotations

import collections
import itertools
import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.aggregate import (
    AggregateFn,
    ApproximateTopK,
    AsList,
    CountDistinct,
    MissingValuePercentage,
    Unique,
    ValueCounter,
    ZeroPercentage,
)

PROPERTY_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def block_cuts(max_rows: int) -> st.SearchStrategy:
    return st.lists(st.integers(0, max_rows), max_size=4)


def dataset_of(table: pa.Table, cuts: list[int]) -> sf.Dataset:
    """``table`` as a dataset of blocks cut at ``cuts``."""
    bounds = sorted({0, table.num_rows, *(min(c, table.num_rows) for c in cuts)})
    return sf.from_arrow(
        [table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)] or [table]
    )


VALUES = st.one_of(st.none(), st.integers(-2, 2), st.just(float("nan")))


def _oracle(values: list) -> dict:
    present = [v for v in values if v is not None]
    numbers = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
    missing = len(values) - len(numbers)
    keys = {("nan",) if isinstance(v, float) and math.isnan(v) else v for v in present}
    return {
        "list": values,
        "count_distinct": len(keys),
        "missing_pct": missing / len(values) * 100.0 if values else None,
        "zero_pct": (sum(1 for v in present if v == 0) / len(present) * 100.0 if present else None),
    }


@PROPERTY_SETTINGS
@given(
    rows=st.lists(st.tuples(st.integers(0, 2), VALUES), max_size=40),
    cuts=block_cuts(40),
)
def test_collections_and_percentages_match_plain_python(backend, rows, cuts):
    table = pa.table(
        {
            "k": pa.array([k for k, _ in rows], pa.int64()),
            "v": pa.array([float(v) if v is not None else None for _, v in rows], pa.float64()),
        }
    )
    aggs = [AsList("v"), CountDistinct("v"), MissingValuePercentage("v"), ZeroPercentage("v")]
    result = dataset_of(table, cuts).groupby("k").aggregate(*aggs).take_all()
    by_key = collections.defaultdict(list)
    for k, v in rows:
        by_key[k].append(float(v) if v is not None else None)
    assert [r["k"] for r in result] == sorted(by_key)
    for row in result:
        expected = _oracle(by_key[row["k"]])
        # preserve_order keeps the rows' order inside a group
        assert repr(row["list(v)"]) == repr(expected["list"])
        assert row["count_distinct(v)"] == expected["count_distinct"]
        assert row["missing_pct(v)"] == pytest.approx(expected["missing_pct"])
        assert row["zero_pct(v)"] == pytest.approx(expected["zero_pct"])


@PROPERTY_SETTINGS
@given(values=st.lists(st.sampled_from(["a", "b", "c", None]), max_size=40), cuts=block_cuts(40))
def test_value_counter_unique_and_top_k_match_counts(backend, values, cuts):
    pytest.importorskip("datasketches")
    ds = dataset_of(pa.table({"s": pa.array(values, pa.string())}), cuts)
    result = ds.aggregate(ValueCounter("s"), Unique("s"), ApproximateTopK("s", k=2))
    counts = collections.Counter(values)
    got = result["value_counter(s)"]
    if values:
        assert dict(zip(got["values"], got["counts"])) == dict(counts)
        assert got["values"] == list(dict.fromkeys(values))  # first seen first
    else:
        assert got is None
    assert sorted(result["unique(s)"], key=repr) == sorted(set(values), key=repr)
    top = result["approx_topk(s)"]
    if not values:  # no rows at all: no sketch, as in Ray Data
        assert top is None
        return
    present = collections.Counter(v for v in values if v is not None)
    # Exact for so few distinct values: the two most frequent, with their counts.
    assert [t["count"] for t in top] == sorted(present.values(), reverse=True)[:2]
    assert all(present[t["s"]] == t["count"] for t in top)


def test_unique_of_list_columns_whole_flattened_and_counted(backend):
    rows = [[1, 2], [2, 1], [1, 2], None, [3]]
    ds = sf.from_arrow(pa.table({"l": pa.array(rows, pa.list_(pa.int64()))}))
    whole = ds.aggregate(
        Unique("l"), CountDistinct("l"), Unique("l", encode_lists=True, alias_name="e")
    )
    assert sorted(whole["unique(l)"], key=repr) == sorted([[1, 2], [2, 1], None, [3]], key=repr)
    assert whole["count_distinct(l)"] == 3  # nulls left out
    assert sorted(whole["e"]) == [1, 2, 3]  # a null list has no elements


def test_new_aggregations_validate_their_columns():
    with pytest.raises(ValueError, match="You specified the column 'nope'"):
        sf.range(3).aggregate(AsList("nope"))
    with pytest.raises(TypeError, match="`name` must be provided"):
        AggregateFn(
            init=lambda k: 0, merge=lambda a, b: a, name=None, accumulate_row=lambda a, r: a
        )
