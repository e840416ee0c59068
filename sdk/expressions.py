"""Engine expressions: column references, literals and operations over them.

The API is Ray Data's ``ray.data.expressions`` (``col``, ``lit``, ``udf``, ``download``,
operators, ``is_null``, ``is_in``, ``alias``, ``cast``...). Expressions are plain, picklable
trees. Translating one into another system's expressions (pyarrow compute, a table format's
scan filter) is the job of an :class:`ExprVisitor`: it has one ``visit_<kind>`` method per kind
of expression, so a connector translates the kinds it understands and gets a clear
:class:`UnsupportedExpressionError` for the others, and a new kind of expression needs one
new method in the visitors that can translate it. :meth:`Expr.to_pyarrow` is
:class:`PyArrowExprVisitor`; :meth:`Expr.evaluate` computes values on a table with
:class:`~shardflow.sdk.expression_eval.ArrowEvaluator`.

Examples:
    >>> from shardflow.sdk.expressions import col, lit
    >>> expr = (col("x") > 1) & col("name").is_in(["a", "b"])
    >>> expr
    ((col('x') > 1) & col('name').is_in(['a', 'b']))
    >>> sorted(expr.referenced_columns())
    ['name', 'x']
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import (
    Any,
    Generic,
    TypeVar,
)

import pyarrow as pa

from shardflow.sdk.datatype import DataType
from shardflow.sdk.expression_operations import (
    ARITHMETIC_OPS,
    BINARY_OPS,
    BOOLEAN_OPS,
    COMPARISONS,
    FLIPPED_COMPARISONS,
    UNARY_OPS,
    Operation,
)

T = TypeVar("T")

# Kinds whose evaluation calls Python code (a user function, a download, a random number
# generator) rather than Arrow: they cannot be handed to Arrow or pushed into a reader.
PYTHON_KINDS = frozenset({"udf", "download", "uuid", "monotonically_increasing_id", "random"})
# Kinds whose values differ from one evaluation to the next (Ray Data's non-idempotent ones).
_NON_IDEMPOTENT_KINDS = frozenset({"random", "uuid", "monotonically_increasing_id"})


class UnsupportedExpressionError(ValueError):
    """An expression has a kind (or an operator) that a visitor cannot translate."""


class ColumnNotFoundError(KeyError, ValueError):
    """A column named by an operation or an expression is not in the data.

    A ``KeyError`` (as Ray Data raises for ``drop_columns``) and a ``ValueError`` (as for
    the other column errors), with the message as it is written (``KeyError`` would quote it).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Expr:
    """Base class of expressions. Build them with :func:`col`, :func:`lit`, :func:`udf` and
    :func:`download`, and combine them with operators.

    Each subclass names its ``kind``; :meth:`ExprVisitor.visit` calls ``visit_<kind>``.
    ``name`` is the output name of a column reference or an alias, None for the others.
    """

    # The kind of a node: a class attribute, except for unary and binary expressions, whose
    # kind depends on their operation (``"not"``, ``"is_in"``, ...).
    kind: str = ""
    name: str | None = None

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions, for walks that do not care about the kind."""
        return ()

    def walk(self) -> Iterator[Expr]:
        """This expression and every sub-expression, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def to_pyarrow(self) -> pyarrow.compute.Expression:  # noqa: F821
        """Translate to a :class:`pyarrow.compute.Expression`.

        Raises:
            UnsupportedExpressionError: for kinds Arrow cannot run (``udf``, ``download``).
        """
        return PyArrowExprVisitor().visit(self)

    def referenced_columns(self) -> set[str]:
        """Names of the columns the expression reads."""
        return {e.name for e in self.walk() if isinstance(e, ColumnExpr)}

    def runs_python(self) -> bool:
        """Whether evaluating the expression calls Python code (a ``udf`` or ``download``),
        so it cannot be handed to Arrow or pushed into a reader."""
        return any(e.kind in PYTHON_KINDS for e in self.walk())

    def evaluate(self, table: pa.Table) -> pa.ChunkedArray:
        """Evaluate on a table, returning one value per row."""
        from shardflow.sdk.expression_eval import evaluate

        return evaluate(self, table)

    def structurally_equals(self, other: Any) -> bool:
        """Whether ``other`` is the same expression tree (``==`` builds a comparison)."""
        if type(other) is not type(self) or self._key() != other._key():
            return False
        mine, theirs = self.children(), other.children()
        return len(mine) == len(theirs) and all(
            a.structurally_equals(b) for a, b in zip(mine, theirs)
        )

    def _key(self) -> tuple[Any, ...]:
        """What identifies this node apart from its children (for structurally_equals)."""
        return ()

    def is_idempotent(self) -> bool:
        """Whether evaluating the expression twice gives the same values: False when it
        contains ``random()``, ``uuid()`` or ``monotonically_increasing_id()``, as in Ray Data."""
        return not any(e.kind in _NON_IDEMPOTENT_KINDS for e in self.walk())

    def _binary(self, op: Operation | str, other: Any, reverse: bool = False) -> BinaryExpr:
        other = other if isinstance(other, Expr) else LiteralExpr(other)
        return BinaryExpr(op, other, self) if reverse else BinaryExpr(op, self, other)

    def __eq__(self, other: Any) -> BinaryExpr:  # type: ignore[override]
        return self._binary("==", other)

    def __ne__(self, other: Any) -> BinaryExpr:  # type: ignore[override]
        return self._binary("!=", other)

    def __gt__(self, other: Any) -> BinaryExpr:
        return self._binary(">", other)

    def __ge__(self, other: Any) -> BinaryExpr:
        return self._binary(">=", other)

    def __lt__(self, other: Any) -> BinaryExpr:
        return self._binary("<", other)

    def __le__(self, other: Any) -> BinaryExpr:
        return self._binary("<=", other)

    def __and__(self, other: Any) -> BinaryExpr:
        return self._binary("&", other)

    def __rand__(self, other: Any) -> BinaryExpr:
        return self._binary("&", other, reverse=True)

    def __or__(self, other: Any) -> BinaryExpr:
        return self._binary("|", other)

    def __ror__(self, other: Any) -> BinaryExpr:
        return self._binary("|", other, reverse=True)

    def __add__(self, other: Any) -> BinaryExpr:
        return self._binary("+", other)

    def __radd__(self, other: Any) -> BinaryExpr:
        return self._binary("+", other, reverse=True)

    def __sub__(self, other: Any) -> BinaryExpr:
        return self._binary("-", other)

    def __rsub__(self, other: Any) -> BinaryExpr:
        return self._binary("-", other, reverse=True)

    def __mul__(self, other: Any) -> BinaryExpr:
        return self._binary("*", other)

    def __rmul__(self, other: Any) -> BinaryExpr:
        return self._binary("*", other, reverse=True)

    def __truediv__(self, other: Any) -> BinaryExpr:
        return self._binary("/", other)

    def __rtruediv__(self, other: Any) -> BinaryExpr:
        return self._binary("/", other, reverse=True)

    def __floordiv__(self, other: Any) -> BinaryExpr:
        return self._binary("//", other)

    def __rfloordiv__(self, other: Any) -> BinaryExpr:
        return self._binary("//", other, reverse=True)

    def __mod__(self, other: Any) -> BinaryExpr:
        return self._binary("%", other)

    def __rmod__(self, other: Any) -> BinaryExpr:
        return self._binary("%", other, reverse=True)

    def __neg__(self) -> BinaryExpr:
        return BinaryExpr(Operation.SUB, LiteralExpr(0), self)

    def __invert__(self) -> UnaryExpr:
        return UnaryExpr(Operation.NOT, self)

    def __bool__(self) -> bool:
        raise TypeError(
            "An expression has no truth value: combine conditions with & and | (not 'and'/'or'), "
            "and wrap each comparison in parentheses."
        )

    __hash__ = object.__hash__

    def is_null(self) -> UnaryExpr:
        """True where the value is null: ``UnaryExpr(Operation.IS_NULL, self)``."""
        return UnaryExpr(Operation.IS_NULL, self)

    def is_not_null(self) -> UnaryExpr:
        """True where the value is not null: ``UnaryExpr(Operation.IS_NOT_NULL, self)``."""
        return UnaryExpr(Operation.IS_NOT_NULL, self)

    def is_in(self, values: Iterable[Any]) -> BinaryExpr:
        """True where the value is one of ``values`` (a null value is in no list):
        ``BinaryExpr(Operation.IN, self, lit(values))``."""
        return BinaryExpr(Operation.IN, self, LiteralExpr(_literal_values(values, "is_in")))

    def not_in(self, values: Iterable[Any]) -> BinaryExpr:
        """True where the value is none of ``values`` (a null value is in no list)."""
        return BinaryExpr(Operation.NOT_IN, self, LiteralExpr(_literal_values(values, "not_in")))

    def alias(self, name: str) -> AliasExpr:
        """The same values under the output name ``name``.

        Examples:
            >>> from shardflow.sdk.expressions import col
            >>> (col("price") * col("qty")).alias("total").name
            'total'
        """
        operand = self.operand if isinstance(self, AliasExpr) else self
        return AliasExpr(operand, name)

    def cast(self, target_type: DataType, *, safe: bool = True) -> CastExpr:
        """The values converted to ``target_type`` (a :class:`DataType`).

        Args:
            target_type: An Arrow- or NumPy-backed DataType, e.g. ``DataType.float64()``.
            safe: Raise on overflow and lossy conversions (the default); False allows them.

        Examples:
            >>> from shardflow.sdk.expressions import col
            >>> from shardflow.sdk.datatype import DataType
            >>> col("id").cast(DataType.string())
            col('id').cast(DataType(arrow:string))
        """
        return CastExpr(self, target_type, safe)


