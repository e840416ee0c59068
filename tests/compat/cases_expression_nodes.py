"""Differential cases: the expression nodes of ``ray.data.expressions`` that build and
expand projections and draw numbers: ``Operation``, ``UnaryExpr``, ``random``, ``star``
and ``unnest``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from harness import Raised, case, exception_kind, raised_at_run, submodule

ROWS = [
    {"a": 1, "b": None, "s": {"x": 1, "y": "p"}},
    {"a": None, "b": 2.5, "s": {"x": 2, "y": "q"}},
]


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


@case(
    "expressions.Operation",
    "expressions.UnaryExpr",
    "expressions.BinaryExpr",
    note="the operations of built expressions, and expressions built from operations",
)
def operations_and_unary_expressions(m, tmp):
    """Operation's members and values; operators build BinaryExpr/UnaryExpr with them; built
    by hand, they evaluate the same (with_column, filter)"""
    e = submodule(m, "expressions")
    col, lit, Operation, UnaryExpr, BinaryExpr = (
        e.col,
        e.lit,
        e.Operation,
        e.UnaryExpr,
        e.BinaryExpr,
    )
    ds = m.from_items(ROWS, override_num_blocks=1)
    built = [
        col("a") + 1,
        col("a") // 2,
        col("a") >= 1,
        (col("a") > 0) & (col("b") > 0),
        ~(col("a") > 0),
        col("a").is_null(),
        col("a").is_not_null(),
        col("a").is_in([1, 2]),
        col("a").not_in([1]),
    ]
    return [
        [(op.name, op.value) for op in Operation],
        [Operation("add") is Operation.ADD, Operation.GE == "ge", isinstance(Operation.OR, str)],
        [(type(x).__name__, x.op.name) for x in built],
        [type(x.operand).__name__ for x in built if isinstance(x, UnaryExpr)],
        [isinstance(x, (UnaryExpr, BinaryExpr)) for x in built],
        col("a").is_in([1, 2]).right.value,
        BinaryExpr(Operation.ADD, col("a"), lit(5)).structurally_equals(col("a") + 5),
        UnaryExpr(Operation.IS_NULL, col("a")).structurally_equals(col("a").is_null()),
        UnaryExpr(Operation.NOT, col("a")).structurally_equals(col("a").is_null()),
        ds.with_columns(
            {
                "sum": BinaryExpr(Operation.ADD, col("a"), lit(5)),
                "floor": BinaryExpr(Operation.FLOORDIV, col("a"), lit(2)),
                "null": UnaryExpr(Operation.IS_NULL, col("a")),
                "valid": UnaryExpr(Operation.IS_NOT_NULL, col("b")),
                "not": UnaryExpr(Operation.NOT, col("a") > 0),
                "in": BinaryExpr(Operation.IN, col("a"), lit([1])),
            }
        )
        .drop_columns(["s"])
        .take_all(),
        ds.filter(expr=UnaryExpr(Operation.IS_NOT_NULL, col("a"))).take_all(),
        ds.filter(expr=BinaryExpr(Operation.NOT_IN, col("a"), lit([1]))).count(),
    ]


def _random_column(ds, expr):
    return [row["r"] for row in ds.with_column("r", expr).take_all()]


@case("expressions.random", "expressions.RandomExpr", note="seeded numbers, repr, schema")
def random_with_a_fixed_seed(m, tmp):
    """random(seed, reseed_after_execution=False) draws Ray Data's very numbers per block
    (numpy's default_rng of block, task, execution and seed); float64, never null"""
    e = submodule(m, "expressions")
    random = e.random
    one_block = m.from_items([{"i": i} for i in range(5)], override_num_blocks=1)
    two_blocks = m.range(6, override_num_blocks=2)
    fixed = random(seed=7, reseed_after_execution=False)
    return [
        _random_column(one_block, fixed),
        _random_column(one_block, fixed),  # the same numbers on every execution
        sorted(_random_column(two_blocks, random(seed=3, reseed_after_execution=False))),
        one_block.with_column("r", random(seed=1)).schema(),
        [repr(random()), repr(random(seed=3)), repr(fixed)],
        [
            random(seed=1).structurally_equals(random(seed=1)),
            random(seed=1).structurally_equals(random(seed=2)),
            random(seed=1).structurally_equals(random(seed=1, reseed_after_execution=False)),
            isinstance(fixed, e.RandomExpr),
            (fixed.seed, fixed.reseed_after_execution),
        ],
        [random().is_idempotent(), (e.col("i") + random()).is_idempotent()],
        [e.col("i").is_idempotent()],
        _raises(lambda: random(1)),
    ]


@case("expressions.random", note="reseeding, unseeded numbers and their distribution")
def random_across_executions(m, tmp):
    """with reseed_after_execution (the default) and without a seed each execution draws
    other numbers; 2,000 draws are uniform on [0, 1) (compared statistically: the numbers
    depend on Ray Data's global execution count)"""
    random = submodule(m, "expressions").random
    ds = m.range(2000, override_num_blocks=2)
    reseeded = ds.with_column("r", random(seed=5))
    unseeded = ds.with_column("r", random())
    first, second = (
        pa.array([row["r"] for row in reseeded.take_all()]),
        pa.array([row["r"] for row in reseeded.take_all()]),
    )
    fresh = pa.array([row["r"] for row in unseeded.take_all()])
    again = pa.array([row["r"] for row in unseeded.take_all()])

    def uniform(values):
        low, high = pc.min(values).as_py(), pc.max(values).as_py()
        mean = pc.mean(values).as_py()
        below_half = pc.sum(pc.less(values, 0.5)).as_py()
        return [0 <= low, high < 1, abs(mean - 0.5) < 0.04, 900 < below_half < 1100]

    return [
        uniform(first),
        uniform(fresh),
        first.equals(second),
        fresh.equals(again),
        len(set(first.to_pylist())),
        ds.filter(expr=random(seed=9) < 0.5).count() < 2000,
    ]


@case("expressions.star", "expressions.StarExpr", note="a marker of projections, not a column")
def star_expressions(m, tmp):
    """star() equals star() structurally; it has no values: with_column fails when it runs,
    filter with a TypeError"""
    e = submodule(m, "expressions")
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        isinstance(e.star(), e.StarExpr),
        e.star().structurally_equals(e.star()),
        e.star().structurally_equals(e.col("a")),
        e.star().name,
        raised_at_run(m, lambda: ds.with_column("c", e.star()).take_all()),
        _raises(lambda: ds.filter(expr=e.star()).take_all()),
    ]


