"""Errors that reach the user from workers.

A task's exception is recorded where it was raised (``user_traceback.capture``) and
re-raised on the driver as a :class:`UserCodeError` that is also an instance of the original
type. Its message names the operator; the traceback it shows is the user's code only, unless
``DataContext.log_internal_stack_trace`` asks for shardflow's frames too. Only an exception
raised by a call of the user's function is labelled as coming from it.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.user_traceback import (
    ENV_SHOW_INTERNAL,
    ErrorRecord,
    capture,
    format_record,
    show_internal_frames,
)
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


_HINT = (
    "shardflow's frames hidden; DataContext.log_internal_stack_trace = True or "
    f"{ENV_SHOW_INTERNAL}=1 shows them"
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
    """An exception raised in a task of an operator, re-raised on the driver.

    The message names the operator and shows the traceback of the user's code (shardflow's
    frames left out unless ``DataContext.log_internal_stack_trace`` is set); it says "from
    the user function" only when a call of the user's function raised it. On the driver the
    raised object is also an instance of the original exception's type where possible, so
    ``except ZeroDivisionError`` still catches it, and of :class:`UserCodeException` (Ray
    Data's name, which Ray Data also raises for errors of its built-in operators such as
    ``select_columns``), so ``except UserCodeException`` does too.

    Args:
        message: The first line: the operator and the exception.
        operator: The operator's name.
        user_traceback: A traceback as text (used when there is no ``record``).
        cause_pickle: The original exception, pickled.
        record: The exception's frames (``user_traceback.capture``).
        from_user_function: Whether a call of the user's function raised it.
        expected: Whether, without user frames, the message alone explains it (an error in
            the data or the arguments) so shardflow's traceback is hidden.
    """

    def __init__(
        self,
        message: str,
        operator: str = "",
        user_traceback: str = "",
        cause_pickle: bytes | None = None,
        record: ErrorRecord | None = None,
        from_user_function: bool = True,
        expected: bool = True,
    ):
        super().__init__(message)
        self.operator = operator
        self._user_traceback = user_traceback
        self.cause_pickle = cause_pickle
        self.record = record
        self.from_user_function = from_user_function
        self.expected = expected

    def __reduce__(self):
        return (
            UserCodeError,
            (
                self.args[0] if self.args else "",
                self.operator,
                self._user_traceback,
                self.cause_pickle,
                self.record,
                self.from_user_function,
                self.expected,
            ),
        )

    @property
    def user_traceback(self) -> str:
        """The traceback shown in the message (user frames only, unless asked otherwise)."""
        if self.record is None:
            return self._user_traceback
        return redact_text(format_record(self.record))

    def __str__(self) -> str:
        header = self.args[0] if self.args else ""
        if self.record is None:
            return header
        return header + self._traceback_section()

    def _traceback_section(self) -> str:
        show_internal = show_internal_frames()
        record = self.record
        assert record is not None
        if self.from_user_function:
            label = "Traceback from the user function"
        elif record.has_user_frames:
            label = "Traceback from user code"
        elif record.has_visible_frames:
            label = "Traceback (raised in a library shardflow called, not in user code)"
        elif show_internal:
            label = "Traceback from shardflow (not user code)"
        elif self.expected:  # the message says it all (a wrong column, a bad return value)
            return ""
        else:  # an unexpected exception in shardflow's own code: likely a bug, show it all
            show_internal = True
            label = "Traceback from shardflow (not user code; this looks like a bug in shardflow)"
        text = redact_text(format_record(record, show_internal))
        hint = "" if show_internal else f" ({_HINT})"
        return f"\n\n{label}{hint}:\n{text}"


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
        if not isinstance(exc, UserCodeError):
            exc = wrap_task_exception(operator, exc)
        self.operator = exc.operator or operator
        self.error = exc
        root = exc.__cause__
        self.pickled = exc.cause_pickle
        if self.pickled is None and root is not None:
            self.pickled = _pickle_or_none(root)

    @property
    def message(self) -> str:
        return str(self.error)

    @property
    def traceback(self) -> str:
        return self.error.user_traceback

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
        error = self.error
        copy = UserCodeError(
            error.args[0] if error.args else "",
            self.operator,
            error._user_traceback,
            None,
            error.record,
            error.from_user_function,
            error.expected,
        )
        return _as_instance_of(copy, original)


def wrap_user_exception(operator: str, exc: BaseException) -> UserCodeError:
    """Wrap an exception raised by a call of a user function inside a worker."""
    return _wrap(operator, exc, from_user_function=True)


def wrap_task_exception(operator: str, exc: BaseException) -> UserCodeError:
    """Wrap an exception raised in a task outside any call of a user function (a read, a
    built-in stage, shardflow itself)."""
    if isinstance(exc, UserCodeError):
        return exc
    return _wrap(operator, exc, from_user_function=False)


def _wrap(operator: str, exc: BaseException, from_user_function: bool) -> UserCodeError:
    text = _text(exc)
    if text.startswith(f"{operator}: "):  # shardflow's own messages often name the operator
        text = text[len(operator) + 2 :]
    message = redact_text(f"{operator} failed: {type(exc).__name__}: {text}")
    error = UserCodeError(
        message,
        operator,
        "",
        _pickle_or_none(exc),
        capture(exc),
        from_user_function,
        _explains_itself(exc),
    )
    error.__cause__ = exc
    return error


def _explains_itself(exc: BaseException) -> bool:
    """Whether the message of ``exc`` is enough without shardflow's traceback: errors in the
    data, the arguments or storage, and shardflow's own error types. Anything else raised in
    shardflow's code is unexpected, and its traceback is shown."""
    if isinstance(exc, (ValueError, TypeError, LookupError, OSError, TimeoutError)):
        return True
    if isinstance(exc, (pa.ArrowException, WorkerCrashedError)):
        return True
    return type(exc).__module__.startswith("shardflow")


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def _pickle_or_none(exc: BaseException) -> bytes | None:
    try:
        payload = pickle.dumps(exc)
        pickle.loads(payload)
        return payload
    except Exception:
        return None


_DUAL_CLASSES: dict = {}


def _as_instance_of(error: UserCodeError, original: BaseException | None) -> BaseException:
    """Make ``error`` also an instance of ``type(original)`` so users can catch the original type."""
    if original is None or isinstance(original, UserCodeError):
        return error
    cls = type(original)
    try:
        dual = _DUAL_CLASSES.get(cls)
        if dual is None:

            def __init__(self, *args):
                UserCodeError.__init__(self, *args)

            dual = type(
                f"UserCodeError[{cls.__name__}]",
                (UserCodeError, cls),
                {
                    "__init__": __init__,
                    "__str__": UserCodeError.__str__,
                    "__reduce__": UserCodeError.__reduce__,
                },
            )
            _DUAL_CLASSES[cls] = dual
        result = dual(*error.__reduce__()[1])
        result.__cause__ = original
        if isinstance(original, OSError):  # errno tells ENOSPC from EACCES without parsing
            result.errno, result.strerror = original.errno, original.strerror
            result.filename = original.filename
        return result
    except Exception:  # a class whose constructor refuses a message (Ray's ActorDiedError)
        error.__cause__ = original
        return error
