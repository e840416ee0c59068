"""Engine expressions: column references, literals and operators over them.

Expressions are plain, picklable trees. Translating one into another system's expressions
(pyarrow compute, a table format's scan filter) is the job of an :class:`ExprVisitor`: it has
one ``visit_<kind>`` method per kind of expression, so a connector translates the kinds it
understands and gets a clear :class:`UnsupportedExpressionError` for the others, and a new kind
of expression needs one new method in the visitors that can translate it.
:meth:`Expr.to_pyarrow` is :class:`PyArrowExprVisitor`.

Examples:
    >>> from shardflow.sdk.expressions import col, lit
    >>> expr = (col("x") > 1) & col("name").is_in(["a", "b"])
    >>> expr
    ((col('x') > 1) & col('name').is_in(['a', 'b']))
    >>> sorted(expr.referenced_columns())
    ['name', 'x']
"""

from __future__ import annotations

from typing import (
    Any,
    Callable,
    ClassVar,
    Generic,
    Iterable,
    Iterator,
    Optional,
    Set,
    Tuple,
    TypeVar,
)

import pyarrow as pa

T = TypeVar("T")

COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
BOOLEAN_OPS = ("&", "|")
ARITHMETIC_OPS = ("+", "-", "*", "/", "%")
_ALL_OPS = COMPARISONS + BOOLEAN_OPS + ARITHMETIC_OPS

