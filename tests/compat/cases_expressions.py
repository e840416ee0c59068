"""Differential cases: expressions (``ray.data.expressions`` / ``shardflow.expressions``),
``with_column``, ``with_columns`` and expression filters."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from harness import Raised, case, exception_kind, raised_at_run, submodule

ROWS = [{"a": 1, "b": 2.5, "s": "x", "n": None}, {"a": 4, "b": None, "s": "y", "n": 3}]


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _with(ds, expr):
    return ds.with_column("c", expr).take_all()


@case(
    "expressions.col",
    "expressions.lit",
    "Dataset.with_column",
    "expressions.Expr",
    "expressions.BinaryExpr",
    "expressions.ColumnExpr",
    "expressions.LiteralExpr",
    note="arithmetic and comparison operators on columns and literals",
)
def arithmetic_and_comparisons(m, tmp):
    """+ - * / // % (int division and floor as Ray Data), reflected operators, comparisons"""
    e = submodule(m, "expressions")
    col, lit = e.col, e.lit
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        _with(ds, col("a") * 2 + col("b")),
        _with(ds, col("a") // 3),
        _with(ds, col("a") / 2),
        _with(ds, col("b") / 2),
        _with(ds, col("a") % 3),
        _with(ds, 10 - col("a")),
        _with(ds, 3 * col("a")),
        _with(ds, 8 / col("a")),
        _with(ds, col("s") + "!"),
        _with(ds, col("a") > 2),
        _with(ds, col("a") <= lit(1)),
        _with(ds, col("s") == "y"),
        _with(ds, col("s") != "y"),
        _with(ds, lit(7)),
        ds.with_column("c", lit("q")).schema(),
        ds.with_column("c", lit(None)).schema(),
    ]


@case("expressions.Expr", note="boolean operators and null tests")
def boolean_operators_and_nulls(m, tmp):
    """& | ~ with Kleene nulls, is_null, is_not_null, is_in, not_in"""
    e = submodule(m, "expressions")
    col = e.col
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        _with(ds, (col("a") > 2) & (col("s") == "y")),
        _with(ds, (col("a") > 2) | col("b").is_null()),
        _with(ds, (col("b") > 1) & (col("a") > 0)),
        _with(ds, ~(col("a") > 2)),
        _with(ds, col("n").is_null()),
        _with(ds, col("n").is_not_null()),
        _with(ds, col("s").is_in(["x"])),
        _with(ds, col("s").not_in(["x"])),
        _with(ds, col("n").not_in([3])),
        _with(ds, col("a").is_in([1.0, 4.0])),
    ]


@case(
    "expressions.AliasExpr",
    "expressions.Expr",
    "Dataset.with_columns",
    note="alias, names, and several columns at once",
)
def alias_and_with_columns(m, tmp):
    """alias names an expression; with_columns adds several; a replaced column keeps its place"""
    e = submodule(m, "expressions")
    col = e.col
    ds = m.from_items(ROWS, override_num_blocks=1)
    expr = (col("a") + 1).alias("total")
    return [
        expr.name,
        col("a").name,
        (col("a") + 1).name,
        expr.alias("again").name,
        _with(ds, expr),
        ds.with_columns({"c": col("a") + 1, "d": col("a") * 2}).take_all(),
        ds.with_column("a", col("a") * 10).take_all(),
        ds.with_column("a", col("b")).schema(),
        ds.with_columns({}).take_all(),
        (col("a") > 1).structurally_equals(col("a") > 1),
        (col("a") > 1).structurally_equals(col("a") > 2),
    ]


@case("expressions.Expr", "datatype.DataType", note="cast to a DataType, safe and not")
def casts(m, tmp):
    """cast to int, float, string types; TypeError for a non-DataType; unsafe casts"""
    e, dt = submodule(m, "expressions"), submodule(m, "datatype")
    col, DataType = e.col, dt.DataType
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        ds.with_column("c", col("a").cast(DataType.float32())).schema(),
        _with(ds, col("a").cast(DataType.string())),
        _with(ds, (col("a") % 2).cast(DataType.int64())),
        _with(m.from_items([{"f": 2.7}]), col("f").cast(DataType.int64(), safe=False)),
        _raises(lambda: col("a").cast(pa.int64())),
        _raises(lambda: col("a").cast(DataType(int))),
        raised_at_run(
            m, lambda: _with(m.from_items([{"f": 2.5}]), col("f").cast(DataType.int64()))
        ),
        [repr(DataType.int64()), repr(DataType.from_numpy("float32")), repr(DataType(int))],
        [
            str(DataType.list(DataType.string()).to_arrow_dtype()),
            str(DataType.struct([("x", DataType.int64())]).to_arrow_dtype()),
        ],
        DataType.int64() == DataType.from_arrow(pa.int64()),
    ]


class AddOffset:
    """A callable class made a udf in the case below (module level, so workers import it)."""

    def __init__(self, offset):
        self.offset = offset

    def __call__(self, x):
        return pc.add(x, self.offset)


def _plus(x, y):
    return pc.add(x, y)


@case("expressions.udf", "expressions.UDFExpr", note="udf functions and callable classes")
def udfs(m, tmp):
    """a udf of columns and literals, its declared type, a class with arguments, in filters"""
    e, dt = submodule(m, "expressions"), submodule(m, "datatype")
    col, DataType = e.col, dt.DataType
    plus = e.udf(return_dtype=DataType.int64())(_plus)
    offset = e.udf(return_dtype=DataType.int32())(AddOffset)
    ds = m.from_items(ROWS, override_num_blocks=1)
    return [
        _with(ds, plus(col("a"), 10)),
        ds.with_column("c", plus(col("a"), 10)).schema(),
        _with(ds, offset(5)(col("a"))),
        _with(ds, plus(col("a"), 1) * 2),
        ds.filter(expr=plus(col("a"), 1) > 3).take_all(),
    ]


