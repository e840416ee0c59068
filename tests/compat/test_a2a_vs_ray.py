"""The all-to-all operations side by side on Ray Data and shardflow: the same small code on
``ray.data`` and ``shardflow``, comparing rows (order-insensitive where Ray's order is
arbitrary), column names, dtypes and exception types.

Ray Data runs every shuffle as Ray tasks and actors, seconds per operation on a small
machine, so each test runs few Ray Data operations. Skipped when ``ray.data`` cannot be
imported; the join cases also need ``polars`` (Ray Data's join uses it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

rd = pytest.importorskip("ray.data")

from harness import covers, use_sort_shuffles

import shardflow as sf
import shardflow.aggregate as sf_agg


@pytest.fixture(scope="module")
def ray_data(ray_session):
    """Ray Data on the session's Ray, without progress bars."""
    context = rd.DataContext.get_current()
    previous = context.enable_progress_bars, context.shuffle_strategy
    context.enable_progress_bars = False
    use_sort_shuffles(context)
    yield rd
    context.enable_progress_bars, context.shuffle_strategy = previous


@pytest.fixture
def both(ray_data, fresh_context):
    """shardflow on its local backend next to Ray Data (the engines, not the backends, are
    compared here; tests/engine checks that shardflow's two backends agree)."""
    sf.init(backend="local")
    return ray_data


def ray_table(ds: Any) -> pa.Table:
    import ray

    tables = [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows or t.num_columns]
    # Ray's blocks may disagree on a column's type (null where a block held only nulls).
    return pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})


def canonical(value: Any) -> Any:
    import pandas as pd

    if value is None or value is pd.NA:  # Ray's NumPy batches may hand nulls back as pd.NA
        return ("~null",)
    if isinstance(value, float) and math.isnan(value):
        return ("~nan",)
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list):
        return tuple(sorted(map(repr, value)))
    return value


def _row(row: dict) -> dict:
    return {k: canonical(v) for k, v in row.items()}


def row_set(rows: list[dict]) -> list[tuple]:
    return sorted(tuple((k, repr(canonical(v))) for k, v in row.items()) for row in rows)


def type_name(arrow_type: pa.DataType) -> str:
    # Ray Data's join goes through polars and hands strings back as large_string; the
    # values are the same, so the two string types compare equal here.
    return "string" if arrow_type in (pa.string(), pa.large_string()) else str(arrow_type)


def assert_same_table(ray_out: pa.Table, sf_out: pa.Table, ordered: bool) -> None:
    assert sf_out.schema.names == ray_out.schema.names
    assert [type_name(t) for t in sf_out.schema.types] == [
        type_name(t) for t in ray_out.schema.types
    ]
    if ordered:
        assert [tuple(map(canonical, r.values())) for r in sf_out.to_pylist()] == [
            tuple(map(canonical, r.values())) for r in ray_out.to_pylist()
        ]
    else:
        assert row_set(sf_out.to_pylist()) == row_set(ray_out.to_pylist())


def raised(call: Callable[[], Any]) -> type:
    try:
        call()
    except Exception as exc:
        return type(exc)
    raise AssertionError("no exception raised")


def mixed_table() -> list[pa.Table]:
    """Three blocks with nulls, NaN, ties, strings."""
    rng = np.random.default_rng(0)
    n = 90
    k = rng.integers(0, 4, size=n).astype(object)
    k[::11] = None
    f = rng.normal(size=n).round(2)
    f[::13] = np.nan
    s = np.array(["a", "b", "c"], dtype=object)[rng.integers(0, 3, size=n)]
    s[::7] = None
    table = pa.table(
        {
            "id": np.arange(n),
            "k": pa.array(k.tolist(), pa.int64()),
            "f": pa.array(
                [None if i % 17 == 0 else float(v) for i, v in enumerate(f)], pa.float64()
            ),
            "s": pa.array(s.tolist(), pa.string()),
        }
    )
    return [table.slice(0, 30), table.slice(30, 45), table.slice(75)]


# -- sort ----------------------------------------------------------------------------------


