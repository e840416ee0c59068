"""split, split_at_indices, split_proportionately and train_test_split: no row lost or
duplicated, sizes as documented, rows in order; both backends."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from a2a_support import PROPERTY_SETTINGS, block_cuts, dataset_of
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf


def ids(ds):
    return [r["x"] for r in ds.take_all()]


def numbered(n, cuts):
    return dataset_of(pa.table({"x": np.arange(n, dtype=np.int64)}), cuts)


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=60),
    cuts=block_cuts(),
    k=st.integers(min_value=1, max_value=8),
    equal=st.booleans(),
)
def test_split_sizes_and_order(backend, n, cuts, k, equal):
    parts = numbered(n, cuts).split(k, equal=equal)
    assert len(parts) == k
    sizes = [p.count() for p in parts]
    got = [v for p in parts for v in ids(p)]
    if equal:
        # Every split gets n // k rows; the remainder is dropped, as in Ray Data.
        assert sizes == [n // k] * k
        assert got == list(range(n // k * k))
    else:
        # shardflow differs from Ray Data (which splits by blocks): sizes differ by at most
        # one row, and split i holds the rows after split i-1.
        assert max(sizes) - min(sizes) <= 1
        assert got == list(range(n))


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=60),
    cuts=block_cuts(),
    indices=st.lists(st.integers(min_value=0, max_value=80), max_size=5).map(sorted),
)
def test_split_at_indices(backend, n, cuts, indices):
    parts = numbered(n, cuts).split_at_indices(indices)
    bounds = [0] + [min(i, n) for i in indices] + [n]
    assert [ids(p) for p in parts] == [list(range(lo, hi)) for lo, hi in itertools.pairwise(bounds)]


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=60),
    cuts=block_cuts(),
    proportions=st.lists(st.sampled_from([0.1, 0.2, 0.25, 0.3]), min_size=1, max_size=3),
)
def test_split_proportionately_loses_nothing(backend, n, cuts, proportions):
    # Ray Data's rule: cut at int(n * cumulative proportion), then move cuts forward so that
    # no split is empty; when the rows cannot allow that, a ValueError.
    indices = [int(n * c) for c in np.cumsum(proportions)]
    taken = 0
    for i in range(len(indices) - 2, -1, -1):
        indices[i] -= taken
        if indices[i] == indices[i + 1]:
            taken += 1
            indices[i] -= 1
    if any(i <= 0 for i in indices):
        with pytest.raises(ValueError, match="non-empty splits"):
            numbered(n, cuts).split_proportionately(proportions)
        return
    parts = numbered(n, cuts).split_proportionately(proportions)
    assert len(parts) == len(proportions) + 1
    assert [v for p in parts for v in ids(p)] == list(range(n))
    ends = [sum(p.count() for p in parts[: i + 1]) for i in range(len(proportions))]
    assert ends == indices


def test_split_proportionately_gives_no_empty_split_when_rows_allow(backend):
    assert [p.count() for p in sf.range(10).split_proportionately([0.3, 0.05])] == [2, 1, 7]


def test_train_test_split_by_fraction_and_count(backend):
    ds = sf.range(10, override_num_blocks=3)
    train, test = ds.train_test_split(0.3)
    assert [r["id"] for r in train.take_all()] == list(range(7))
    assert [r["id"] for r in test.take_all()] == [7, 8, 9]
    train, test = ds.train_test_split(4)
    assert (train.count(), test.count()) == (6, 4)


def test_train_test_split_shuffled_is_seeded_permutation(backend):
    ds = sf.range(100, override_num_blocks=4)
    train, test = ds.train_test_split(0.25, shuffle=True, seed=3)
    a = [r["id"] for r in train.take_all()] + [r["id"] for r in test.take_all()]
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert test.count() == 25
    _, test2 = ds.train_test_split(0.25, shuffle=True, seed=3)
    assert [r["id"] for r in test2.take_all()] == [r["id"] for r in test.take_all()]


def test_splits_are_materialized_and_reusable(backend):
    ds = sf.range(12, override_num_blocks=3).map_batches(lambda b: {"id": b["id"]})
    parts = ds.split(3)
    assert [p.count() for p in parts] == [4, 4, 4]
    assert [r["id"] for r in parts[1].take_all()] == [4, 5, 6, 7]
    assert [r["id"] for r in parts[1].map(lambda r: {"id": r["id"] * 2}).take_all()] == [
        8,
        10,
        12,
        14,
    ]
    # Splits keep the columns and types of the input.
    assert parts[2].schema().names == ["id"]
    assert parts[2].to_arrow().schema.field("id").type == pa.int64()
