"""Differential cases: the classes of ``ray.data.aggregate`` on Dataset.aggregate and
GroupedData.aggregate (values, output names and dtypes, nulls, errors).

Ray Data gives groups, and the values inside AsList/Unique/ValueCounter results, in no set
order: the cases sort them. Each case runs few Ray Data executions (one aggregate call holds
many aggregations), since every groupby costs Ray Data seconds.
"""

from __future__ import annotations

import pyarrow as pa
from harness import case, exception_kind, submodule

ITEMS = [
    {
        "k": i % 3,
        "v": None if i % 4 == 0 else float(i),
        "z": i % 2,
        "s": ["a", "b", None][i % 3],
        "l": [i % 2, 1],
        "w": ["x", "y", "y", "z", "z", "z"][i % 6],
    }
    for i in range(12)
]


def _sorted(value):
    """Lists of values sorted (Ray Data collects them in no set order); dicts recursively."""
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=repr)
    if isinstance(value, dict):
        if set(value) == {"values", "counts"}:  # ValueCounter: pairs, in no set order
            return sorted(zip(value["values"], value["counts"]), key=repr)
        return {k: _sorted(v) for k, v in value.items()}
    return value


def _rows(ds, key="k"):
    return [_sorted(r) for r in sorted(ds.take_all(), key=lambda r: repr(r[key]))]


def _aggs(a):
    return [
        a.MissingValuePercentage("v"),
        a.ZeroPercentage("z"),
        a.ZeroPercentage("v", ignore_nulls=False),
        a.AsList("s"),
        a.CountDistinct("s"),
        a.CountDistinct("s", ignore_nulls=False, alias_name="distinct_with_nulls"),
        a.ValueCounter("s"),
        a.Unique("w", ignore_nulls=True),
        a.ApproximateQuantile("v", quantiles=[0.1, 0.5, 0.9]),
        a.ApproximateTopK("w", k=2),
    ]


@case(
    "Dataset.aggregate",
    "aggregate.MissingValuePercentage",
    "aggregate.ZeroPercentage",
    "aggregate.AsList",
    "aggregate.CountDistinct",
    "aggregate.ValueCounter",
    "aggregate.ApproximateQuantile",
    "aggregate.ApproximateTopK",
    "aggregate.Unique",
    requires=("datasketches",),
)
def aggregations_of_the_whole_dataset(m, tmp):
    """every ray.data.aggregate class over the whole dataset: values and names"""
    return _sorted(m.from_items(ITEMS).aggregate(*_aggs(submodule(m, "aggregate"))))


@case(
    "GroupedData.aggregate",
    "aggregate.MissingValuePercentage",
    "aggregate.ZeroPercentage",
    "aggregate.AsList",
    "aggregate.CountDistinct",
    "aggregate.ValueCounter",
    "aggregate.ApproximateQuantile",
    "aggregate.ApproximateTopK",
    requires=("datasketches",),
)
def aggregations_by_group(m, tmp):
    """every ray.data.aggregate class per group: values, names and output dtypes"""
    grouped = m.from_items(ITEMS).groupby("k").aggregate(*_aggs(submodule(m, "aggregate")))
    return [grouped.schema(), _rows(grouped)]


@case("aggregate.Unique", "aggregate.ApproximateTopK", "GroupedData.aggregate", slow=True)
def unique_of_list_columns(m, tmp):
    """Unique of a list column: whole lists (as large lists), flattened, or hashed"""
    a = submodule(m, "aggregate")
    aggs = [
        a.Unique("l"),
        a.Unique("l", encode_lists=True, alias_name="flat"),
        a.CountDistinct("l"),
    ]
    try:
        import polars  # noqa: F401  (the hash mode uses polars' row hashes on both)

        aggs.append(a.Unique("l", encode_lists=a.Unique.ListEncodingMode.HASH, alias_name="h"))
    except ImportError:
        pass
    ds = m.from_items(ITEMS)
    grouped = ds.groupby("k").aggregate(*aggs)
    return [_sorted(ds.aggregate(*aggs)), grouped.schema(), _rows(grouped)]


