"""Exceptions users catch, under Ray Data's names (``ray.data.exceptions``).

Examples:
    >>> import shardflow as sf
    >>> from shardflow.exceptions import UserCodeException
    >>> try:
    ...     sf.range(2).map(lambda row: 1 / 0).take_all()
    ... except UserCodeException as exc:
    ...     print(isinstance(exc, ZeroDivisionError))
    True
"""

from __future__ import annotations

from shardflow.engine.execution.errors import (
    ColumnNotFoundError,
    UserCodeError,
    UserCodeException,
    WorkerCrashedError,
)
from shardflow.sdk.expressions import UnsupportedExpressionError

__all__ = [
    "ColumnNotFoundError",
    "UnsupportedExpressionError",
    "UserCodeError",
    "UserCodeException",
    "WorkerCrashedError",
]
