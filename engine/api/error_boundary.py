"""Where errors of an execution leave shardflow: the public methods of Dataset and
DataIterator re-raise them without the frames of shardflow's machinery.

An error raised in a task reaches the caller through the executor, the iteration pipeline
and the method the user called; those frames say nothing about the user's mistake, and the
message of the error already shows the user's own traceback (engine/execution/errors.py), or
says what to do (a StorageError: missing credentials, an unreachable endpoint).
So a :class:`UserCodeException` leaves the public method with the traceback of the user's
calls only (Ray Data keeps one frame of its own there). ``DataContext.log_internal_stack_trace`` (or
``SHARDFLOW_LOG_INTERNAL_STACK_TRACE=1``) keeps every frame.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from shardflow.engine.execution.errors import UserCodeException
from shardflow.engine.execution.user_traceback import show_internal_frames
from shardflow.sdk.storage_errors import StorageError

T = TypeVar("T")


def drop_shardflow_frames(exc: BaseException) -> None:
    """Drop the frames ``exc`` passed through so far. A bare ``raise`` after this adds no
    frame of the method either: the traceback the user sees starts at the user's call (call
    it in an ``except`` block followed by a bare ``raise``).

    Only errors whose message says it all lose their frames: errors of tasks (their message
    shows the user's traceback) and storage errors that say what to do."""
    if isinstance(exc, (UserCodeException, StorageError)) and not show_internal_frames():
        exc.__traceback__ = None


def at_boundary(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn``; an execution error it raises leaves without shardflow's frames."""

    @functools.wraps(fn)
    def public(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            drop_shardflow_frames(exc)
            raise

    return public


def iterate_at_boundary(items: Iterator[T]) -> Iterator[T]:
    """``items``, with execution errors leaving without shardflow's frames."""
    try:
        yield from items
    except Exception as exc:
        drop_shardflow_frames(exc)
        raise


def public_methods_at_boundary(cls: type) -> type:
    """Wrap every public method of ``cls`` (its own and its bases') with :func:`at_boundary`."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attribute = inspect.getattr_static(cls, name)
        if inspect.isfunction(attribute) and not getattr(attribute, "_at_boundary", False):
            wrapped = at_boundary(attribute)
            wrapped._at_boundary = True  # type: ignore[attr-defined]
            setattr(cls, name, wrapped)
    return cls
