"""Exceptions from Spark tasks, raised on the driver as the user's own exception type.

Spark returns a failed Python task as a ``PythonException`` holding the worker's traceback as
text, so the exception's type is lost. Every function XShards runs in a Spark task is
wrapped by :func:`guarded`: an exception is recorded (type, message, traceback, pickled when
it can be) in the text of the error Spark carries, and :func:`run_job` turns it back into
the exception shardflow raises on its other backends: a ``UserCodeError`` that is also an
instance of the original type, naming the operation.
"""

from __future__ import annotations

import base64
import pickle
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from shardflow.engine.execution.errors import TaskFailure

_MARK = "SHARDFLOW-TASK-FAILURE:"
_PAYLOAD = re.compile(re.escape(_MARK) + r"([A-Za-z0-9+/=]+)")

T = TypeVar("T")


class _Guarded:
    """A partition function whose exceptions travel to the driver whole."""

    def __init__(self, fn: Callable[..., Iterable[Any]], operator: str, with_index: bool):
        self.fn, self.operator, self.with_index = fn, operator, with_index

    def __call__(self, *args: Any) -> Iterator[Any]:
        try:
            yield from self.fn(*args)
        except Exception as exc:
            failure = TaskFailure(self.operator, exc)
            payload = base64.b64encode(pickle.dumps(failure)).decode("ascii")
            raise RuntimeError(f"{failure.message}\n{_MARK}{payload}") from None


def guarded(fn: Callable[..., Iterable[Any]], operator: str) -> Callable[..., Iterator[Any]]:
    """``fn`` (a function of a partition's iterator, for ``mapPartitions``) with its
    exceptions recorded for :func:`run_job`."""
    return _Guarded(fn, operator, with_index=False)


def guarded_with_index(
    fn: Callable[..., Iterable[Any]], operator: str
) -> Callable[..., Iterator[Any]]:
    """As :func:`guarded`, for ``mapPartitionsWithIndex``."""
    return _Guarded(fn, operator, with_index=True)


def run_job(job: Callable[[], T]) -> T:
    """Run a Spark action; a task's recorded exception is raised as shardflow raises it."""
    try:
        return job()
    except Exception as exc:
        found = _PAYLOAD.search(str(exc))
        if found is None:
            raise
        try:
            failure = pickle.loads(base64.b64decode(found.group(1)))
        except Exception:
            raise exc from None
        raise failure.to_exception() from None
