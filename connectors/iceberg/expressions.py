"""Engine expressions to pyiceberg expressions, for scan planning and file filtering.

:class:`IcebergExprVisitor` translates comparisons of a column with a literal, ``is_in``,
``is_null`` and ``& | ~`` over them. It knows the table's schema, so it translates only what
Iceberg evaluates exactly as Arrow does: a literal of another type than its column (``1.5``
against an integer column, which Iceberg would truncate), a ``None`` or NaN literal, column
against column, and arithmetic are left to Arrow. :func:`split_predicate` sorts the terms of
an AND into the two groups, so the translatable ones prune files and row groups and the rest
are still applied exactly to the rows read.
"""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from typing import Any

from shardflow.sdk.expressions import (
    BOOLEAN_OPS,
    COMPARISONS,
    FLIPPED_COMPARISONS,
    BinaryExpr,
    ColumnExpr,
    Expr,
    ExprVisitor,
    LiteralExpr,
    Operation,
    UnaryExpr,
    UnsupportedExpressionError,
    and_all,
    conjuncts,
)


def _literal_fits(value: Any, iceberg_type: Any) -> bool:
    """Whether Iceberg compares ``value`` with a column of ``iceberg_type`` as Arrow does."""
    from pyiceberg import types as t

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(iceberg_type, (t.IntegerType, t.LongType)):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(iceberg_type, (t.FloatType, t.DoubleType)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(iceberg_type, t.DecimalType):
        return isinstance(value, decimal.Decimal) or (
            isinstance(value, int) and not isinstance(value, bool)
        )
    if isinstance(iceberg_type, t.StringType):
        return isinstance(value, str)
    if isinstance(iceberg_type, t.BooleanType):
        return isinstance(value, bool)
    if isinstance(iceberg_type, t.DateType):
        return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)
    if isinstance(iceberg_type, t.TimestamptzType):
        return isinstance(value, datetime.datetime) and value.tzinfo is not None
    if isinstance(iceberg_type, t.TimestampType):
        return isinstance(value, datetime.datetime) and value.tzinfo is None
    if isinstance(iceberg_type, t.TimeType):
        return isinstance(value, datetime.time)
    if isinstance(iceberg_type, (t.BinaryType, t.FixedType)):
        return isinstance(value, bytes)
    if isinstance(iceberg_type, t.UUIDType):
        return isinstance(value, uuid.UUID)
    return False


class IcebergExprVisitor(ExprVisitor[Any]):
    """Translates engine expressions to ``pyiceberg.expressions`` over a table schema.

    Args:
        schema: The pyiceberg Schema the expression's columns belong to.
        case_sensitive: Whether column names match case-sensitively.

    Examples:
        >>> from pyiceberg.schema import Schema
        >>> from pyiceberg.types import LongType, NestedField, StringType
        >>> from shardflow.sdk.expressions import col
        >>> schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
        >>> IcebergExprVisitor(schema).visit((col("id") >= 3) & col("name").is_null())
        And(left=GreaterThanOrEqual(term=Reference(name='id'), literal=LongLiteral(3)), \
right=IsNull(term=Reference(name='name')))
    """

    def __init__(self, schema: Any, case_sensitive: bool = True):
        self._schema = schema
        self._case_sensitive = case_sensitive

    def _field(self, expr: Expr) -> Any:
        if not isinstance(expr, ColumnExpr):
            raise UnsupportedExpressionError(f"{expr!r} is not a column.")
        try:
            return self._schema.find_field(expr.name, case_sensitive=self._case_sensitive)
        except ValueError:
            names = ", ".join(self._schema.column_names)
            raise ValueError(
                f"Column {expr.name!r} is not in the Iceberg table (columns: {names})."
            ) from None

    def _reference(self, expr: Expr, *values: Any) -> Any:
        from pyiceberg.expressions import Reference

        field = self._field(expr)
        for value in values:
            if not _literal_fits(value, field.field_type):
                raise UnsupportedExpressionError(
                    f"{value!r} is not compared the same way by Iceberg and Arrow with column "
                    f"{expr.name!r} of type {field.field_type}."
                )
        return Reference(expr.name)

    def visit_column(self, expr: ColumnExpr) -> Any:
        from pyiceberg.expressions import EqualTo
        from pyiceberg.types import BooleanType

        if not isinstance(self._field(expr).field_type, BooleanType):
            raise UnsupportedExpressionError(f"{expr!r} is not a boolean column.")
        return EqualTo(self._reference(expr, True), True)

    def visit_literal(self, expr: LiteralExpr) -> Any:
        from pyiceberg.expressions import AlwaysFalse, AlwaysTrue

        if isinstance(expr.value, bool):
            return AlwaysTrue() if expr.value else AlwaysFalse()
        raise UnsupportedExpressionError(f"{expr!r} is not a condition.")

    def visit_binary(self, expr: BinaryExpr) -> Any:
        import pyiceberg.expressions as ie

        if expr.op in BOOLEAN_OPS:
            combine = ie.And if expr.op is Operation.AND else ie.Or
            return combine(self.visit(expr.left), self.visit(expr.right))
        if expr.op not in COMPARISONS:
            raise UnsupportedExpressionError(f"arithmetic ({expr.op.symbol}) in {expr!r}")
        op, column, value = expr.op, expr.left, expr.right
        if isinstance(column, LiteralExpr) and isinstance(value, ColumnExpr):
            op, column, value = FLIPPED_COMPARISONS[op], value, column
        if not isinstance(column, ColumnExpr) or not isinstance(value, LiteralExpr):
            raise UnsupportedExpressionError(f"{expr!r} does not compare a column with a literal.")
        classes = {
            Operation.EQ: ie.EqualTo,
            Operation.NE: ie.NotEqualTo,
            Operation.GT: ie.GreaterThan,
            Operation.GE: ie.GreaterThanOrEqual,
            Operation.LT: ie.LessThan,
            Operation.LE: ie.LessThanOrEqual,
        }
        return classes[op](self._reference(column, value.value), value.value)

    def visit_not(self, expr: UnaryExpr) -> Any:
        from pyiceberg.expressions import Not

        return Not(self.visit(expr.operand))

    def visit_is_null(self, expr: UnaryExpr) -> Any:
        from pyiceberg.expressions import IsNull

        return IsNull(self._reference(expr.operand))

    def visit_is_in(self, expr: BinaryExpr) -> Any:
        from pyiceberg.expressions import AlwaysFalse, In

        if not expr.values:
            self._field(expr.operand)
            return AlwaysFalse()
        return In(self._reference(expr.operand, *expr.values), set(expr.values))