@covers("Dataset.sort")
def test_sort_multi_key_nulls_and_nan_like_ray(both):
    blocks = mixed_table()
    keys, descending = ["s", "f", "id"], [True, False, True]
    ray_out = ray_table(both.from_arrow(blocks).sort(keys, descending=descending))
    sf_out = sf.from_arrow(blocks).sort(keys, descending=descending).to_arrow()
    assert_same_table(ray_out, sf_out, ordered=True)  # "id" breaks every tie


@covers("Dataset.sort", "Dataset.limit", "Dataset.take")
def test_sort_then_limit_like_ray(both):
    """sort followed by limit/take (planned as a top-k): Ray's rows and order, ties of the
    key ("k" repeats, nulls and NaN included) kept in input order."""
    blocks = mixed_table()
    for keys, descending in ((["k"], False), (["f"], True), (["s", "k"], [True, False])):
        ray_ds = both.from_arrow(blocks).sort(keys, descending=descending)
        sf_ds = sf.from_arrow(blocks).sort(keys, descending=descending)
        for k in (1, 7, 40):
            ray_out = ray_table(ray_ds.limit(k))
            assert_same_table(ray_out, sf_ds.limit(k).to_arrow(), ordered=True)
            assert [r["id"] for r in sf_ds.take(k)] == ray_out.column("id").to_pylist()


@covers("read_parquet", "Dataset.sort", "Dataset.take")
def test_sort_then_take_of_parquet_files_like_ray(both, tmp_path):
    """sort then take over Parquet files (shardflow reads the keys first and the winners'
    other columns after): Ray's rows and order. Ray Data orders ties across read tasks
    arbitrarily (shardflow keeps input order), so ``id`` breaks the ties here."""
    import pyarrow.parquet as pq

    for i, block in enumerate(mixed_table()):
        pq.write_table(block, tmp_path / f"part-{i}.parquet", row_group_size=10)
    cases = (
        (["k", "id"], False),
        (["f", "id"], [True, False]),
        (["s", "k", "id"], [True, False, False]),
    )
    for keys, descending in cases:
        ray_rows = both.read_parquet(str(tmp_path)).sort(keys, descending=descending).take(7)
        sf_rows = sf.read_parquet(str(tmp_path)).sort(keys, descending=descending).take(7)
        assert [_row(r) for r in sf_rows] == [_row(r) for r in ray_rows]


# -- groupby and aggregations --------------------------------------------------------------


@covers(
    "Dataset.groupby",
    "GroupedData.aggregate",
    "aggregate.Count",
    "aggregate.Sum",
    "aggregate.Min",
    "aggregate.Max",
    "aggregate.Mean",
    "aggregate.Std",
    "aggregate.AbsMax",
)
def test_groupby_aggregations_like_ray(both):
    from ray.data import aggregate as ray_agg

    blocks = mixed_table()

    def aggs(module):
        return [
            module.Count(),
            module.Count("f", ignore_nulls=True),
            module.Sum("id"),
            module.Min("f"),
            module.Max("f", ignore_nulls=False),
            module.Mean("id"),
            module.Std("id"),
            module.AbsMax("f"),
            module.Sum("f", ignore_nulls=False),
        ]

    # NaN values of "f" are replaced: Ray's NaN handling differs between its grouped and
    # global paths (see tests/engine/execution/exchange/test_a2a_groupby.py), so there is nothing to compare.
    clean = [
        b.set_column(
            2,
            "f",
            pa.array(
                [None if v is not None and math.isnan(v) else v for v in b.column("f").to_pylist()],
                pa.float64(),
            ),
        )
        for b in blocks
    ]
    ray_out = ray_table(
        both.from_arrow(clean).groupby(["k", "s"], num_partitions=2).aggregate(*aggs(ray_agg))
    )
    sf_out = sf.from_arrow(clean).groupby(["k", "s"]).aggregate(*aggs(sf_agg)).to_arrow()
    # Ray gives groups in no particular order; shardflow sorts them by key.
    assert_same_table(ray_out, sf_out, ordered=False)