def _features(a, b):
    return pa.StructArray.from_arrays(
        [pc.add(a, b).combine_chunks(), pc.multiply(a, b).combine_chunks()],
        names=["sum_ab", "product_ab"],
    )


@case(
    "expressions.unnest",
    "expressions.UnnestExpr",
    "Dataset.with_columns",
    note="struct columns and struct-valued udfs expanded into columns",
)
def unnest_structs(m, tmp):
    """with_columns(unnest(...)): one column per field, named after it, after the mapped
    columns; a field named like a column replaces it in place; a udf's declared struct"""
    e, dt = submodule(m, "expressions"), submodule(m, "datatype")
    col, unnest, DataType = e.col, e.unnest, dt.DataType
    features = e.udf(
        return_dtype=DataType.struct(
            [("sum_ab", DataType.int64()), ("product_ab", DataType.int64())]
        )
    )(_features)
    ds = m.from_items(ROWS, override_num_blocks=1)
    numbers = m.from_items([{"a": 2, "b": 10}, {"a": 3, "b": 20}])
    clash = m.from_items([{"x": 0, "s": {"x": 5, "z": True}}])
    expanded = ds.with_columns(unnest(col("s")))
    return [
        expanded.take_all(),
        expanded.schema(),
        ds.with_columns({"a2": col("a") * 2}, unnest(col("s"))).take_all(),
        numbers.with_columns(unnest(features(col("a"), col("b")))).take_all(),
        numbers.with_columns(unnest(features(col("a"), col("b")))).schema(),
        clash.with_columns(unnest(col("s"))).take_all(),
        clash.with_columns(unnest(col("s"))).schema(),
        isinstance(unnest(col("s")), e.UnnestExpr),
        unnest(col("s")).structurally_equals(unnest(col("s"))),
    ]


@case("expressions.unnest", note="what unnest refuses, and when")
def unnest_errors(m, tmp):
    """aliasing, nesting, a non-expression, a non-struct, an unknown column or schema (after
    map_batches), with_column and filter: each raises Ray Data's error type"""
    e = submodule(m, "expressions")
    col, unnest = e.col, e.unnest
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        _raises(lambda: unnest(col("s")).alias("z")),
        _raises(lambda: unnest(unnest(col("s")))),
        _raises(lambda: unnest("s")),
        _raises(lambda: ds.with_columns(unnest(col("a")))),
        _raises(lambda: ds.with_columns(unnest(col("missing")))),
        _raises(lambda: ds.map_batches(lambda b: b).with_columns(unnest(col("s")))),
        _raises(lambda: ds.with_column("c", unnest(col("s")))),
        _raises(lambda: ds.with_columns({"c": unnest(col("s"))})),
        _raises(lambda: ds.filter(expr=unnest(col("s"))).take_all()),
        _raises(lambda: ds.with_columns(3)),
    ]
