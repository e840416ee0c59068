"""The operations of expressions: Ray Data's ``Operation`` enum.

A :class:`~shardflow.sdk.expressions.BinaryExpr` or
:class:`~shardflow.sdk.expressions.UnaryExpr` names its operation with a member of
:class:`Operation`, as in Ray Data (``BinaryExpr(Operation.ADD, col("x"), lit(5))``). The
operators' symbols (``"+"``, ``">="``, ...) are accepted wherever an operation is expected
and give the same member, and :attr:`Operation.symbol` gives the symbol back for printing.

Examples:
    >>> from shardflow.sdk.expression_operations import Operation
    >>> Operation.GE.value, Operation.GE.symbol, Operation.of(">=") is Operation.GE
    ('ge', '>=', True)
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Operation(str, Enum):
    """The operations of expressions, with Ray Data's names and values.

    Arithmetic: ADD ``+``, SUB ``-``, MUL ``*``, DIV ``/``, MOD ``%``, FLOORDIV ``//``.
    Comparisons: GT, LT, GE, LE, EQ, NE. Boolean: AND ``&``, OR ``|``, NOT ``~``.
    Predicates: IS_NULL, IS_NOT_NULL, IN and NOT_IN (a list of values).
    """

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MOD = "mod"
    FLOORDIV = "floordiv"
    GT = "gt"
    LT = "lt"
    GE = "ge"
    LE = "le"
    EQ = "eq"
    NE = "ne"
    AND = "and"
    OR = "or"
    NOT = "not"
    IS_NULL = "is_null"
    IS_NOT_NULL = "is_not_null"
    IN = "in"
    NOT_IN = "not_in"

    @property
    def symbol(self) -> str:
        """The operator as written in Python (``">="``), or the value for predicates."""
        return _SYMBOLS.get(self, self.value)

    @classmethod
    def of(cls, op: Any) -> Operation:
        """The member for ``op``: a member, its value (``"ge"``) or its symbol (``">="``).

        Raises:
            ValueError: naming the operations there are.
        """
        if isinstance(op, Operation):
            return op
        if isinstance(op, str):
            found = _BY_SYMBOL.get(op)
            if found is not None:
                return found
            try:
                return cls(op)
            except ValueError:
                pass
        raise ValueError(
            f"Unknown operation {op!r}; expected an Operation or one of "
            f"{sorted(_BY_SYMBOL)} / {[m.value for m in cls]}."
        )


_SYMBOLS = {
    Operation.ADD: "+",
    Operation.SUB: "-",
    Operation.MUL: "*",
    Operation.DIV: "/",
    Operation.MOD: "%",
    Operation.FLOORDIV: "//",
    Operation.GT: ">",
    Operation.LT: "<",
    Operation.GE: ">=",
    Operation.LE: "<=",
    Operation.EQ: "==",
    Operation.NE: "!=",
    Operation.AND: "&",
    Operation.OR: "|",
    Operation.NOT: "~",
}
_BY_SYMBOL = {symbol: op for op, symbol in _SYMBOLS.items()}

COMPARISONS = (
    Operation.EQ,
    Operation.NE,
    Operation.GT,
    Operation.GE,
    Operation.LT,
    Operation.LE,
)
BOOLEAN_OPS = (Operation.AND, Operation.OR)
ARITHMETIC_OPS = (
    Operation.ADD,
    Operation.SUB,
    Operation.MUL,
    Operation.DIV,
    Operation.MOD,
    Operation.FLOORDIV,
)
#: The operations of a BinaryExpr: ``IN`` and ``NOT_IN`` test against a literal list.
BINARY_OPS = COMPARISONS + BOOLEAN_OPS + ARITHMETIC_OPS + (Operation.IN, Operation.NOT_IN)
#: The operations of a UnaryExpr.
UNARY_OPS = (Operation.NOT, Operation.IS_NULL, Operation.IS_NOT_NULL)

# ``a op b`` is ``b flipped(op) a``: lets a visitor put the column on the left.
FLIPPED_COMPARISONS = {
    Operation.EQ: Operation.EQ,
    Operation.NE: Operation.NE,
    Operation.GT: Operation.LT,
    Operation.GE: Operation.LE,
    Operation.LT: Operation.GT,
    Operation.LE: Operation.GE,
}

__all__ = [
    "ARITHMETIC_OPS",
    "BINARY_OPS",
    "BOOLEAN_OPS",
    "COMPARISONS",
    "FLIPPED_COMPARISONS",
    "UNARY_OPS",
    "Operation",
]