def _literal_values(values: Any, method: str) -> list:
    if isinstance(values, LiteralExpr):
        values = values.value
    if isinstance(values, Expr):
        raise TypeError(f"{method} takes a list of values, got the expression {values!r}.")
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = [values]
    return list(values)


class ColumnExpr(Expr):
    """A reference to a column by name."""

    kind = "column"

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise TypeError(f"A column name must be a non-empty string, got {name!r}.")
        self.name = name

    def _key(self) -> tuple[Any, ...]:
        return (self.name,)

    def __repr__(self) -> str:
        return f"col({self.name!r})"


class LiteralExpr(Expr):
    """A constant value, the same in every row."""

    kind = "literal"

    def __init__(self, value: Any):
        self.value = value

    @property
    def data_type(self) -> DataType:
        return DataType.infer_dtype(self.value)

    def _key(self) -> tuple[Any, ...]:
        return (type(self.value), repr(self.value))

    def __repr__(self) -> str:
        return repr(self.value)


class BinaryExpr(Expr):
    """``left <op> right``: a comparison, boolean or arithmetic operation, or a test of
    membership in a list (``Operation.IN`` / ``NOT_IN``, whose right side is a literal list).

    Args:
        op: An :class:`Operation` (or its symbol, ``"+"``, ``">="``...).
        left: The left operand.
        right: The right operand.

    Examples:
        >>> from shardflow.sdk.expressions import BinaryExpr, Operation, col, lit
        >>> BinaryExpr(Operation.ADD, col("x"), lit(5)).structurally_equals(col("x") + 5)
        True
    """

    def __init__(self, op: Operation | str, left: Expr, right: Expr):
        op = Operation.of(op)
        if op not in BINARY_OPS:
            raise ValueError(
                f"{op!r} is not a binary operation; expected one of {[o.name for o in BINARY_OPS]}."
            )
        if not isinstance(left, Expr) or not isinstance(right, Expr):
            raise TypeError(
                f"BinaryExpr takes expressions on both sides, got {type(left).__name__} and "
                f"{type(right).__name__}: wrap constants in lit()."
            )
        if op in (Operation.IN, Operation.NOT_IN) and not isinstance(right, LiteralExpr):
            raise ValueError(
                f"is_in/not_in operations require the right operand to be a literal list, got "
                f"{type(right).__name__}."
            )
        self.op, self.left, self.right = op, left, right
        self.kind = _BINARY_KINDS.get(op, "binary")

    @property
    def operand(self) -> Expr:
        """The tested value of ``IN`` / ``NOT_IN`` (the left side)."""
        return self.left

    @property
    def values(self) -> list:
        """The list of ``IN`` / ``NOT_IN`` (the right side's value, as a list)."""
        return _literal_values(self.right, self.op.value)

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def structurally_equals(self, other: Any) -> bool:
        return (
            isinstance(other, BinaryExpr)
            and self.op is other.op
            and self.left.structurally_equals(other.left)
            and self.right.structurally_equals(other.right)
        )

    def __repr__(self) -> str:
        if self.op is Operation.IN:
            return f"{self.left!r}.is_in({self.values!r})"
        if self.op is Operation.NOT_IN:
            return f"{self.left!r}.not_in({self.values!r})"
        return f"({self.left!r} {self.op.symbol} {self.right!r})"