def split_predicate(
    predicate: Expr | None, schema: Any, case_sensitive: bool = True
) -> tuple[Any, Expr | None]:
    """Split an engine predicate into an Iceberg filter and the rest.

    Returns:
        ``(iceberg_filter, residual)``: the AND of the terms Iceberg evaluates exactly
        (``AlwaysTrue()`` when none), and the AND of the other terms (None when none), which
        must be applied to the rows read.
    """
    from pyiceberg.expressions import AlwaysTrue, And

    if predicate is None:
        return AlwaysTrue(), None
    visitor = IcebergExprVisitor(schema, case_sensitive)
    translated: list[Any] = []
    rest: list[Expr] = []
    for term in conjuncts(predicate):
        try:
            translated.append(visitor.visit(term))
        except UnsupportedExpressionError:
            rest.append(term)
    iceberg_filter = AlwaysTrue()
    for part in translated:
        iceberg_filter = (
            part if isinstance(iceberg_filter, AlwaysTrue) else And(iceberg_filter, part)
        )
    return iceberg_filter, (and_all(rest) if rest else None)


def check_row_filter(row_filter: Any) -> None:
    """Raise a clear error for a ``row_filter`` of the wrong type or bad syntax."""
    from pyiceberg.expressions import BooleanExpression

    if row_filter is None or isinstance(row_filter, (Expr, BooleanExpression)):
        return
    if isinstance(row_filter, str):
        from pyiceberg.expressions.parser import parse

        try:
            parse(row_filter)
        except Exception as exc:
            raise ValueError(f"Cannot parse row_filter {row_filter!r}: {exc}") from None
        return
    parse_row_filter(row_filter, None)  # raises the TypeError


def parse_row_filter(
    row_filter: Any, schema: Any, case_sensitive: bool = True
) -> tuple[Any, Expr | None]:
    """``row_filter`` as given to ``read_iceberg`` (None, a string in Iceberg's filter syntax,
    a pyiceberg BooleanExpression, or an engine expression) as ``(iceberg_filter, residual)``."""
    from pyiceberg.expressions import AlwaysTrue, BooleanExpression
    from pyiceberg.expressions.parser import parse

    if row_filter is None:
        return AlwaysTrue(), None
    if isinstance(row_filter, Expr):
        return split_predicate(row_filter, schema, case_sensitive)
    if isinstance(row_filter, str):
        return parse(row_filter), None
    if isinstance(row_filter, BooleanExpression):
        return row_filter, None
    raise TypeError(
        "row_filter must be a pyiceberg BooleanExpression, a filter string such as "
        "\"id > 3\", or a shardflow expression such as sf.col('id') > 3; "
        f"got {type(row_filter).__name__}."
    )