@covers("Dataset.groupby", "GroupedData.aggregate", "aggregate.Count", "aggregate.Mean")
def test_groupby_dense_keys_like_ray(both):
    """Integer and string keys without nulls, Count/Sum/Mean over float64 without nulls: the
    dense-code path (np.bincount), many groups, one key and two (a string key alone takes
    Arrow's path)."""
    from ray.data import aggregate as ray_agg

    rng = np.random.default_rng(4)
    n = 3000
    table = pa.table(
        {
            "m": rng.integers(-50, 700, n),
            "s": pa.array(np.array(["b", "a", "cc", ""], dtype=object)[rng.integers(0, 4, n)]),
            "v": rng.integers(-400, 400, n) / 8.0,
        }
    )
    blocks = [table.slice(i * 1000, 1000) for i in range(3)]
    for keys in (["m"], ["s"], ["s", "m"]):
        ray_ds = both.from_arrow(blocks).groupby(keys)
        ray_out = ray_table(ray_ds.aggregate(ray_agg.Count(), ray_agg.Sum("v"), ray_agg.Mean("v")))
        sf_ds = sf.from_arrow(blocks).groupby(keys)
        sf_out = sf_ds.aggregate(sf_agg.Count(), sf_agg.Sum("v"), sf_agg.Mean("v")).to_arrow()
        assert_same_table(ray_out, sf_out, ordered=False)
        assert sf_out.select(keys).to_pylist() == sorted(
            sf_out.select(keys).to_pylist(), key=lambda r: tuple(r.values())
        )


@covers(
    "Dataset.aggregate",
    "aggregate.Quantile",
    "aggregate.Unique",
    "aggregate.Count",
    "aggregate.Sum",
    "aggregate.Min",
    "aggregate.Max",
    "aggregate.Mean",
    "aggregate.Std",
)
def test_global_aggregations_and_unique_like_ray(both):
    from ray.data import aggregate as ray_agg

    blocks = [
        pa.table({"x": pa.array([3, None, -7], pa.int64()), "y": pa.array([1.5, 2.5, None])}),
        pa.table({"x": pa.array([4, 4], pa.int64()), "y": pa.array([None, 0.25])}),
    ]

    def aggs(module):
        return [
            module.Count(),
            module.Sum("x"),
            module.Min("y"),
            module.Max("x"),
            module.Mean("y"),
            module.Std("x", ddof=0),
            module.AbsMax("x"),
            module.Quantile("x", q=0.25),
            module.Unique("x"),
            module.Unique("y"),
            module.Count("x", ignore_nulls=True),
            module.Mean("y", ignore_nulls=False),
        ]

    ray_result = both.from_arrow(blocks).aggregate(*aggs(ray_agg))
    sf_result = sf.from_arrow(blocks).aggregate(*aggs(sf_agg))
    assert list(sf_result) == list(ray_result)
    assert {k: canonical(v) for k, v in sf_result.items()} == {
        k: canonical(v) for k, v in ray_result.items()
    }


@covers("Dataset.aggregate")
def test_aggregations_of_no_rows_like_ray(both):
    from ray.data import aggregate as ray_agg

    empty = pa.table({"v": pa.array([], pa.float64()), "w": pa.array([], pa.int64())})

    def aggs(module):
        return [
            module.Count(),
            module.Count("v", ignore_nulls=True),
            module.Sum("v"),
            module.Sum("v", ignore_nulls=False),
            module.Min("w", ignore_nulls=False),
            module.Mean("v", ignore_nulls=False),
            module.Std("v"),
        ]

    ray_result = both.from_arrow(empty).aggregate(*aggs(ray_agg))
    sf_result = sf.from_arrow(empty).aggregate(*aggs(sf_agg))
    assert {k: canonical(v) for k, v in sf_result.items()} == {
        k: canonical(v) for k, v in ray_result.items()
    }