_BINARY_KINDS = {Operation.IN: "is_in", Operation.NOT_IN: "not_in"}
_UNARY_KINDS = {
    Operation.NOT: "not",
    Operation.IS_NULL: "is_null",
    Operation.IS_NOT_NULL: "is_not_null",
}


class UnaryExpr(Expr):
    """An operation on one operand: ``Operation.NOT`` (``~x``), ``IS_NULL``
    (``x.is_null()``) or ``IS_NOT_NULL`` (``x.is_not_null()``), as Ray Data's ``UnaryExpr``.

    Its ``kind`` for visitors is ``"not"``, ``"is_null"`` or ``"is_not_null"``.

    Args:
        op: The operation.
        operand: The expression it applies to.

    Raises:
        ValueError: for an operation that takes two operands (Ray Data fails only when the
            expression runs).

    Examples:
        >>> from shardflow.sdk.expressions import Operation, UnaryExpr, col
        >>> UnaryExpr(Operation.IS_NULL, col("x")).structurally_equals(col("x").is_null())
        True
    """

    def __init__(self, op: Operation | str, operand: Expr):
        op = Operation.of(op)
        if op not in UNARY_OPS:
            raise ValueError(
                f"{op!r} is not a unary operation; expected one of {[o.name for o in UNARY_OPS]}."
            )
        if not isinstance(operand, Expr):
            raise TypeError(
                f"UnaryExpr takes an expression, got {type(operand).__name__}: wrap constants "
                "in lit()."
            )
        self.op, self.operand = op, operand
        self.kind = _UNARY_KINDS[op]

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def structurally_equals(self, other: Any) -> bool:
        return (
            isinstance(other, UnaryExpr)
            and self.op is other.op
            and self.operand.structurally_equals(other.operand)
        )

    def __repr__(self) -> str:
        if self.op is Operation.NOT:
            return f"~{self.operand!r}"
        return f"{self.operand!r}.{self.op.value}()"


