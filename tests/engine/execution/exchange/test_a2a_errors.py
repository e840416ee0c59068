"""Bad input to the all-to-all operations: a ValueError (or Ray Data's type) whose message
says what is wrong, raised when the call is made where the schema is known, else when the
dataset runs; both backends where running is involved."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.aggregate import AbsMax, Count, Mean, Quantile, Std, Sum


@pytest.fixture
def ds():
    return sf.from_items([{"a": 1, "s": "x"}, {"a": 2, "s": "y"}])


def opaque(ds):
    """The same rows behind a map, so the schema is only known once the dataset runs."""
    return ds.map_batches(lambda batch: batch)


# -- unknown columns ------------------------------------------------------------------------

UNKNOWN_COLUMN_CALLS = {
    "sort": lambda d: d.sort("zz"),
    "sort_second_key": lambda d: d.sort(["a", "zz"]),
    "groupby": lambda d: d.groupby("zz").count(),
    "groupby_agg_column": lambda d: d.groupby("a").sum("zz"),
    "repartition_keys": lambda d: d.repartition(2, keys=["zz"]),
    "join_left": lambda d: d.join(d, "inner", 2, on=("zz",)),
    "join_right": lambda d: d.join(d, "inner", 2, on=("a",), right_on=("zz",)),
    "aggregate": lambda d: d.aggregate(Count("zz")),
    "map_groups": lambda d: d.groupby("zz").map_groups(lambda b: b),
}


@pytest.mark.parametrize("call", sorted(UNKNOWN_COLUMN_CALLS))
def test_unknown_column_is_named_at_call_time(ds, call):
    with pytest.raises(ValueError, match=r"'zz'.*(columns|column).*\['a', 's'\]"):
        result = UNKNOWN_COLUMN_CALLS[call](ds)
        result.take_all()


@pytest.mark.parametrize(
    "call",
    [
        "groupby",
        "groupby_agg_column",
        "join_left",
        "join_right",
        "aggregate",
        "map_groups",
        "sort",
        "repartition_keys",
    ],
)
def test_unknown_column_is_named_at_run_time(backend, ds, call):
    with pytest.raises(ValueError, match=r"'zz'.*\['a', 's'\]"):
        UNKNOWN_COLUMN_CALLS[call](opaque(ds)).take_all()


@pytest.mark.parametrize("method", ["sum", "min", "max", "mean", "std", "unique"])
def test_global_aggregation_of_unknown_column(ds, method):
    with pytest.raises(ValueError, match=r"zz"):
        getattr(ds, method)("zz")


# -- aggregating a non-numeric column -------------------------------------------------------


@pytest.mark.parametrize(
    "agg, name",
    [
        (Sum("s"), "sum(s)"),
        (Mean("s"), "mean(s)"),
        (Std("s"), "std(s)"),
        (AbsMax("s"), "abs_max(s)"),
        (Quantile("s"), "quantile(s)"),
    ],
)
def test_numeric_aggregation_of_strings_names_aggregation_and_column(ds, agg, name):
    with pytest.raises(
        ValueError, match=rf"{name.replace('(', '[(]').replace(')', '[)]')}.*column 's'.*string"
    ):
        ds.aggregate(agg)
    with pytest.raises(ValueError, match=r"column 's'"):
        ds.groupby("a").aggregate(agg).take_all()


@pytest.mark.parametrize("method", ["sum", "mean", "std"])
def test_numeric_shortcut_of_strings_at_run_time(backend, ds, method):
    with pytest.raises(ValueError, match=rf"{method}[(]s[)].*column 's'"):
        getattr(opaque(ds), method)("s")
    with pytest.raises(ValueError, match=rf"{method}[(]s[)].*column 's'"):
        getattr(opaque(ds).groupby("a"), method)("s").take_all()


def test_aggregate_needs_aggregations(ds):
    with pytest.raises(ValueError, match="at least one aggregation"):
        ds.aggregate()
    with pytest.raises(TypeError, match="str"):
        ds.aggregate("sum")
    with pytest.raises(TypeError, match="function"):
        ds.groupby("a").map_groups(5)
    with pytest.raises(ValueError, match="q must be between 0 and 1"):
        Quantile("a", q=1.5)


# -- splits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1])
def test_split_count_must_be_positive(n):
    with pytest.raises(ValueError, match=f"number of splits {n} is not positive"):
        sf.range(5).split(n)
    with pytest.raises(ValueError, match="not positive"):
        sf.range(5).split(n, equal=True)


def test_split_bad_arguments():
    ds = sf.range(10)
    with pytest.raises(TypeError, match="int"):
        ds.split("2")
    with pytest.raises(ValueError, match="locality_hints"):
        ds.split(2, locality_hints=["a"])
    with pytest.raises(ValueError, match="non-negative"):
        ds.split_at_indices([-1, 2])
    with pytest.raises(ValueError, match="sorted"):
        ds.split_at_indices([3, 1])
    with pytest.raises(ValueError, match="sum to less than 1"):
        ds.split_proportionately([0.5, 0.5])
    with pytest.raises(ValueError, match="greater than 0"):
        ds.split_proportionately([0.2, 0])
    with pytest.raises(ValueError, match="non-empty"):
        ds.split_proportionately([])


def test_equal_split_of_fewer_rows_than_splits_gives_empty_splits():
    # As in Ray Data: equal=True drops the remainder, here every row.
    assert [d.count() for d in sf.range(2).split(3, equal=True)] == [0, 0, 0]
    assert [d.count() for d in sf.range(7).split(3, equal=True)] == [2, 2, 2]


@pytest.mark.parametrize(
    "test_size, match",
    [
        (0, "test_size"),
        (-1, "test_size"),
        (10, "smaller than the size of the dataset"),
        (11, "smaller than the size"),
        (0.0, "bigger than 0 and smaller than 1"),
        (1.0, "bigger than 0 and smaller than 1"),
        (1.5, "bigger than 0 and smaller than 1"),
    ],
)
def test_train_test_split_bad_sizes(test_size, match):
    with pytest.raises(ValueError, match=match):
        sf.range(10).train_test_split(test_size)


def test_train_test_split_size_of_another_type_is_a_type_error():
    # Ray Data's type and words.
    with pytest.raises(TypeError, match="`test_size` must be int or float"):
        sf.range(10).train_test_split("a")


# -- zip, join, union ----------------------------------------------------------------------------


def test_zip_of_different_row_counts(backend):
    with pytest.raises(ValueError, match="Cannot zip datasets of different number of rows: 3, 4"):
        sf.from_items([{"a": i} for i in range(3)]).zip(
            sf.from_items([{"b": i} for i in range(4)])
        ).take_all()
    with pytest.raises(ValueError, match="different number of rows"):
        sf.range(3).zip(sf.range(2), sf.range(3)).take_all()


def test_zip_union_join_take_datasets(ds):
    for call in (
        lambda: ds.zip(5),
        lambda: ds.union([ds]),
        lambda: ds.join(pa.table({"a": [1]}), "inner", 1),
    ):
        with pytest.raises(TypeError, match="Datasets"):
            call()


@pytest.mark.parametrize("join_type", ["cross", "outer", "left", "INNER", ""])
def test_invalid_join_type_lists_the_valid_ones(ds, join_type):
    with pytest.raises(ValueError, match=r"inner.*left_outer.*right_anti"):
        ds.join(ds, join_type, 2)


def test_join_bad_partitions_and_keys(ds):
    with pytest.raises(ValueError, match="num_partitions"):
        ds.join(ds, "inner", 0)
    with pytest.raises(ValueError, match="same length"):
        ds.join(ds, "inner", 1, on=("a",), right_on=("a", "s"))


# -- seeds and other arguments ---------------------------------------------------------------------


# -1 and True pass the call, as in Ray Data.
@pytest.mark.parametrize("seed", [1.5, "7", np.float64(2.0)])
def test_bad_seeds(seed):
    ds = sf.range(10)
    for call in (
        lambda: ds.random_shuffle(seed=seed),
        lambda: ds.randomize_block_order(seed=seed),
        lambda: ds.random_sample(0.5, seed=seed),
        lambda: ds.train_test_split(0.5, shuffle=True, seed=seed),
    ):
        with pytest.raises(ValueError, match="seed"):
            call()


def test_bad_fractions_blocks_and_partitions(ds):
    for fraction in (-0.1, 1.5):
        with pytest.raises(ValueError, match="Fraction must be between 0 and 1"):
            ds.random_sample(fraction)
    for fraction in ("half", None):  # Ray Data's comparison fails on them: a TypeError
        with pytest.raises(TypeError):
            ds.random_sample(fraction)
    with pytest.raises(ValueError, match="num_blocks"):
        ds.random_shuffle(num_blocks=0)
    with pytest.raises(ValueError, match="num_partitions"):
        ds.groupby("a", num_partitions=0)
    with pytest.raises(ValueError, match="num_blocks"):
        ds.repartition(-1)
    with pytest.raises(ValueError, match="not both"):
        ds.repartition(2, target_num_rows_per_block=3)
    with pytest.raises(ValueError, match="must be set"):
        ds.repartition()
    with pytest.raises(ValueError, match="cannot be combined"):
        ds.repartition(target_num_rows_per_block=3, shuffle=True)
    with pytest.raises(ValueError, match="needs keys"):
        ds.repartition(2, sort=True)


def test_bad_sort_arguments(ds):
    with pytest.raises(ValueError, match="cannot be None"):
        ds.sort(None)
    with pytest.raises(ValueError, match="column name"):
        ds.sort([])
    with pytest.raises(ValueError, match="Length of `descending`"):
        ds.sort(["a"], descending=[True, False])
    with pytest.raises(ValueError, match="descending"):
        ds.sort("a", descending="yes")
    with pytest.raises(ValueError, match="boundaries must be int or float"):
        ds.sort("a", boundaries=["x"])
    with pytest.raises(ValueError, match="column name"):
        ds.groupby(5)
