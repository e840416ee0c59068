"""random_shuffle, randomize_block_order, random_sample, repartition, union and zip:
permutations, seeds (same seed, same result on every run and on both backends), block
layouts, row order; against NumPy and plain Python."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from a2a_support import (
    PROPERTY_SETTINGS,
    block_cuts,
    blocks_of,
    dataset_of,
    group_rows,
    oracle_sort,
)
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf


def numbered(n, cuts):
    return dataset_of(pa.table({"x": np.arange(n, dtype=np.int64)}), cuts)


def xs(ds):
    return [r["x"] for r in ds.take_all()]


# -- random_shuffle ----------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=80),
    cuts=block_cuts(80),
    seed=st.integers(min_value=0, max_value=2**32),
    num_blocks=st.sampled_from([None, 1, 3, 7]),
)
def test_random_shuffle_is_a_seeded_permutation(backend, n, cuts, seed, num_blocks):
    ds = numbered(n, cuts).random_shuffle(seed=seed, num_blocks=num_blocks)
    first = xs(ds)
    assert sorted(first) == list(range(n))
    assert xs(ds) == first  # the same dataset run again
    assert xs(numbered(n, cuts).random_shuffle(seed=seed, num_blocks=num_blocks)) == first


def test_random_shuffle_mixes_rows_of_every_block(backend):
    ds = sf.from_arrow([pa.table({"x": np.arange(i * 100, (i + 1) * 100)}) for i in range(10)])
    blocks = blocks_of(ds.random_shuffle(seed=1))
    assert len(blocks) == 10
    for block in blocks:
        sources = set((block.column("x").to_numpy() // 100).tolist())
        assert len(sources) >= 8  # each output block draws from (nearly) every input block
    order = np.concatenate([b.column("x").to_numpy() for b in blocks])
    # Far from the input order: few rows stay next to their input neighbour.
    assert np.mean(np.diff(order) == 1) < 0.05


def test_random_shuffle_seeds_differ_and_unseeded_runs_differ(backend):
    ds = sf.range(500, override_num_blocks=4)
    a = [r["id"] for r in ds.random_shuffle(seed=1).take_all()]
    b = [r["id"] for r in ds.random_shuffle(seed=2).take_all()]
    c = [r["id"] for r in ds.random_shuffle().take_all()]
    d = [r["id"] for r in ds.random_shuffle().take_all()]
    assert a != b and c != d
    assert sorted(a) == sorted(b) == sorted(c) == list(range(500))


def test_random_shuffle_keeps_rows_whole_and_types(backend):
    table = pa.table(
        {"x": np.arange(50), "s": [str(i) for i in range(50)], "l": [[i, i + 1] for i in range(50)]}
    )
    out = dataset_of(table, [10, 30]).random_shuffle(seed=4).to_arrow()
    assert out.schema == table.schema
    for row in out.to_pylist():
        assert row["s"] == str(row["x"]) and row["l"] == [row["x"], row["x"] + 1]


# -- seeded operations: identical on both backends ----------------------------------------


def _seeded_results():
    base = sf.from_arrow([pa.table({"x": np.arange(i * 37, (i + 1) * 37)}) for i in range(5)])
    train, test = base.train_test_split(0.2, shuffle=True, seed=9)
    return {
        "shuffle": xs(base.random_shuffle(seed=123)),
        "shuffle_blocks": xs(base.random_shuffle(seed=5, num_blocks=3)),
        "block_order": xs(base.randomize_block_order(seed=7)),
        "sample": xs(base.random_sample(0.3, seed=11)),
        "shuffled_repartition": xs(base.repartition(4, shuffle=True)),
        "train_test": (xs(train), xs(test)),
    }


def test_seeded_operations_identical_on_both_backends_and_across_runs(ray_session, fresh_context):
    sf.init(backend="local")
    local_first = _seeded_results()
    local_again = _seeded_results()
    sf.init(backend="ray")
    on_ray = _seeded_results()
    sf.init(backend="local")
    assert local_first == local_again
    assert on_ray == local_first


# -- randomize_block_order and random_sample ----------------------------------------------


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=60),
    cuts=block_cuts(),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_randomize_block_order_moves_whole_blocks(backend, n, cuts, seed):
    ds = numbered(n, cuts)
    before = [b.column("x").to_pylist() for b in blocks_of(ds) if b.num_rows]
    after = [
        b.column("x").to_pylist()
        for b in blocks_of(ds.randomize_block_order(seed=seed))
        if b.num_rows
    ]
    assert sorted(after) == sorted(before)
    assert xs(ds.randomize_block_order(seed=seed)) == [v for b in after for v in b]


def test_randomize_block_order_permutes_blocks(backend):
    ds = sf.range(100, override_num_blocks=10)
    firsts = [b.column("id")[0].as_py() for b in blocks_of(ds.randomize_block_order(seed=0))]
    assert sorted(firsts) == list(range(0, 100, 10)) and firsts != sorted(firsts)


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=200),
    cuts=block_cuts(200),
    seed=st.integers(min_value=0, max_value=1000),
    fraction=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]),
)
def test_random_sample_is_a_seeded_subsequence(backend, n, cuts, seed, fraction):
    ds = numbered(n, cuts)
    got = xs(ds.random_sample(fraction, seed=seed))
    assert got == sorted(set(got)) and set(got) <= set(range(n))  # rows in order, none twice
    assert xs(ds.random_sample(fraction, seed=seed)) == got
    if fraction == 0.0:
        assert got == []
    if fraction == 1.0:
        assert got == list(range(n))


def test_random_sample_fraction_is_close(backend):
    got = sf.range(20000, override_num_blocks=8).random_sample(0.25, seed=2).count()
    # Binomial(20000, 0.25): standard deviation ~61.
    assert abs(got - 5000) < 400


# -- repartition ---------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=80),
    cuts=block_cuts(80),
    k=st.integers(min_value=1, max_value=9),
)
def test_repartition_keeps_order_and_evens_blocks(backend, n, cuts, k):
    ds = numbered(n, cuts).repartition(k)
    blocks = blocks_of(ds)
    sizes = [b.num_rows for b in blocks]
    if n:
        assert len(blocks) == k
        assert max(sizes) - min(sizes) <= 1
    assert [v for b in blocks for v in b.column("x").to_pylist()] == list(range(n))
    assert ds.materialize().num_blocks() == (k if n else len(blocks))


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=80),
    cuts=block_cuts(80),
    k=st.integers(min_value=1, max_value=9),
)
def test_repartition_shuffle_keeps_every_row(backend, n, cuts, k):
    source = numbered(n, cuts)
    num_inputs = len([b for b in blocks_of(source) if b.num_rows])
    blocks = blocks_of(source.repartition(k, shuffle=True))
    if n:
        assert len(blocks) == k
        # Each output block takes an even share (within one row) of every input block.
        sizes = [b.num_rows for b in blocks]
        assert max(sizes) - min(sizes) <= num_inputs
    got = [v for b in blocks if b.num_rows for v in b.column("x").to_pylist()]
    assert sorted(got) == list(range(n))


@pytest.mark.parametrize("op", ["random_shuffle", "repartition_shuffle"])
def test_shuffles_of_empty_input_keep_the_schema(backend, op):
    empty = sf.from_arrow(pa.table({"x": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    ds = (
        empty.random_shuffle(seed=1)
        if op == "random_shuffle"
        else empty.repartition(2, shuffle=True)
    )
    assert ds.to_arrow().schema == empty.to_arrow().schema
    assert ds.schema().names == ["x", "s"]


@PROPERTY_SETTINGS
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "k": st.one_of(st.none(), st.integers(min_value=0, max_value=5)),
                "g": st.sampled_from(["a", "b"]),
                "v": st.integers(min_value=-(2**40), max_value=2**40),
            }
        ),
        max_size=60,
    ),
    cuts=block_cuts(),
    k=st.integers(min_value=1, max_value=5),
    keys=st.sampled_from([["k"], ["k", "g"]]),
    sort=st.booleans(),
)
def test_repartition_by_keys_puts_equal_keys_in_one_block(backend, rows, cuts, k, keys, sort):
    schema = pa.schema([("k", pa.int64()), ("g", pa.string()), ("v", pa.int64())])
    ds = dataset_of(pa.Table.from_pylist(rows, schema=schema), cuts).repartition(
        k, keys=keys, sort=sort
    )
    blocks = [b.to_pylist() for b in blocks_of(ds)]
    home = {}
    for i, block in enumerate(blocks):
        for key in group_rows(block, keys):
            assert home.setdefault(key, i) == i, f"key {key} in blocks {home[key]} and {i}"
        if sort:
            expected_keys = [
                [r[c] for c in keys] for r in oracle_sort(block, keys, [False] * len(keys))
            ]
            assert [[r[c] for c in keys] for r in block] == expected_keys
    assert len(blocks) <= k
    assert sorted(r["v"] for b in blocks for r in b) == sorted(r["v"] for r in rows)


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=80),
    cuts=block_cuts(80),
    target=st.integers(min_value=1, max_value=30),
)
def test_repartition_by_rows_per_block(backend, n, cuts, target):
    blocks = [
        b
        for b in blocks_of(numbered(n, cuts).repartition(target_num_rows_per_block=target))
        if b.num_rows
    ]
    sizes = [b.num_rows for b in blocks]
    assert all(s == target for s in sizes[:-1]) and (not sizes or 0 < sizes[-1] <= target)
    assert [v for b in blocks for v in b.column("x").to_pylist()] == list(range(n))


# -- union and zip ---------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4),
    cuts=st.lists(block_cuts(30), min_size=4, max_size=4),
)
def test_union_gives_each_input_in_turn(backend, sizes, cuts):
    datasets, expected, start = [], [], 0
    for size, cut in zip(sizes, cuts):
        datasets.append(
            dataset_of(pa.table({"x": np.arange(start, start + size, dtype=np.int64)}), cut)
        )
        expected += list(range(start, start + size))
        start += size
    # preserve_order defaults to True in shardflow: input 0's rows come first (Ray Data
    # interleaves the inputs).
    assert xs(datasets[0].union(*datasets[1:])) == expected


def test_union_with_exchanges_on_each_side(backend):
    left = sf.range(30, override_num_blocks=3).random_shuffle(seed=1).sort("id", descending=True)
    right = sf.range(5).map(lambda r: {"id": r["id"] + 100})
    got = [r["id"] for r in left.union(right).take_all()]
    assert got == list(range(29, -1, -1)) + [100, 101, 102, 103, 104]
    assert left.union(right).groupby(None).count().take_all() == [{"count()": 35}]


@PROPERTY_SETTINGS
@given(
    n=st.integers(min_value=0, max_value=60), cuts=st.lists(block_cuts(), min_size=3, max_size=3)
)
def test_zip_combines_rows_whatever_the_block_layouts(backend, n, cuts):
    a = dataset_of(pa.table({"x": np.arange(n, dtype=np.int64)}), cuts[0])
    b = dataset_of(pa.table({"y": np.arange(n, dtype=np.int64) * 2}), cuts[1])
    c = dataset_of(pa.table({"z": np.arange(n, dtype=np.int64) * 3}), cuts[2])
    got = a.zip(b, c).take_all()
    assert got == [{"x": i, "y": 2 * i, "z": 3 * i} for i in range(n)]


def test_zip_duplicate_names_counted_per_name(backend):
    # Ray Data: range(2).zip(range(2), range(2)) -> id, id_1, id_2; a{id, x}.zip(b{id},
    # c{x, y}) -> id, x, id_1, x_1, y.
    a = sf.from_items([{"id": 0, "x": 1}])
    b = sf.from_items([{"id": 2}])
    c = sf.from_items([{"x": 3, "y": 4}])
    assert sf.range(1).zip(sf.range(1), sf.range(1)).take_all() == [{"id": 0, "id_1": 0, "id_2": 0}]
    assert a.zip(b, c).take_all() == [{"id": 0, "x": 1, "id_1": 2, "x_1": 3, "y": 4}]


def test_zip_after_an_exchange(backend):
    a = sf.range(40, override_num_blocks=4).sort("id", descending=True)
    b = sf.range(40, override_num_blocks=3).map_batches(lambda batch: {"y": batch["id"] * 10})
    got = a.zip(b).take_all()
    assert got == [{"id": 39 - i, "y": 10 * i} for i in range(40)]


def test_zip_of_different_row_counts_fails_when_run(backend):
    a = sf.range(5)
    b = sf.range(6).filter(lambda r: r["id"] != 3)  # 5 rows, unknown until run
    assert a.zip(b).count() == 5
    c = sf.range(7).filter(lambda r: r["id"] != 3)  # 6 rows: found only while running
    with pytest.raises(ValueError, match="different number of rows"):
        a.zip(c).take_all()
