"""Expressions in Arrow terms: the operators' kernels and the translation to
``pyarrow.compute.Expression``.

The operators compute what Ray Data's do: ``/`` is Arrow's ``divide`` (integer division of
integers), ``//`` is the floor of it, ``%`` is ``a - floor(a / b) * b``, ``&`` and ``|``
follow Kleene logic (``null & False`` is False), and ``+`` joins strings when evaluated on
data (:mod:`shardflow.sdk.expression_eval`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardflow.sdk.expression_operations import Operation
from shardflow.sdk.expression_projection import StructFieldExpr
from shardflow.sdk.expressions import (
    AliasExpr,
    BinaryExpr,
    CastExpr,
    ColumnExpr,
    ExprVisitor,
    LiteralExpr,
    UnaryExpr,
)


def pc() -> Any:
    import pyarrow.compute as compute  # imported on first use: keeps `import shardflow` fast

    return compute


def _floordiv(a: Any, b: Any) -> Any:
    return pc().floor(pc().divide(a, b))


def _modulo(a: Any, b: Any) -> Any:
    return pc().subtract(a, pc().multiply(_floordiv(a, b), b))


# The kernels of the binary operators; each takes arrays, scalars or Expressions.
BINARY_KERNELS: dict[Operation, Callable[[Any, Any], Any]] = {
    Operation.EQ: lambda a, b: pc().equal(a, b),
    Operation.NE: lambda a, b: pc().not_equal(a, b),
    Operation.GT: lambda a, b: pc().greater(a, b),
    Operation.GE: lambda a, b: pc().greater_equal(a, b),
    Operation.LT: lambda a, b: pc().less(a, b),
    Operation.LE: lambda a, b: pc().less_equal(a, b),
    Operation.AND: lambda a, b: pc().and_kleene(a, b),
    Operation.OR: lambda a, b: pc().or_kleene(a, b),
    Operation.ADD: lambda a, b: pc().add(a, b),
    Operation.SUB: lambda a, b: pc().subtract(a, b),
    Operation.MUL: lambda a, b: pc().multiply(a, b),
    Operation.DIV: lambda a, b: pc().divide(a, b),
    Operation.FLOORDIV: _floordiv,
    Operation.MOD: _modulo,
}


class PyArrowExprVisitor(ExprVisitor["pyarrow.compute.Expression"]):
    """Translates to a :class:`pyarrow.compute.Expression`.

    ``udf`` and ``download`` expressions run Python code and have no translation.

    Args:
        column_name: Maps a column name of the expression to the name in the data being
            filtered (a file whose columns are named differently, say); identity by default.
    """

    def __init__(self, column_name: Callable[[str], str] | None = None):
        self._column_name = column_name

    def visit_column(self, expr: ColumnExpr) -> Any:
        name = expr.name if self._column_name is None else self._column_name(expr.name)
        return pc().field(name)

    def visit_literal(self, expr: LiteralExpr) -> Any:
        return pc().scalar(expr.value)

    def visit_binary(self, expr: BinaryExpr) -> Any:
        return BINARY_KERNELS[expr.op](self.visit(expr.left), self.visit(expr.right))

    def visit_not(self, expr: UnaryExpr) -> Any:
        return pc().invert(self.visit(expr.operand))

    def visit_is_null(self, expr: UnaryExpr) -> Any:
        return pc().is_null(self.visit(expr.operand))

    def visit_is_in(self, expr: BinaryExpr) -> Any:
        import pyarrow as pa

        return pc().is_in(self.visit(expr.operand), value_set=pa.array(expr.values))

    def visit_struct_field(self, expr: StructFieldExpr) -> Any:
        return pc().struct_field(self.visit(expr.operand), [expr.index])

    def visit_alias(self, expr: AliasExpr) -> Any:
        return self.visit(expr.operand)

    def visit_cast(self, expr: CastExpr) -> Any:
        return self.visit(expr.operand).cast(expr.arrow_type(), safe=expr.safe)