class NotExpr(UnaryExpr):
    """Boolean negation: ``UnaryExpr(Operation.NOT, operand)``."""

    def __init__(self, operand: Expr):
        super().__init__(Operation.NOT, operand)


class IsNullExpr(UnaryExpr):
    """True where the operand is null: ``UnaryExpr(Operation.IS_NULL, operand)``."""

    def __init__(self, operand: Expr):
        super().__init__(Operation.IS_NULL, operand)


class IsInExpr(BinaryExpr):
    """True where the operand is one of a list of values:
    ``BinaryExpr(Operation.IN, operand, lit(values))``."""

    def __init__(self, operand: Expr, values: list):
        super().__init__(Operation.IN, operand, LiteralExpr(list(values)))


class AliasExpr(Expr):
    """The operand's values under another output name (``expr.alias(name)``)."""

    kind = "alias"

    def __init__(self, operand: Expr, name: str):
        if not isinstance(name, str) or not name:
            raise TypeError(f"An alias must be a non-empty string, got {name!r}.")
        self.operand, self.name = operand, name

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _key(self) -> tuple[Any, ...]:
        return (self.name,)

    def __repr__(self) -> str:
        return f"{self.operand!r}.alias({self.name!r})"


class CastExpr(Expr):
    """The operand's values converted to another type (``expr.cast(DataType...)``)."""

    kind = "cast"

    def __init__(self, operand: Expr, data_type: DataType, safe: bool = True):
        if not isinstance(data_type, DataType):
            raise TypeError(
                f"target_type must be a shardflow.datatype.DataType, got: {type(data_type).__name__}. "
                "Use the DataType factories (e.g., DataType.int64(), DataType.string())."
            )
        if data_type.is_python_type():
            raise TypeError(
                "A DataType backed by a Python type (e.g. DataType(int)) cannot be cast to: use "
                "an Arrow-backed DataType instead, such as DataType.int64() or DataType.string()."
            )
        self.operand, self.data_type, self.safe = operand, data_type, bool(safe)

    def arrow_type(self) -> pa.DataType:
        return self.data_type.to_arrow_dtype()

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _key(self) -> tuple[Any, ...]:
        return (self.data_type, self.safe)

    def __repr__(self) -> str:
        return f"{self.operand!r}.cast({self.data_type!r})"