# ``a op b`` is ``b flipped(op) a``: lets a visitor put the column on the left.
FLIPPED_COMPARISONS = {"==": "==", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _pc() -> Any:
    import pyarrow.compute as pc  # imported on first use: keeps `import shardflow` fast

    return pc


class UnsupportedExpressionError(ValueError):
    """An expression has a kind (or an operator) that a visitor cannot translate."""


class Expr:
    """Base class of expressions. Build them with :func:`col` and :func:`lit`.

    Each subclass names its ``kind``; :meth:`ExprVisitor.visit` calls ``visit_<kind>``.
    """

    kind: ClassVar[str] = ""

    def children(self) -> Tuple["Expr", ...]:
        """The sub-expressions, for walks that do not care about the kind."""
        return ()

    def walk(self) -> Iterator["Expr"]:
        """This expression and every sub-expression, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def to_pyarrow(self) -> pa.compute.Expression:
        """Translate to a :class:`pyarrow.compute.Expression`."""
        return PyArrowExprVisitor().visit(self)

    def referenced_columns(self) -> Set[str]:
        """Names of the columns the expression reads."""
        return {e.name for e in self.walk() if isinstance(e, ColumnExpr)}

    def evaluate(self, table: pa.Table) -> pa.ChunkedArray:
        """Evaluate on a table, returning one value per row."""
        import pyarrow.dataset as pads

        result = pads.dataset(table).to_table(columns={"__value__": self.to_pyarrow()})
        return result.column("__value__")

    def _binary(self, op: str, other: Any, reverse: bool = False) -> "BinaryExpr":
        other = other if isinstance(other, Expr) else LiteralExpr(other)
        return BinaryExpr(op, other, self) if reverse else BinaryExpr(op, self, other)

    def __eq__(self, other: Any) -> "BinaryExpr":  # type: ignore[override]
        return self._binary("==", other)

    def __ne__(self, other: Any) -> "BinaryExpr":  # type: ignore[override]
        return self._binary("!=", other)

    def __gt__(self, other: Any) -> "BinaryExpr":
        return self._binary(">", other)

    def __ge__(self, other: Any) -> "BinaryExpr":
        return self._binary(">=", other)

    def __lt__(self, other: Any) -> "BinaryExpr":
        return self._binary("<", other)

    def __le__(self, other: Any) -> "BinaryExpr":
        return self._binary("<=", other)

    def __and__(self, other: Any) -> "BinaryExpr":
        return self._binary("&", other)

    def __rand__(self, other: Any) -> "BinaryExpr":
        return self._binary("&", other, reverse=True)

    def __or__(self, other: Any) -> "BinaryExpr":
        return self._binary("|", other)

    def __ror__(self, other: Any) -> "BinaryExpr":
        return self._binary("|", other, reverse=True)

    def __add__(self, other: Any) -> "BinaryExpr":
        return self._binary("+", other)

    def __radd__(self, other: Any) -> "BinaryExpr":
        return self._binary("+", other, reverse=True)

    def __sub__(self, other: Any) -> "BinaryExpr":
        return self._binary("-", other)

    def __rsub__(self, other: Any) -> "BinaryExpr":
        return self._binary("-", other, reverse=True)

    def __mul__(self, other: Any) -> "BinaryExpr":
        return self._binary("*", other)

    def __rmul__(self, other: Any) -> "BinaryExpr":
        return self._binary("*", other, reverse=True)

    def __truediv__(self, other: Any) -> "BinaryExpr":
        return self._binary("/", other)

    def __mod__(self, other: Any) -> "BinaryExpr":
        return self._binary("%", other)

    def __neg__(self) -> "BinaryExpr":
        return BinaryExpr("-", LiteralExpr(0), self)

    def __invert__(self) -> "NotExpr":
        return NotExpr(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "An expression has no truth value: combine conditions with & and | (not 'and'/'or'), "
            "and wrap each comparison in parentheses."
        )

    __hash__ = object.__hash__

    def is_null(self) -> "IsNullExpr":
        """True where the value is null."""
        return IsNullExpr(self)

    def is_in(self, values: Iterable[Any]) -> "IsInExpr":
        """True where the value is one of ``values``."""
        return IsInExpr(self, list(values))


class ColumnExpr(Expr):
    """A reference to a column by name."""

    kind = "column"

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise TypeError(f"A column name must be a non-empty string, got {name!r}.")
        self.name = name

    def __repr__(self) -> str:
        return f"col({self.name!r})"


class LiteralExpr(Expr):
    """A constant value."""

    kind = "literal"

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


class BinaryExpr(Expr):
    """``left <op> right`` for a comparison, boolean or arithmetic operator."""

    kind = "binary"

    def __init__(self, op: str, left: Expr, right: Expr):
        if op not in _ALL_OPS:
            raise ValueError(f"Unknown operator {op!r}; expected one of {sorted(_ALL_OPS)}.")
        self.op, self.left, self.right = op, left, right

    def children(self) -> Tuple[Expr, ...]:
        return (self.left, self.right)

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


class NotExpr(Expr):
    """Boolean negation."""

    kind = "not"

    def __init__(self, operand: Expr):
        self.operand = operand

    def children(self) -> Tuple[Expr, ...]:
        return (self.operand,)

    def __repr__(self) -> str:
        return f"~{self.operand!r}"


class IsNullExpr(Expr):
    """True where the operand is null."""

    kind = "is_null"

    def __init__(self, operand: Expr):
        self.operand = operand

    def children(self) -> Tuple[Expr, ...]:
        return (self.operand,)

    def __repr__(self) -> str:
        return f"{self.operand!r}.is_null()"


class IsInExpr(Expr):
    """True where the operand is one of a list of values."""

    kind = "is_in"

    def __init__(self, operand: Expr, values: list[Any]):
        self.operand, self.values = operand, values

    def children(self) -> Tuple[Expr, ...]:
        return (self.operand,)

    def __repr__(self) -> str:
        return f"{self.operand!r}.is_in({self.values!r})"


class ExprVisitor(Generic[T]):
    """Translates an expression tree, one ``visit_<kind>`` method per kind of expression.

    :meth:`visit` dispatches on ``expr.kind``. A kind without a method here (one added after
    the visitor was written) and the methods a subclass leaves alone go to
    :meth:`visit_unsupported`, which raises :class:`UnsupportedExpressionError`. Subclasses
    override the kinds they can translate and call ``self.visit`` on the children.

    Examples:
        >>> from shardflow.sdk.expressions import ExprVisitor, col
        >>> class ToSQL(ExprVisitor[str]):
        ...     def visit_column(self, expr):
        ...         return expr.name
        ...     def visit_literal(self, expr):
        ...         return repr(expr.value)
        ...     def visit_binary(self, expr):
        ...         op = {"&": "AND", "|": "OR", "==": "="}.get(expr.op, expr.op)
        ...         return f"({self.visit(expr.left)} {op} {self.visit(expr.right)})"
        >>> ToSQL().visit((col("x") > 1) & (col("y") == "a"))
        "((x > 1) AND (y = 'a'))"
    """

    def visit(self, expr: Expr) -> T:
        """Translate ``expr`` by calling the method for its kind."""
        if not isinstance(expr, Expr):
            raise TypeError(f"{type(self).__name__} visits expressions, got {type(expr).__name__}.")
        method: Optional[Callable[[Expr], T]] = getattr(self, f"visit_{expr.kind}", None)
        if method is None:
            return self.visit_unsupported(expr)
        return method(expr)

    def visit_unsupported(self, expr: Expr) -> T:
        """Called for kinds this visitor does not translate; raises by default."""
        raise UnsupportedExpressionError(
            f"{type(self).__name__} cannot translate {expr!r}: {expr.kind or type(expr).__name__} "
            "expressions are not supported here."
        )

    def visit_column(self, expr: ColumnExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_literal(self, expr: LiteralExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_binary(self, expr: BinaryExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_not(self, expr: NotExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_is_null(self, expr: IsNullExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_is_in(self, expr: IsInExpr) -> T:
        return self.visit_unsupported(expr)


_PYARROW_OPS = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "+": lambda a, b: _pc().add(a, b),
    "-": lambda a, b: _pc().subtract(a, b),
    "*": lambda a, b: _pc().multiply(a, b),
    "/": lambda a, b: _pc().divide(a, b),
    "%": lambda a, b: _pc().Expression._call("modulo", [a, b]),
}


class PyArrowExprVisitor(ExprVisitor["pa.compute.Expression"]):
    """Translates to a :class:`pyarrow.compute.Expression`.

    Args:
        column_name: Maps a column name of the expression to the name in the data being
            filtered (a file whose columns are named differently, say); identity by default.
    """

    def __init__(self, column_name: Optional[Callable[[str], str]] = None):
        self._column_name = column_name

    def visit_column(self, expr: ColumnExpr) -> Any:
        name = expr.name if self._column_name is None else self._column_name(expr.name)
        return _pc().field(name)

    def visit_literal(self, expr: LiteralExpr) -> Any:
        return _pc().scalar(expr.value)

    def visit_binary(self, expr: BinaryExpr) -> Any:
        return _PYARROW_OPS[expr.op](self.visit(expr.left), self.visit(expr.right))

    def visit_not(self, expr: NotExpr) -> Any:
        return ~self.visit(expr.operand)

    def visit_is_null(self, expr: IsNullExpr) -> Any:
        return self.visit(expr.operand).is_null()

    def visit_is_in(self, expr: IsInExpr) -> Any:
        return self.visit(expr.operand).isin(expr.values)


def conjuncts(expr: Expr) -> list[Expr]:
    """The terms of a chain of ``&``: ``a & (b & c)`` gives ``[a, b, c]``."""
    if isinstance(expr, BinaryExpr) and expr.op == "&":
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def col(name: str) -> ColumnExpr:
    """Reference a column by name.

    Examples:
        >>> import shardflow as sf
        >>> sf.range(5).filter(sf.col("id") >= 3).take_all()
        [{'id': 3}, {'id': 4}]
    """
    return ColumnExpr(name)


def lit(value: Any) -> LiteralExpr:
    """A constant for use in expressions."""
    return LiteralExpr(value)


def and_all(exprs: Iterable[Expr]) -> Expr:
    """AND together one or more expressions."""
    exprs = list(exprs)
    if not exprs:
        raise ValueError("and_all needs at least one expression.")
    result = exprs[0]
    for expr in exprs[1:]:
        result = result & expr
    return result


_AST_BINOPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "Mod": "%"}
_AST_CMPOPS = {"Eq": "==", "NotEq": "!=", "Gt": ">", "GtE": ">=", "Lt": "<", "LtE": "<="}


def parse_expr(text: str) -> Expr:
    """Parse a Python-syntax predicate such as ``"x > 0 and name in ['a', 'b']"``.

    Bare names are columns; literals are constants; ``and``/``or``/``not``, comparisons,
    ``+ - * / %``, ``in``/``not in`` a list, and ``is None``/``is not None`` are supported.

    Examples:
        >>> parse_expr("x > 1 and y in [1, 2]")
        ((col('x') > 1) & col('y').is_in([1, 2]))
    """
    import ast

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"An expression string must be non-empty, got {text!r}.")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"Cannot parse expression {text!r}: {exc.msg}.") from exc
    return _from_ast(tree.body, text)


def _from_ast(node: Any, text: str) -> Expr:
    import ast

    if isinstance(node, ast.Name):
        return ColumnExpr(node.id)
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
        compared: Optional[Expr] = None
        for i, (cmp_op, right_node) in enumerate(zip(node.ops, node.comparators)):
            part = _compare(cmp_op, left, right_node, text)
            compared = part if compared is None else compared & part
            if i + 1 < len(node.ops):
                left = _from_ast(right_node, text)
        assert compared is not None  # a comparison has at least one operator
        return compared
    raise ValueError(f"Unsupported syntax in expression {text!r}: {ast.dump(node)[:60]}.")


def _compare(op: Any, left: Expr, right_node: Any, text: str) -> Expr:
    import ast

    name = type(op).__name__
    if name in _AST_CMPOPS:
        return BinaryExpr(_AST_CMPOPS[name], left, _from_ast(right_node, text))
    if name in ("In", "NotIn"):
        values = ast.literal_eval(right_node)
        is_in = IsInExpr(left, list(values))
        return is_in if name == "In" else NotExpr(is_in)
    if name in ("Is", "IsNot") and isinstance(right_node, ast.Constant) and right_node.value is None:
        is_null = IsNullExpr(left)
        return is_null if name == "Is" else NotExpr(is_null)
    raise ValueError(f"Unsupported comparison in expression {text!r}.")
