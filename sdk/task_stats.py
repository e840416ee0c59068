"""Counters a running task reports to the engine, such as files skipped as unreadable.

A read task calls :func:`record_skipped_file` from the thread that runs it. The engine calls
:func:`reset` when a task starts and :func:`take` when it ends, on the same thread, and adds
the counts to the operator's statistics (``Dataset.stats()``). Counters are per thread, so
tasks running side by side in one process do not mix their counts.
"""

from __future__ import annotations

import threading

_local = threading.local()


def _counters() -> dict[str, int]:
    counters = getattr(_local, "counters", None)
    if counters is None:
        counters = _local.counters = {}
    return counters


def reset() -> None:
    """Forget the counts of this thread (called by the engine when a task starts)."""
    _local.counters = {}


def record_skipped_file() -> None:
    """Count one input file skipped because it could not be read."""
    counters = _counters()
    counters["skipped_files"] = counters.get("skipped_files", 0) + 1


def take() -> dict[str, int]:
    """The counts of this thread since the last reset, and reset them."""
    counters = _counters()
    _local.counters = {}
    return counters