class UDFExpr(Expr):
    """A call of a user function on columns of values (made by :func:`udf`).

    The function receives one Arrow array per argument (a literal argument as its value) for
    each batch, and returns an array of one value per row.
    """

    kind = "udf"

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Expr, ...],
        kwargs: dict[str, Expr],
        return_dtype: DataType,
    ):
        self.fn, self.args, self.kwargs, self.return_dtype = (
            fn,
            tuple(args),
            dict(kwargs),
            return_dtype,
        )

    def children(self) -> tuple[Expr, ...]:
        return self.args + tuple(self.kwargs.values())

    def _key(self) -> tuple[Any, ...]:
        return (self.fn, tuple(self.kwargs), self.return_dtype)

    def __repr__(self) -> str:
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{_callable_name(self.fn)}({', '.join(shown)})"


class DownloadExpr(Expr):
    """The bytes of the file each row's URI names (made by :func:`download`)."""

    kind = "download"

    def __init__(self, uri_column_name: str, filesystem: Any = None):
        if not isinstance(uri_column_name, str) or not uri_column_name:
            raise TypeError(f"download needs a column name, got {uri_column_name!r}.")
        self.uri_column_name, self.filesystem = uri_column_name, filesystem

    def children(self) -> tuple[Expr, ...]:
        return (ColumnExpr(self.uri_column_name),)

    def _key(self) -> tuple[Any, ...]:
        return (self.uri_column_name,)

    def __repr__(self) -> str:
        return f"download({self.uri_column_name!r})"