@case(
    "expressions.download",
    "expressions.DownloadExpr",
    "Dataset.with_column",
    note="download the files a column names",
    slow=True,
)
def downloads(m, tmp):
    """bytes of local files by path; the binary column type"""
    e = submodule(m, "expressions")
    paths = []
    for i in range(3):
        path = tmp / f"f{i}.bin"
        path.write_bytes(bytes([i]) * (i + 1))
        paths.append(str(path))
    ds = m.from_items([{"uri": p} for p in paths], override_num_blocks=1)
    out = ds.with_column("bytes", e.download("uri"))
    return [[r["bytes"] for r in out.take_all()], out.schema()]


@case("Dataset.filter", note="expression filters: objects, strings, dotted names")
def expression_filters(m, tmp):
    """filter(expr=...) with expressions and strings, dotted column names, and/or/not/in"""
    e = submodule(m, "expressions")
    col = e.col
    ds = m.from_items(ROWS, override_num_blocks=1)
    dotted = m.from_items([{"x.y": 1, "z": 2}, {"x.y": 5, "z": 3}])
    return [
        ds.filter(expr=col("a") > 2).take_all(),
        ds.filter(expr="a > 2 and s == 'y'").take_all(),
        ds.filter(expr="a < 2 or not (s == 'x')").take_all(),
        ds.filter(expr="s in ['x']").take_all(),
        ds.filter(expr="s not in ['x']").take_all(),
        ds.filter(expr="is_null(n)").take_all(),
        ds.filter(expr="is_not_null(n)").take_all(),
        dotted.filter(expr="x.y > 2").take_all(),
        dotted.filter(expr=col("x.y") > 2).take_all(),
        ds.filter(expr=col("n").is_null() | (col("a") % 2 == 0)).take_all(),
    ]


class AsyncAddOffset:
    """A callable class with an async ``__call__``, made a udf in the case below."""

    def __init__(self, offset):
        self.offset = offset

    async def __call__(self, x):
        import asyncio

        await asyncio.sleep(0)
        return pc.add(x, self.offset)


class AsyncYieldTwice:
    """A callable class whose ``__call__`` is an async generator: its last item counts."""

    async def __call__(self, x):
        yield pc.add(x, 1)
        yield pc.add(x, 2)


async def _async_plus_one(x):
    return pc.add(x, 1)


@case(
    "expressions.udf",
    "Dataset.with_column",
    note="async udfs: callable classes are awaited, async functions fail",
    slow=True,
)
def async_udfs(m, tmp):
    """an async __call__'s value, an async generator's last item; an async def fails"""
    e, dt = submodule(m, "expressions"), submodule(m, "datatype")
    col, int64 = e.col, dt.DataType.int64()
    ds = m.from_items(ROWS, override_num_blocks=1)
    awaited = e.udf(return_dtype=int64)(AsyncAddOffset)(3)
    last = e.udf(return_dtype=int64)(AsyncYieldTwice)()
    function = e.udf(return_dtype=int64)(_async_plus_one)
    return [
        _with(ds, awaited(col("a"))),
        _with(ds, last(col("a"))),
        raised_at_run(m, lambda: ds.with_column("c", function(col("a"))).take_all()),
    ]


def _upper_first(x, width):
    return pc.utf8_slice_codeunits(pc.utf8_upper(x), 0, width)


def _is_arrow(x):
    return pa.array([isinstance(x, (pa.Array, pa.ChunkedArray))] * len(x))


@case("expressions.pyarrow_udf", note="udfs over PyArrow arrays")
def pyarrow_udfs(m, tmp):
    """a pyarrow_udf of a column and a literal; its inputs are Arrow arrays; its type"""
    e, dt = submodule(m, "expressions"), submodule(m, "datatype")
    upper = e.pyarrow_udf(return_dtype=dt.DataType.string())(_upper_first)
    arrow_input = e.pyarrow_udf(return_dtype=dt.DataType.bool())(_is_arrow)
    ds = m.from_items(ROWS, override_num_blocks=1)
    out = ds.with_column("c", upper(e.col("s"), 1))
    return [out.take_all(), out.schema(), _with(ds, arrow_input(e.col("a")))]


@case("expressions.uuid", "expressions.UUIDExpr", note="a UUID4 string per row")
def uuid_expressions(m, tmp):
    """the column's type, each value a UUID4, all different, new ones on each execution"""
    import uuid

    e = submodule(m, "expressions")
    ds = m.range(20, override_num_blocks=2).with_column("key", e.uuid())
    first, second = [r["key"] for r in ds.take_all()], [r["key"] for r in ds.take_all()]
    return [
        ds.schema(),
        {uuid.UUID(k).version for k in first},
        len(set(first)),
        set(first) & set(second),
        repr(e.uuid()),
    ]


@case(
    "expressions.monotonically_increasing_id",
    "expressions.MonotonicallyIncreasingIdExpr",
    note="ids with the task's index in the upper bits",
)
def monotonically_increasing_ids(m, tmp):
    """ids of two one-block tasks; the column type; ids after a filter"""
    e = submodule(m, "expressions")
    ds = m.range(6, override_num_blocks=2)
    return [
        ds.with_column("uid", e.monotonically_increasing_id()).take_all(),
        ds.with_column("uid", e.monotonically_increasing_id()).schema(),
        ds.filter(expr="id != 1").with_column("uid", e.monotonically_increasing_id()).take_all(),
    ]