@covers("GroupedData.map_groups")
def test_map_groups_like_ray(both):
    blocks = mixed_table()

    def summary(batch):
        return {
            "s": batch["s"][:1],
            "n": np.array([len(batch["id"])]),
            "top": np.array([batch["id"].max()]),
        }

    # Grouped by a string key (with nulls): an integer key with nulls becomes float in the
    # null group's NumPy batch, and the engines then differ only in how they combine int and
    # float output batches (one block per partition here, one per group in Ray).
    ray_rows = both.from_arrow(blocks).groupby("s", num_partitions=2).map_groups(summary).take_all()
    sf_rows = sf.from_arrow(blocks).groupby("s").map_groups(summary).take_all()
    assert row_set(sf_rows) == row_set(ray_rows)


# -- joins ---------------------------------------------------------------------------------

JOIN_LEFT = pa.table(
    {
        "id": pa.array([1, 1, 2, None, 5], pa.int64()),
        "a": ["p", "q", "r", "s", "t"],
        "v": [1.0, 2.0, 3.0, 4.0, 5.0],
    }
)
JOIN_RIGHT = pa.table(
    {
        "id": pa.array([1, 2, 2, None, 7], pa.int64()),
        "b": [10, 20, 30, 40, 50],
        "v": [0.5, 0.25, 0.125, 0.0, -1.0],
    }
)


# Three of the eight types (Ray Data takes seconds per join here); tests/engine checks all
# eight against an oracle.
@pytest.mark.slow
@pytest.mark.parametrize("join_type", ["inner", "full_outer", "left_semi"])
@covers("Dataset.join")
def test_join_like_ray(both, join_type):
    pytest.importorskip("polars")
    kwargs = {"on": ("id",), "left_suffix": "_l", "right_suffix": "_r"}
    ray_out = ray_table(
        both.from_arrow(JOIN_LEFT).join(both.from_arrow(JOIN_RIGHT), join_type, 2, **kwargs)
    )
    sf_out = (
        sf.from_arrow(JOIN_LEFT).join(sf.from_arrow(JOIN_RIGHT), join_type, 2, **kwargs).to_arrow()
    )
    assert_same_table(ray_out, sf_out, ordered=False)


# -- splits, zip, union, repartition -------------------------------------------------------


@covers(
    "Dataset.split",
    "Dataset.split_at_indices",
    "Dataset.split_proportionately",
    "Dataset.train_test_split",
)
def test_splits_like_ray(both):
    # Sizes and the rows of all splits together: which rows land in which split follows the
    # block order, which Ray Data does not preserve by default.
    def sizes(module):
        ds = module.range(20, override_num_blocks=3)
        splits = [
            ds.split(3, equal=True),
            ds.split_at_indices([3, 3, 15, 40]),
            ds.split_proportionately([0.25, 0.5]),
            list(ds.train_test_split(0.2)),
            list(ds.train_test_split(6)),
        ]
        # equal=True drops rows, which ones depending on the block order: sizes only there.
        return (
            [[d.count() for d in group] for group in splits],
            [sorted(r["id"] for d in group for r in d.take_all()) for group in splits[1:]],
        )

    assert sizes(sf) == sizes(both)


def test_split_proportionately_small_share_like_ray(both):
    def sizes(module):
        return [d.count() for d in module.range(10).split_proportionately([0.3, 0.05])]

    assert sizes(sf) == sizes(both)


def _zip_inputs(module, second_name):
    a = module.from_arrow(pa.table({"id": np.arange(6), "x": np.arange(6) * 2}))
    b = module.from_arrow([pa.table({"id": np.arange(3)}), pa.table({"id": np.arange(3, 6)})])
    c = module.from_arrow(pa.table({second_name: np.arange(6) * 3, "y": np.arange(6) * 4}))
    return a, b, c


@covers("Dataset.zip", "Dataset.union")
def test_zip_and_union_like_ray(both):
    ray_a, ray_b, ray_c = _zip_inputs(both, "z")
    sf_a, sf_b, sf_c = _zip_inputs(sf, "z")
    assert_same_table(
        ray_table(ray_a.zip(ray_b, ray_c)), sf_a.zip(sf_b, sf_c).to_arrow(), ordered=True
    )
    # Ray interleaves union inputs; shardflow gives input 0's rows first (preserve_order).
    assert_same_table(
        ray_table(ray_a.union(ray_c.rename_columns({"z": "id", "y": "x"}))),
        sf_a.union(sf_c.rename_columns({"z": "id", "y": "x"})).to_arrow(),
        ordered=False,
    )


