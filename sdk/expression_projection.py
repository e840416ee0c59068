"""Expressions that stand for several columns or a part of one, for projections:
``star()`` (all the input columns), ``unnest(expr)`` (one column per field of a struct, for
``Dataset.with_columns``) and the struct fields an unnest expands into, as in Ray Data.
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk.expressions import AliasExpr, Expr


class StarExpr(Expr):
    """All the columns of the input, as Ray Data's ``star()``: a marker of projections
    (``with_columns`` keeps every column and adds its own). It has no values of its own, so
    evaluating it raises a TypeError."""

    kind = "star"

    def __repr__(self) -> str:
        return "star()"


def star() -> StarExpr:
    """An expression standing for all the input columns, as Ray Data's ``star()``.

    Ray Data builds projections with it internally; it cannot be evaluated as one column
    (``with_column("c", star())`` fails when the dataset runs, as in Ray Data).

    Returns:
        A :class:`StarExpr`.

    Examples:
        >>> from shardflow.expressions import star
        >>> star().structurally_equals(star())
        True
    """
    return StarExpr()


class UnnestExpr(Expr):
    """A struct-valued expression expanded into one column per field; build it with
    :func:`unnest` and pass it to ``Dataset.with_columns``."""

    kind = "unnest"

    def __init__(self, expr: Expr):
        self.expr = expr

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)

    def alias(self, name: str) -> AliasExpr:
        raise TypeError(
            "unnest() cannot be aliased: it produces one output column per struct field, "
            "named after the fields themselves. Pass it positionally to with_columns(), e.g. "
            "ds.with_columns(unnest(expr))."
        )

    def __repr__(self) -> str:
        return f"unnest({self.expr!r})"


def unnest(expr: Expr) -> UnnestExpr:
    """Expand a struct-typed expression into one output column per struct field, for
    ``Dataset.with_columns``, as Ray Data's ``unnest()``.

    The struct's type must be known when ``with_columns`` is called: a ``udf`` declaring a
    struct ``return_dtype``, or a struct column of a dataset whose schema is known without
    running it. The wrapped expression is evaluated once per block; the fields become
    columns named after them (one level deep), replacing columns of those names in place.

    Args:
        expr: An expression whose values are structs.

    Returns:
        An :class:`UnnestExpr`.

    Raises:
        TypeError: for something other than an expression, or an unnest of an unnest.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.expressions import col, unnest
        >>> ds = sf.from_items([{"s": {"x": 1, "y": "a"}}])
        >>> ds.with_columns(unnest(col("s"))).take_all()
        [{'s': {'x': 1, 'y': 'a'}, 'x': 1, 'y': 'a'}]
    """
    if isinstance(expr, UnnestExpr):
        raise TypeError("unnest() cannot be nested inside another unnest().")
    if not isinstance(expr, Expr):
        raise TypeError(f"unnest() expects an expression, got {type(expr).__name__}.")
    return UnnestExpr(expr)


class StructFieldExpr(Expr):
    """Field ``index`` of a struct-valued operand (what ``unnest`` expands into).

    Operands that are the same object are evaluated once per block by the evaluator.
    """

    kind = "struct_field"

    def __init__(self, operand: Expr, index: int):
        self.operand, self.index = operand, index

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _key(self) -> tuple[Any, ...]:
        return (self.index,)

    def __repr__(self) -> str:
        return f"{self.operand!r}.struct[{self.index}]"


__all__ = ["StarExpr", "StructFieldExpr", "UnnestExpr", "star", "unnest"]
