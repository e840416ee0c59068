"""Property tests: batching, limits and expression filters over random inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf

# The backend fixture is set up once per test, not per example, which is what we want.
PROPERTY_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

block_sizes = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=8)


def _blocks(sizes):
    tables, start = [], 0
    for size in sizes:
        tables.append(pa.table({"x": np.arange(start, start + size, dtype=np.int64)}))
        start += size
    return tables, start


@PROPERTY_SETTINGS
@given(
    sizes=block_sizes,
    batch_size=st.integers(min_value=1, max_value=50),
    drop_last=st.booleans(),
    prefetch=st.integers(min_value=0, max_value=3),
)
def test_iter_batches_gives_all_rows_in_order(backend, sizes, batch_size, drop_last, prefetch):
    tables, total = _blocks(sizes)
    ds = sf.from_arrow(tables)
    batches = list(
        ds.iter_batches(batch_size=batch_size, drop_last=drop_last, prefetch_batches=prefetch)
    )
    lengths = [len(b["x"]) for b in batches]
    expected_rows = total - (total % batch_size if drop_last else 0)
    assert sum(lengths) == expected_rows
    # every batch is full except, without drop_last, the last one
    assert all(n == batch_size for n in lengths[:-1])
    if lengths:
        assert 0 < lengths[-1] <= batch_size
        assert not drop_last or lengths[-1] == batch_size
    got = np.concatenate([b["x"] for b in batches]) if batches else np.array([], dtype=np.int64)
    np.testing.assert_array_equal(got, np.arange(expected_rows))


@PROPERTY_SETTINGS
@given(sizes=block_sizes, batch_size=st.integers(min_value=1, max_value=30))
def test_map_batches_sees_exact_batch_sizes_per_task(backend, sizes, batch_size):
    tables, total = _blocks(sizes)
    ds = sf.from_arrow(tables).map_batches(
        lambda b: {"x": b["x"], "n": np.full(len(b["x"]), len(b["x"]))}, batch_size=batch_size
    )
    out = ds.to_pandas() if total else pd.DataFrame({"x": [], "n": []})
    assert out["x"].tolist() == list(range(total))
    # each input block is one task; within a task, batches are full except the last
    offset = 0
    for size in sizes:
        seen = out["n"].iloc[offset : offset + size].tolist()
        full, rest = divmod(size, batch_size)
        assert seen == [batch_size] * (full * batch_size) + [rest] * rest
        offset += size


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=300),
    k=st.integers(min_value=0, max_value=350),
    num_blocks=st.integers(min_value=1, max_value=12),
)
def test_limit_equals_first_rows(backend, n, k, num_blocks):
    ds = sf.range(n, override_num_blocks=num_blocks)
    assert ds.limit(k).take_all() == [{"id": i} for i in range(min(n, k))]
    assert ds.limit(k).count() == min(n, k)


ops = st.sampled_from([">", ">=", "<", "<=", "==", "!="])


def _compare(left, op, value):
    return {
        ">": left > value,
        ">=": left >= value,
        "<": left < value,
        "<=": left <= value,
        "==": left == value,
        "!=": left != value,
    }[op]


@PROPERTY_SETTINGS
@given(
    values=st.lists(st.integers(min_value=-50, max_value=50), min_size=0, max_size=60),
    op1=ops,
    t1=st.integers(min_value=-60, max_value=60),
    op2=ops,
    t2=st.integers(min_value=-60, max_value=60),
    combine=st.sampled_from(["and", "or", "not"]),
    num_blocks=st.integers(min_value=1, max_value=5),
)
def test_filter_expression_equals_pandas(backend, values, op1, t1, op2, t2, combine, num_blocks):
    df = pd.DataFrame({"a": values, "b": values[::-1]}, dtype="int64")
    left, right = _compare(sf.col("a"), op1, t1), _compare(sf.col("b"), op2, t2)
    mask_left, mask_right = _compare(df.a, op1, t1), _compare(df.b, op2, t2)
    expr, mask = {
        "and": (left & right, mask_left & mask_right),
        "or": (left | right, mask_left | mask_right),
        "not": (~left, ~mask_left),
    }[combine]
    if not values:
        ds = sf.from_items([])
        assert ds.filter(expr).take_all() == []
        return
    ds = sf.from_pandas(df, override_num_blocks=min(num_blocks, len(values)))
    out = ds.filter(expr).to_pandas()
    expected = df[mask].reset_index(drop=True)
    assert out["a"].tolist() == expected["a"].tolist()
    assert out["b"].tolist() == expected["b"].tolist()


@pytest.mark.parametrize("seed", [0, 1])
def test_rebatching_matches_numpy_split(backend, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 500, size=20).tolist()
    tables, total = _blocks(sizes)
    batch_size = int(rng.integers(1, 300))
    batches = list(sf.from_arrow(tables).iter_batches(batch_size=batch_size))
    expected = list(np.array_split(np.arange(total), range(batch_size, total, batch_size)))
    assert len(batches) == len(expected)
    for got, want in zip(batches, expected):
        np.testing.assert_array_equal(got["x"], want)