def _callable_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


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
        ...         op = {"&": "AND", "|": "OR", "==": "="}.get(expr.op.symbol, expr.op.symbol)
        ...         return f"({self.visit(expr.left)} {op} {self.visit(expr.right)})"
        >>> ToSQL().visit((col("x") > 1) & (col("y") == "a"))
        "((x > 1) AND (y = 'a'))"
    """

    def visit(self, expr: Expr) -> T:
        """Translate ``expr`` by calling the method for its kind."""
        if not isinstance(expr, Expr):
            raise TypeError(f"{type(self).__name__} visits expressions, got {type(expr).__name__}.")
        method: Callable[[Expr], T] | None = getattr(self, f"visit_{expr.kind}", None)
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

    def visit_not(self, expr: UnaryExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_is_null(self, expr: UnaryExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_is_not_null(self, expr: UnaryExpr) -> T:
        """``x.is_not_null()``; by default visited as ``~x.is_null()``."""
        return self.visit(NotExpr(IsNullExpr(expr.operand)))

    def visit_is_in(self, expr: BinaryExpr) -> T:
        """``x.is_in(values)``: ``expr.operand`` and the list ``expr.values``."""
        return self.visit_unsupported(expr)

    def visit_not_in(self, expr: BinaryExpr) -> T:
        """``x.not_in(values)``; by default visited as ``~x.is_in(values)``."""
        return self.visit(NotExpr(IsInExpr(expr.operand, expr.values)))

    def visit_alias(self, expr: AliasExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_cast(self, expr: CastExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_udf(self, expr: UDFExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_download(self, expr: DownloadExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_uuid(self, expr: UUIDExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_monotonically_increasing_id(self, expr: MonotonicallyIncreasingIdExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_random(self, expr: RandomExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_struct_field(self, expr: StructFieldExpr) -> T:
        return self.visit_unsupported(expr)

    def visit_star(self, expr: StarExpr) -> T:
        raise TypeError(
            f"{type(self).__name__} cannot translate star(): it stands for all the input "
            "columns, not for one column of values."
        )

    def visit_unnest(self, expr: UnnestExpr) -> T:
        raise TypeError(
            "unnest() expands to multiple columns, so it has no single value to evaluate. "
            "Pass it directly to `with_columns`; it cannot be composed into another expression."
        )


def conjuncts(expr: Expr) -> list:
    """The terms of a chain of ``&``: ``a & (b & c)`` gives ``[a, b, c]``."""
    if isinstance(expr, BinaryExpr) and expr.op is Operation.AND:
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def col(name: str) -> ColumnExpr:
    """Reference a column by name.

    Examples:
        >>> import shardflow as sf
        >>> sf.range(5).filter(expr=sf.col("id") >= 3).take_all()
        [{'id': 3}, {'id': 4}]
    """
    return ColumnExpr(name)


def lit(value: Any) -> LiteralExpr:
    """A constant for use in expressions.

    Examples:
        >>> import shardflow as sf
        >>> sf.range(2).with_column("one", sf.lit(1)).take_all()
        [{'id': 0, 'one': 1}, {'id': 1, 'one': 1}]
    """
    return LiteralExpr(value)


def download(uri_column_name: str, *, filesystem: Any = None) -> DownloadExpr:
    """The bytes of the file named by each row's URI, for ``Dataset.with_column``.

    Args:
        uri_column_name: The column holding paths or URIs (``s3://``, ``gs://``, local).
        filesystem: An fsspec or ``pyarrow.fs`` filesystem; inferred from the URIs' scheme
            when None. A null URI gives a null; a file that cannot be read raises an error
            naming it and the reason.

    Examples:
        >>> import shardflow as sf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> _ = open(path, "wb").write(b"hello")
        >>> sf.from_items([{"uri": path}]).with_column("bytes", sf.download("uri")).take_all()[0]["bytes"]
        b'hello'
    """
    return DownloadExpr(uri_column_name, filesystem)


class _LazyInstance:
    """A callable class's instance, created on first call in the process that runs it."""

    def __init__(self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.cls, self.args, self.kwargs = cls, args, kwargs
        self._instance: Any = None
        self.__name__ = cls.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._instance is None:
            self._instance = self.cls(*self.args, **self.kwargs)
        call = self._instance.__call__
        if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
            return _run_async_call(self._instance, args, kwargs)
        return self._instance(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_instance"] = None  # every process builds its own
        return state

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _LazyInstance) and (self.cls, self.args, self.kwargs) == (
            other.cls,
            other.args,
            other.kwargs,
        )

    __hash__ = object.__hash__


def _run_async_call(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An async ``__call__``'s result, awaited on an event loop of its own, as Ray Data runs
    callable classes in expressions: a coroutine's value, or an async generator's last item
    (None when it yields nothing). An ``async def`` function (not a class) is not awaited,
    in Ray Data either: it fails as a UDF returning a coroutine."""
    import asyncio

    async def last_item() -> Any:
        result = instance(*args, **kwargs)
        if inspect.isasyncgen(result):
            items = [item async for item in result]
            return items[-1] if items else None
        return await result

    return asyncio.run(last_item())


def _expr_args(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Expr, ...], dict[str, Expr]]:
    def as_expr(value: Any) -> Expr:
        return value if isinstance(value, Expr) else LiteralExpr(value)

    return tuple(as_expr(a) for a in args), {k: as_expr(v) for k, v in kwargs.items()}


def udf(return_dtype: DataType) -> Callable[[Any], Any]:
    """Make a function (or a callable class) over batches of values usable in expressions.

    The function receives one ``pyarrow`` array per column argument for each batch (literal
    arguments as they are) and returns one value per row (an Arrow array, NumPy array or
    pandas Series). A callable class is instantiated with its constructor arguments once in
    each process that runs it, then called per batch.

    Args:
        return_dtype: The :class:`DataType` of the values returned.

    Examples:
        >>> import pyarrow.compute as pc
        >>> import shardflow as sf
        >>> from shardflow.datatype import DataType
        >>> @sf.udf(return_dtype=DataType.int64())
        ... def add_one(x):
        ...     return pc.add(x, 1)
        >>> sf.range(2).with_column("next", add_one(sf.col("id"))).take_all()
        [{'id': 0, 'next': 1}, {'id': 1, 'next': 2}]
    """
    if not isinstance(return_dtype, DataType):
        raise TypeError(
            f"udf needs return_dtype, a shardflow.datatype.DataType; got {type(return_dtype).__name__}."
        )

    def decorate(fn_or_class: Any) -> Any:
        if isinstance(fn_or_class, type):
            return _udf_class(fn_or_class, return_dtype)
        if not callable(fn_or_class):
            raise TypeError(f"udf decorates a function or a callable class, got {fn_or_class!r}.")

        @functools.wraps(fn_or_class)
        def build(*args: Any, **kwargs: Any) -> UDFExpr:
            expr_args, expr_kwargs = _expr_args(args, kwargs)
            return UDFExpr(fn_or_class, expr_args, expr_kwargs, return_dtype)

        build._original_fn = fn_or_class  # type: ignore[attr-defined]
        return build

    return decorate


def pyarrow_udf(return_dtype: DataType) -> Callable[[Callable[..., Any]], Callable[..., UDFExpr]]:
    """Make a function of PyArrow arrays usable in expressions, as Ray Data's ``pyarrow_udf``.

    The function receives a ``pyarrow`` array for each column argument (a pandas Series or
    NumPy array given as a literal argument is converted to one) and returns one value per
    row. Like :func:`udf`, the result is opaque to the optimizer: filters on it are not
    pushed into reads.

    Args:
        return_dtype: The :class:`DataType` of the values returned.

    Returns:
        A decorator turning the function into a builder of :class:`UDFExpr`.

    Examples:
        >>> import pyarrow.compute as pc
        >>> import shardflow as sf
        >>> from shardflow.datatype import DataType
        >>> from shardflow.expressions import col, pyarrow_udf
        >>> @pyarrow_udf(return_dtype=DataType.string())
        ... def shout(x):
        ...     return pc.utf8_upper(x)
        >>> sf.from_items([{"s": "hi"}]).with_column("loud", shout(col("s"))).take_all()
        [{'s': 'hi', 'loud': 'HI'}]
    """
    make_udf = udf(return_dtype)

    def decorate(fn: Callable[..., Any]) -> Callable[..., UDFExpr]:
        if isinstance(fn, type) or not callable(fn):
            raise TypeError(f"pyarrow_udf decorates a function, got {fn!r}.")
        return make_udf(_ArrowInputs(fn))

    return decorate


class _ArrowInputs:
    """Calls ``fn`` with pandas Series and NumPy arrays among its arguments as Arrow arrays."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(
            *(_as_arrow_input(a) for a in args),
            **{k: _as_arrow_input(v) for k, v in kwargs.items()},
        )


def _as_arrow_input(value: Any) -> Any:
    import numpy as np

    if type(value).__name__ == "Series" and hasattr(value, "to_numpy"):
        return pa.Array.from_pandas(value)
    if isinstance(value, np.ndarray):
        return pa.array(value)
    return value


def _udf_class(cls: type, return_dtype: DataType) -> type:
    if not callable(getattr(cls, "__call__", None)):  # noqa: B004  (instances, not the class)
        raise TypeError(f"udf decorates callable classes; {cls.__name__} has no __call__.")

    class ExpressionCallable:
        """Instances build expressions: ``Cls(args)(col("x"))`` calls ``Cls(args)(x)`` per batch."""

        def __init__(self, *args: Any, **kwargs: Any):
            self._fn = _LazyInstance(cls, args, kwargs)

        def __call__(self, *args: Any, **kwargs: Any) -> UDFExpr:
            expr_args, expr_kwargs = _expr_args(args, kwargs)
            return UDFExpr(self._fn, expr_args, expr_kwargs, return_dtype)

    ExpressionCallable.__name__ = cls.__name__
    ExpressionCallable.__qualname__ = cls.__qualname__
    ExpressionCallable.__module__ = cls.__module__
    return ExpressionCallable


def and_all(exprs: Iterable[Expr]) -> Expr:
    """AND together one or more expressions."""
    exprs = list(exprs)
    if not exprs:
        raise ValueError("and_all needs at least one expression.")
    result = exprs[0]
    for expr in exprs[1:]:
        result = result & expr
    return result


# The nodes of generated values and of projections, the translators and the parser live in
# modules of their own; they are imported here so that ``shardflow.sdk.expressions`` offers
# the whole API.
from shardflow.sdk.expression_arrow import PyArrowExprVisitor  # noqa: E402
from shardflow.sdk.expression_generated import (  # noqa: E402
    MonotonicallyIncreasingIdExpr,
    RandomExpr,
    UUIDExpr,
    monotonically_increasing_id,
    random,
    uuid,
)
from shardflow.sdk.expression_parsing import parse_expr  # noqa: E402
from shardflow.sdk.expression_projection import (  # noqa: E402
    StarExpr,
    StructFieldExpr,
    UnnestExpr,
    star,
    unnest,
)

__all__ = [
    "ARITHMETIC_OPS",
    "BOOLEAN_OPS",
    "COMPARISONS",
    "FLIPPED_COMPARISONS",
    "AliasExpr",
    "BinaryExpr",
    "CastExpr",
    "ColumnExpr",
    "ColumnNotFoundError",
    "DataType",
    "DownloadExpr",
    "Expr",
    "ExprVisitor",
    "IsInExpr",
    "IsNullExpr",
    "LiteralExpr",
    "MonotonicallyIncreasingIdExpr",
    "NotExpr",
    "Operation",
    "PyArrowExprVisitor",
    "RandomExpr",
    "StarExpr",
    "StructFieldExpr",
    "UDFExpr",
    "UUIDExpr",
    "UnaryExpr",
    "UnnestExpr",
    "UnsupportedExpressionError",
    "and_all",
    "col",
    "conjuncts",
    "download",
    "lit",
    "monotonically_increasing_id",
    "parse_expr",
    "random",
    "star",
    "udf",
    "unnest",
    "uuid",
]
