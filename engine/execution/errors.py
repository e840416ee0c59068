"""Errors that reach the user from workers."""

from __future__ import annotations

import pickle
import traceback
from typing import Any

from shardflow.sdk.expressions import ColumnNotFoundError
from shardflow.sdk.filesystems import redact_text

__all__ = [
    "ColumnNotFoundError",
    "DriverNodeLostError",
    "UserCodeError",
    "UserCodeException",
    "WorkerCrashedError",
    "missing_column_message",
]


def missing_column_message(column: str, names: list[str]) -> str:
    """Ray Data's words for a column an aggregation, a sort or a groupby names that the data
    lacks (users match them in ``pytest.raises``)."""
    return (
        f"You specified the column '{column}', but there's no such column in the dataset. "
        f"The dataset has columns: {names}"
    )


class UserCodeException(Exception):
    """An exception that originates in user code: a function given to ``map``,
    ``map_batches``, ``filter``, a ``udf`` expression, a datasource or datasink.

    Ray Data's name; catch it to handle any failure of user code. The exceptions shardflow
    raises are :class:`UserCodeError` instances, which are also instances of the user's own
    exception type.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.exceptions import UserCodeException
        >>> def bad(row):
        ...     raise KeyError("no such key")
        >>> try:
        ...     sf.range(1).map(bad).take_all()
        ... except UserCodeException as exc:
        ...     isinstance(exc, KeyError)
        True
    """


class UserCodeError(UserCodeException):
    """An exception raised by a user function, re-raised on the driver.

    The message names the operator, and ``user_traceback`` holds the traceback from the worker.
    On the driver the raised object is also an instance of the original exception's type where
    possible, so ``except ZeroDivisionError`` still catches it, and of
    :class:`UserCodeException` (Ray Data's name), so ``except UserCodeException`` does too.
    """

    def __init__(
        self,
        message: str,
        operator: str = "",
        user_traceback: str = "",
        cause_pickle: bytes | None = None,
    ):
        super().__init__(message)
        self.operator = operator
        self.user_traceback = user_traceback
        self.cause_pickle = cause_pickle

    def __reduce__(self):
        return (UserCodeError, (str(self), self.operator, self.user_traceback, self.cause_pickle))

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class WorkerCrashedError(RuntimeError):
    """A worker process died while running a task."""


class DriverNodeLostError(RuntimeError):
    """The Ray node the driver runs on died: Ray cannot recover the execution.

    The driver owns every block of its executions (Ray keeps an object's metadata with its
    owner) and talks to the cluster through its node's raylet; with the node gone, neither
    a retry nor lineage reconstruction can bring the execution back.
    """

    def __init__(self, detail: str = ""):
        self.detail = detail
        super().__init__(
            "The Ray node this driver runs on died (its raylet is gone). Ray cannot recover "
            "an execution whose driver's node is lost: the driver owns every block, and "
            "retries and lineage reconstruction go through that node. Run the job again from "
            "a driver on a live node" + (f" (Ray: {detail})" if detail else ".")
        )

    def __reduce__(self) -> tuple:
        return DriverNodeLostError, (self.detail,)


def is_retryable(error: BaseException | None, retry_exceptions: Any) -> bool:
    """Whether a task that failed with ``error`` (the user's own exception, or
    WorkerCrashedError) may run again.

    A dead worker always may: the work itself may be fine. An exception may when the
    operation's ``retry_exceptions`` allows it: True for any Exception, a list or tuple for
    those types.
    """
    if isinstance(error, WorkerCrashedError):
        return True
    if retry_exceptions is True:
        return isinstance(error, Exception)
    if isinstance(retry_exceptions, (list, tuple)) and error is not None:
        return isinstance(error, tuple(retry_exceptions))
    return False


class TaskFailure:
    """A picklable record of an exception in a worker, turned back into an exception on the driver."""

    def __init__(self, operator: str, exc: BaseException):
        if isinstance(exc, UserCodeError):
            self.operator = exc.operator or operator
            self.message = str(exc)
            self.traceback = exc.user_traceback
            root = exc.__cause__
            if root is None and exc.cause_pickle is not None:
                self.pickled = exc.cause_pickle
                return
        else:
            self.operator = operator
            self.traceback = redact_text(
                "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            )
            self.message = redact_text(
                f"{operator} failed: {type(exc).__name__}: {exc}\n\n"
                f"Traceback from the worker:\n{self.traceback}"
            )
            root = exc
        self.pickled = None
        if root is not None:
            try:
                self.pickled = pickle.dumps(root)
                pickle.loads(self.pickled)
            except Exception:
                self.pickled = None

    def original(self) -> BaseException | None:
        if self.pickled is None:
            return None
        try:
            return pickle.loads(self.pickled)
        except Exception:
            return None

    def to_exception(self) -> BaseException:
        """The exception to raise on the driver.

        ``SystemExit`` and ``KeyboardInterrupt`` from a user function are raised as they are,
        so that ``sys.exit(3)`` in a UDF ends the script with status 3; so is
        ``DriverNodeLostError``, which no user code raised.
        """
        original = self.original()
        if original is not None:
            try:  # the user's exception is chained as the cause: no secrets there either
                original.args = tuple(
                    redact_text(a) if isinstance(a, str) else a for a in original.args
                )
            except Exception:
                pass
        if isinstance(original, (SystemExit, KeyboardInterrupt, DriverNodeLostError)):
            return original  # not the user's code: a lost driver node says so itself
        error = UserCodeError(self.message, self.operator, self.traceback)
        return _as_instance_of(error, original)


def wrap_user_exception(operator: str, exc: BaseException) -> UserCodeError:
    """Wrap an exception raised by a user function inside a worker."""
    tb = redact_text("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    message = redact_text(
        f"{operator} failed: {type(exc).__name__}: {exc}\n\nTraceback from the user function:\n{tb}"
    )
    try:
        cause_pickle = pickle.dumps(exc)
        pickle.loads(cause_pickle)
    except Exception:
        cause_pickle = None
    error = UserCodeError(message, operator, tb, cause_pickle)
    error.__cause__ = exc
    return error


_DUAL_CLASSES: dict = {}


def _as_instance_of(error: UserCodeError, original: BaseException | None) -> BaseException:
    """Make ``error`` also an instance of ``type(original)`` so users can catch the original type."""
    if original is None or isinstance(original, UserCodeError):
        return error
    cls = type(original)
    try:
        dual = _DUAL_CLASSES.get(cls)
        if dual is None:

            def __init__(self, message, operator, user_traceback):
                UserCodeError.__init__(self, message, operator, user_traceback)

            dual = type(
                f"UserCodeError[{cls.__name__}]",
                (UserCodeError, cls),
                {"__init__": __init__, "__str__": UserCodeError.__str__},
            )
            _DUAL_CLASSES[cls] = dual
        result = dual(str(error), error.operator, error.user_traceback)
        result.__cause__ = original
        if isinstance(original, OSError):  # errno tells ENOSPC from EACCES without parsing
            result.errno, result.strerror = original.errno, original.strerror
            result.filename = original.filename
        return result
    except Exception:  # a class whose constructor refuses a message (Ray's ActorDiedError)
        error.__cause__ = original
        return error