@case("aggregate.Min", "aggregate.Max", "aggregate.Mean", "aggregate.Std", "aggregate.Sum")
def all_null_columns(m, tmp):
    """a column of nulls only: None (not +-inf) for min/max/mean/std/sum, either null rule"""
    a = submodule(m, "aggregate")
    ds = m.from_items([{"k": i % 2, "n": None} for i in range(4)])
    typed = m.from_arrow(pa.table({"f": pa.array([None, None], pa.float64())}))
    aggs = [
        agg("n", ignore_nulls=ignore, alias_name=f"{agg.__name__}_{ignore}")
        for agg in (a.Min, a.Max, a.Mean, a.Std, a.Sum, a.AbsMax)
        for ignore in (False, True)
    ]
    more = [
        a.MissingValuePercentage("n"),
        a.ZeroPercentage("n"),
        a.CountDistinct("n"),
        a.AsList("n"),
    ]
    typed_aggs = [agg("f", ignore_nulls=False) for agg in (a.Min, a.Max, a.Sum, a.Mean)]
    return [ds.aggregate(*aggs, *more), typed.aggregate(*typed_aggs)]


class _Product:
    """A user's AggregateFnV2 and VectorizedAggregateFnV2 subclasses (made per module)."""

    @staticmethod
    def classes(a):
        import pyarrow.compute as pc

        class Product(a.AggregateFnV2):
            def __init__(self, on):
                super().__init__(f"product({on})", lambda: 1, on=on, ignore_nulls=True)

            def aggregate_block(self, block):
                values = block[self.get_target_column()]
                product = 1
                for v in values.to_pylist() if hasattr(values, "to_pylist") else values:
                    if v is not None:
                        product *= v
                return product

            def combine(self, current, new):
                return current * new

        class Total(a.VectorizedAggregateFnV2):
            def __init__(self, on):
                super().__init__(f"total({on})", lambda: 0, on=on, ignore_nulls=True)

            def aggregate_block(self, block):
                return pc.sum(pa.table(block)[self.get_target_column()]).as_py()

            def _combine_column(self, accumulator_col):
                return pc.sum(accumulator_col).as_py()

        return Product, Total


@case("aggregate.AggregateFnV2", "aggregate.VectorizedAggregateFnV2", "aggregate.AggregateFn")
def custom_aggregations(m, tmp):
    """user subclasses of AggregateFnV2 and VectorizedAggregateFnV2, and AggregateFn"""
    a = submodule(m, "aggregate")
    product, total = _Product.classes(a)
    count = a.AggregateFn(
        init=lambda k: 0,
        accumulate_row=lambda acc, row: acc + 1,
        merge=lambda x, y: x + y,
        name="rows",
    )
    ds = m.from_items([{"k": i % 2, "x": i + 1} for i in range(6)])
    return [
        ds.aggregate(product("x"), total("x"), count),
        _rows(ds.groupby("k").aggregate(product("x"), total("x"), count)),
        isinstance(a.Count(), a.VectorizedAggregateFnV2),
        a.Sum("x").get_agg_name(),
        a.Quantile("x", alias_name="median(x)").get_agg_name(),
    ]


@case("aggregate.AggregateFn", "aggregate.AggregateFnV2", "aggregate.AbsMax")
def aggregation_argument_errors(m, tmp):
    """the exceptions of bad aggregation arguments, at construction and at run time"""
    a = submodule(m, "aggregate")
    out = []
    for make in (
        lambda: a.AggregateFn(init=lambda k: 0, merge=lambda x, y: x, name=None),
        lambda: (
            a.AggregateFn(
                init=lambda k: 0, merge=lambda x, y: x, name="x", accumulate_row=lambda a, r: a
            ).name
        ),
        lambda: a.AggregateFn(init=lambda k: 0, merge=lambda x, y: x, name="x"),
        lambda: a.AbsMax(),
        lambda: a.Sum("id", alias_name="").name,
        lambda: m.from_items([{"s": "a"}]).aggregate(a.ZeroPercentage("s")),
        lambda: m.from_items([{"s": "a"}]).aggregate(a.ApproximateQuantile("s", [0.5])),
        lambda: m.from_items([{"l": [1]}]).aggregate(a.ValueCounter("l")),
    ):
        try:
            out.append(make())
        except Exception as exc:
            out.append(("raised", exception_kind(exc)))
    return out
