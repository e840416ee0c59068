"""Exceptions users catch, under Ray Data's names (``ray.data.exceptions``).

A failing user function raises a :class:`UserCodeError`, which is also an instance of the
user's own exception type and of each name Ray users catch for it: ``UserCodeException``,
``RayDataUserCodeException`` and ``RayTaskError`` (``ray.exceptions.RayTaskError``, which
Ray raises around an exception from a task; here an alias of :class:`UserCodeError`).

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

#: Ray's ``ray.exceptions.RayTaskError``: what a failing task raises on the driver.
RayTaskError = UserCodeError
#: Ray Data's ``RayDataUserCodeException``: an exception from user code.
RayDataUserCodeException = UserCodeError


class SystemException(Exception):
    """An exception from shardflow's own code rather than from user code (Ray Data's
    name); it indicates a bug in shardflow."""


__all__ = [
    "ColumnNotFoundError",
    "RayDataUserCodeException",
    "RayTaskError",
    "SystemException",
    "UnsupportedExpressionError",
    "UserCodeError",
    "UserCodeException",
    "WorkerCrashedError",
]
