"""Ray's task cancellation, kept out of imports.

``ray.cancel`` stops a running task by raising KeyboardInterrupt in its worker's main thread
(``_thread.interrupt_main``), wherever that thread is. Raised while the worker imports a
module with C extensions, it leaves that module half initialised for the rest of the worker's
life: a shardflow task cancelled in the first ~20 ms of pandas' import (a limit reached while
fresh workers start) left every later task on that worker failing with "partially initialized
module 'pandas' has no attribute '_pandas_datetime_CAPI'".

The handler installed here holds such an interrupt back until the import has finished, then
delivers it to the same task (or drops it when that task has ended meanwhile). Anywhere else
it behaves as the handler it replaces (Python's, which raises KeyboardInterrupt).
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

#: How long a held-back interrupt waits before it is tried again.
RETRY_S = 0.05

_installed = False
_NOT_HELD = object()  # no interrupt is held (the task of a held one may be None)


def hold_interrupts_during_imports() -> None:
    """Install the import-safe SIGINT handler in this Ray worker (once; main thread only,
    where Ray runs tasks and where Python allows handlers to be set)."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # ignored or default: Ray's cancel interrupts nothing here
        return
    signal.signal(signal.SIGINT, ImportSafeInterrupt(previous, _current_task))
    _installed = True


class ImportSafeInterrupt:
    """A SIGINT handler that delays the interrupt while an import runs.

    Args:
        previous: The handler to call once no import runs (Python's raises
            KeyboardInterrupt).
        current_task: Returns the id of the task the worker runs now (None between tasks).
    """

    def __init__(
        self,
        previous: Callable[[int, FrameType | None], Any],
        current_task: Callable[[], str | None],
    ):
        self._previous = previous
        self._current_task = current_task
        self._held_for: object = _NOT_HELD

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        task = self._current_task()
        if self._held_for is not _NOT_HELD:
            held_task, self._held_for = self._held_for, _NOT_HELD
            if held_task != task:
                return  # the task it was meant for has ended: a later one must not get it
        if importing(frame):
            self._held_for = task
            timer = threading.Timer(RETRY_S, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
            return
        self._previous(signum, frame)


def importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` or one of its callers belongs to Python's import machinery."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _current_task() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_task_id()
    except Exception:
        return None
