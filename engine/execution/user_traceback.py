"""Tracebacks of exceptions raised in tasks, as the user should see them.

A task's exception is captured where it was raised (a thread, a worker process, an actor,
a Ray worker) as plain data, an :class:`ErrorRecord`: each frame's file, line, function and
whether it is shardflow's own (or the plumbing of threads, event loops and Ray). The driver
formats the record: shardflow's frames are left out unless
``DataContext.log_internal_stack_trace`` (or ``SHARDFLOW_LOG_INTERNAL_STACK_TRACE=1``) asks
for them, and a frame whose source line the worker could not read (a function defined in a
notebook cell) gets it from the driver's ``linecache``.
"""

from __future__ import annotations

import linecache
import os
import sysconfig
import traceback
from dataclasses import dataclass
from functools import lru_cache

#: Set to 1 to show shardflow's own frames in errors (as DataContext.log_internal_stack_trace).
ENV_SHOW_INTERNAL = "SHARDFLOW_LOG_INTERNAL_STACK_TRACE"
_MAX_CHAIN = 8


@dataclass(frozen=True)
class FrameRecord:
    """One frame of a traceback: where, whether it is shardflow's own (``internal``), and
    whether it is in an installed library or Python's standard library (``library``)."""

    filename: str
    lineno: int
    name: str
    line: str
    internal: bool
    library: bool = False


@dataclass(frozen=True)
class ErrorRecord:
    """An exception as data: its type, text and frames, and the exception it was raised
    from (``chained_as`` is ``"cause"`` for ``raise ... from``, ``"context"`` for one
    raised while handling another)."""

    type_name: str
    text: str
    frames: tuple[FrameRecord, ...]
    chained: ErrorRecord | None = None
    chained_as: str = ""

    def all_frames(self) -> list[FrameRecord]:
        """The frames of this exception and of those it was raised from."""
        frames: list[FrameRecord] = []
        record: ErrorRecord | None = self
        while record is not None:
            frames.extend(record.frames)
            record = record.chained
        return frames

    @property
    def has_user_frames(self) -> bool:
        """Whether a frame is neither shardflow's nor in an installed library."""
        return any(not f.internal and not f.library for f in self.all_frames())

    @property
    def has_visible_frames(self) -> bool:
        """Whether a frame is not shardflow's (user code or a library)."""
        return any(not f.internal for f in self.all_frames())


def capture(exc: BaseException) -> ErrorRecord:
    """The record of ``exc`` and of the exceptions it was raised from."""
    return _capture(exc, set(), 0)


def _capture(exc: BaseException, seen: set[int], depth: int) -> ErrorRecord:
    seen.add(id(exc))
    frames = tuple(
        FrameRecord(
            f.filename,
            f.lineno or 0,
            f.name,
            (f.line or "").strip(),
            is_internal(f.filename),
            is_library(f.filename),
        )
        for f in traceback.extract_tb(exc.__traceback__)
    )
    chained, how = None, ""
    if depth < _MAX_CHAIN:
        if exc.__cause__ is not None:
            chained, how = exc.__cause__, "cause"
        elif exc.__context__ is not None and not exc.__suppress_context__:
            chained, how = exc.__context__, "context"
    inner = None
    if chained is not None and id(chained) not in seen and not _is_wrapper(chained):
        inner = _capture(chained, seen, depth + 1)
    return ErrorRecord(_type_name(exc), _text(exc), frames, inner, how if inner else "")


def _is_wrapper(exc: BaseException) -> bool:
    """shardflow's own wrapper of a user error: its record is the user's, already captured."""
    return getattr(exc, "record", None) is not None and hasattr(exc, "operator")


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def format_record(record: ErrorRecord, show_internal: bool | None = None) -> str:
    """The traceback text of ``record``, most recent call last, as Python prints it.

    Args:
        record: What ``capture`` returned.
        show_internal: Show shardflow's frames too; by default as
            :func:`show_internal_frames` says.
    """
    if show_internal is None:
        show_internal = show_internal_frames()
    parts: list[str] = []
    chain: list[ErrorRecord] = []
    current: ErrorRecord | None = record
    while current is not None:
        chain.append(current)
        current = current.chained
    for position, item in enumerate(reversed(chain)):
        if position:
            parts.append(
                "\nThe above exception was the direct cause of the following exception:\n\n"
                if chain[len(chain) - position].chained_as == "cause"
                else "\nDuring handling of the above exception, another exception occurred:\n\n"
            )
        parts.append(_format_one(item, show_internal))
    return "".join(parts)


def _format_one(record: ErrorRecord, show_internal: bool) -> str:
    shown = [f for f in record.frames if show_internal or not f.internal]
    lines = []
    if shown:
        lines.append("Traceback (most recent call last):\n")
    for frame in shown:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n')
        source = frame.line or linecache.getline(frame.filename, frame.lineno).strip()
        if source:
            lines.append(f"    {source}\n")
    text = record.text
    lines.append(f"{record.type_name}: {text}\n" if text else f"{record.type_name}\n")
    return "".join(lines)


def show_internal_frames() -> bool:
    """Whether errors show shardflow's own frames: ``DataContext.log_internal_stack_trace``
    or the environment variable ``SHARDFLOW_LOG_INTERNAL_STACK_TRACE=1``."""
    if os.environ.get(ENV_SHOW_INTERNAL, "").strip().lower() in ("1", "true", "yes"):
        return True
    from shardflow.engine.api.context import DataContext

    return bool(DataContext.get_current().log_internal_stack_trace)


def is_internal(filename: str) -> bool:
    """Whether a frame in ``filename`` is shardflow's own code or plumbing around it (threads,
    event loops, process pools, Ray, cloudpickle), not the user's."""
    path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    return any(path.startswith(root) for root in _internal_roots())


def is_library(filename: str) -> bool:
    """Whether ``filename`` is in Python's standard library or an installed package (a
    frame of pyarrow or NumPy, not of the user's own code)."""
    if not filename or filename.startswith("<"):
        return False
    if not os.path.isabs(filename) and filename.endswith((".pyx", ".pxi", ".pxd")):
        return True  # a compiled extension's source, as Cython names it (pyarrow/_parquet.pyx)
    path = os.path.abspath(filename)
    return any(path.startswith(root) for root in _library_roots())


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    import site

    paths = sysconfig.get_paths()
    roots = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    return tuple(r.rstrip(os.sep) + os.sep for r in roots if r)


@lru_cache(maxsize=1)
def _internal_roots() -> tuple[str, ...]:
    import shardflow
    import shardflow.connectors
    import shardflow.engine
    import shardflow.sdk

    roots = [
        os.path.dirname(os.path.abspath(module.__file__ or ""))
        for module in (shardflow, shardflow.engine, shardflow.sdk, shardflow.connectors)
    ]
    stdlib = sysconfig.get_paths().get("stdlib", "")
    if stdlib:
        roots += [
            os.path.join(stdlib, name)
            for name in ("threading.py", "concurrent", "asyncio", "multiprocessing")
        ]
    import importlib.util

    for package in ("ray", "cloudpickle"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            roots.extend(os.path.abspath(p) for p in spec.submodule_search_locations)
    # A folder root ends with a separator, so that ".../engine" does not match ".../engines".
    return tuple(r if r.endswith(".py") else r.rstrip(os.sep) + os.sep for r in roots if r)


__all__ = [
    "ENV_SHOW_INTERNAL",
    "ErrorRecord",
    "FrameRecord",
    "capture",
    "format_record",
    "is_internal",
    "is_library",
    "show_internal_frames",
]
