"""Expressions from strings: ``ds.filter(expr="x > 0 and name in ['a', 'b']")``.

The syntax is Python's: bare names are columns, and a dotted name (``user.age``) is one
column of that name, as in Ray Data; literals are constants. Supported: ``and``, ``or``,
``not``, comparisons (chained ones too), ``+ - * / // %``, unary minus, ``in`` and
``not in`` a list, ``is None`` and ``is not None``, and Ray Data's functions ``is_null(x)``,
``is_not_null(x)`` (or ``is_valid(x)``), ``is_nan(x)`` and ``is_in(x, [...])``.
"""

from __future__ import annotations

import ast
from typing import Any

from shardflow.sdk.expressions import (
    BinaryExpr,
    ColumnExpr,
    Expr,
    IsInExpr,
    IsNullExpr,
    LiteralExpr,
    NotExpr,
)

_AST_BINOPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%"}
_AST_CMPOPS = {"Eq": "==", "NotEq": "!=", "Gt": ">", "GtE": ">=", "Lt": "<", "LtE": "<="}


def parse_expr(text: str) -> Expr:
    """Parse a Python-syntax predicate (see the module docstring).

    Examples:
        >>> from shardflow.sdk.expression_parsing import parse_expr
        >>> parse_expr("x > 1 and y in [1, 2]")
        ((col('x') > 1) & col('y').is_in([1, 2]))
        >>> parse_expr("user.age >= 18")
        (col('user.age') >= 18)
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"An expression string must be non-empty, got {text!r}.")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"Cannot parse expression {text!r}: {exc.msg}.") from exc
    return _from_ast(tree.body, text)


def _dotted_name(node: Any) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise ValueError(f"Unsupported attribute access {ast.dump(node)[:60]}.")


def _from_ast(node: Any, text: str) -> Expr:
    if isinstance(node, (ast.Name, ast.Attribute)):
        return ColumnExpr(_dotted_name(node))
    if isinstance(node, ast.Constant):
        return LiteralExpr(node.value)
    if isinstance(node, ast.BoolOp):
        parts = [_from_ast(v, text) for v in node.values]
        result = parts[0]
        for part in parts[1:]:
            result = result & part if isinstance(node.op, ast.And) else result | part
        return result
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return NotExpr(_from_ast(node.operand, text))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_from_ast(node.operand, text)
    if isinstance(node, ast.BinOp) and type(node.op).__name__ in _AST_BINOPS:
        op = _AST_BINOPS[type(node.op).__name__]
        return BinaryExpr(op, _from_ast(node.left, text), _from_ast(node.right, text))
    if isinstance(node, ast.Compare):
        left = _from_ast(node.left, text)
        result = None
        for i, (op, right_node) in enumerate(zip(node.ops, node.comparators)):
            part = _compare(op, left, right_node, text)
            result = part if result is None else result & part
            if i + 1 < len(node.ops):
                left = _from_ast(right_node, text)
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _call(node, text)
    raise ValueError(f"Unsupported syntax in expression {text!r}: {ast.dump(node)[:60]}.")


def _compare(op: Any, left: Expr, right_node: Any, text: str) -> Expr:
    name = type(op).__name__
    if name in _AST_CMPOPS:
        return BinaryExpr(_AST_CMPOPS[name], left, _from_ast(right_node, text))
    if name in ("In", "NotIn"):
        expr = IsInExpr(left, _literal_list(right_node, text))
        return expr if name == "In" else NotExpr(expr)
    if (
        name in ("Is", "IsNot")
        and isinstance(right_node, ast.Constant)
        and right_node.value is None
    ):
        expr = IsNullExpr(left)
        return expr if name == "Is" else NotExpr(expr)
    raise ValueError(f"Unsupported comparison in expression {text!r}.")


def _literal_list(node: Any, text: str) -> list:
    try:
        return list(ast.literal_eval(node))
    except (ValueError, TypeError):
        raise ValueError(f"In expression {text!r}, 'in' needs a list of constants.") from None


def _call(node: Any, text: str) -> Expr:
    name = node.func.id
    args = node.args
    if node.keywords:
        raise ValueError(f"In expression {text!r}, {name}() takes no keyword arguments.")
    if name in ("is_null", "is_not_null", "is_valid", "is_nan"):
        if len(args) != 1:
            raise ValueError(f"{name}() expects exactly one argument (in {text!r}).")
        operand = _from_ast(args[0], text)
        if name == "is_null":
            return IsNullExpr(operand)
        if name == "is_nan":
            return BinaryExpr("!=", operand, operand)  # NaN alone differs from itself
        return NotExpr(IsNullExpr(operand))
    if name == "is_in":
        if len(args) != 2:
            raise ValueError(f"is_in() expects exactly two arguments (in {text!r}).")
        return IsInExpr(_from_ast(args[0], text), _literal_list(args[1], text))
    raise ValueError(f"Unsupported function {name}() in expression {text!r}.")
