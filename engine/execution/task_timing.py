"""What a task measures about itself where it runs: when it ran, its CPU time, its worker.

``begin()`` when a task starts and ``finish()`` when it ends, on the thread that runs it;
the result travels to the driver with the task's DONE event (under the ``"timing"`` key of
its counters) and becomes a ``TaskRecord`` in ``Dataset.stats()`` and the timeline. Times
are wall-clock seconds since the epoch, so tasks of different processes of one machine line
up on one timeline.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

_host: str | None = None


def begin() -> tuple[float, float]:
    """The start of a task: (wall-clock time, CPU time of this thread)."""
    return time.time(), time.thread_time()


def finish(begun: tuple[float, float]) -> dict[str, Any]:
    """What the task that started at ``begun`` reports about itself."""
    start, cpu_start = begun
    thread = threading.current_thread()
    return {
        "start": start,
        "end": time.time(),
        "cpu_s": max(0.0, time.thread_time() - cpu_start),
        "pid": os.getpid(),
        "thread": thread.ident or 0,
        "thread_name": thread.name,
        "peak_rss": peak_rss(),
        "node": host(),
    }


def peak_rss() -> int | None:
    """The peak resident memory of this process so far, in bytes (None where unknown)."""
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except (ImportError, OSError, ValueError):
        return None


def host() -> str:
    global _host
    if _host is None:
        _host = socket.gethostname()
    return _host