def test_zip_duplicate_names_like_ray(both):
    ray_a, ray_b, ray_c = _zip_inputs(both, "x")
    sf_a, sf_b, sf_c = _zip_inputs(sf, "x")
    assert_same_table(
        ray_table(ray_a.zip(ray_b, ray_c)), sf_a.zip(sf_b, sf_c).to_arrow(), ordered=True
    )


@covers("Dataset.repartition", "Dataset.random_shuffle")
def test_repartition_like_ray(both):
    import ray

    def blocks(ds):
        refs = ds.to_arrow_refs()
        return [
            t.num_rows
            for t in (ray.get(refs) if refs and not isinstance(refs[0], pa.Table) else refs)
        ]

    ray_ds = both.range(10, override_num_blocks=2).repartition(3)
    sf_ds = sf.range(10, override_num_blocks=2).repartition(3)
    assert [r["id"] for r in sf_ds.take_all()] == [r["id"] for r in ray_ds.take_all()]
    assert sorted(blocks(sf_ds)) == sorted(blocks(ray_ds))
    shuffled = both.range(10).random_shuffle(seed=0).take_all()
    assert sorted(r["id"] for r in sf.range(10).random_shuffle(seed=0).take_all()) == sorted(
        r["id"] for r in shuffled
    )


# -- exceptions ----------------------------------------------------------------------------

EAGER_ERRORS = {
    "split_zero": lambda m: m.range(5).split(0),
    "split_at_unsorted": lambda m: m.range(5).split_at_indices([3, 1]),
    "split_at_negative": lambda m: m.range(5).split_at_indices([-1]),
    "proportions_sum": lambda m: m.range(5).split_proportionately([0.5, 0.5]),
    "proportions_zero": lambda m: m.range(5).split_proportionately([0]),
    "test_size_float": lambda m: m.range(5).train_test_split(1.0),
    "test_size_int": lambda m: m.range(5).train_test_split(5),
    "sort_none": lambda m: m.range(5).sort(None),
    "sort_descending_length": lambda m: m.range(5).sort(["id"], descending=[True, False]),
    "sort_boundaries_type": lambda m: m.range(5).sort("id", boundaries=["a"]),
    "sample_fraction": lambda m: m.range(5).random_sample(1.5),
    "shuffle_seed_type": lambda m: m.range(5).random_shuffle(seed="x"),
    "repartition_both": lambda m: m.range(5).repartition(2, target_num_rows_per_block=2),
    "repartition_neither": lambda m: m.range(5).repartition(),
    "groupby_partitions": lambda m: m.range(5).groupby("id", num_partitions=0).count(),
    "join_type": lambda m: m.range(5).join(m.range(5), "cross", 2),
    "sum_no_column": lambda m: m.range(5).sum([]),
}


@pytest.mark.parametrize("case", sorted(EAGER_ERRORS))
@covers("Dataset.random_sample")
def test_bad_arguments_raise_the_same_exception_type(both, case):
    assert (
        raised(lambda: EAGER_ERRORS[case](sf))
        is raised(lambda: EAGER_ERRORS[case](both))
        is ValueError
    )


def test_run_time_errors_are_value_errors_on_both(both):
    def zip_counts(module):
        return (
            module.from_items([{"a": i} for i in range(3)])
            .zip(module.from_items([{"b": i} for i in range(4)]))
            .take_all()
        )

    def unknown_group_key(module):
        return module.from_items([{"a": 1}]).groupby("zz").count().take_all()

    for call in (zip_counts, unknown_group_key):
        assert issubclass(raised(lambda call=call: call(sf)), ValueError)
        assert issubclass(raised(lambda call=call: call(both)), ValueError)
