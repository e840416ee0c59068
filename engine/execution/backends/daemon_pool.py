"""A pool of daemon threads for the local backend's tasks.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits. A
thread task cannot be interrupted: after ``take(1)``, a ``break`` or Ctrl-C the execution
abandons it (it stops at its next block and its results are dropped), but a user function
that runs on for a while (a long sleep, a slow request) then held the program's exit until it
returned. Threads of this pool are daemon threads that the interpreter does not wait for, so
a script ends as soon as its main thread does; idle threads are reused as the executor's are.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class DaemonThreadPool:
    """Runs submitted calls in up to ``max_workers`` daemon threads, reusing idle ones.

    Args:
        max_workers: The most threads at once; further calls wait for an idle one.
        name: The prefix of the threads' names.
    """

    def __init__(self, max_workers: int, name: str):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers!r}.")
        self._max = max_workers
        self._name = name
        self._work: queue.SimpleQueue[tuple[Callable[..., Any], tuple]] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in a thread of the pool (its result and errors are the call's to
        report: tasks post events)."""
        self._work.put((fn, args))
        if self._idle.acquire(blocking=False):  # an idle thread takes it
            return
        with self._lock:
            if len(self._threads) < self._max:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}_{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _serve(self) -> None:
        while True:
            fn, args = self._work.get()
            try:
                fn(*args)
            except BaseException:  # a task reports its own errors; this is a bug if reached
                logger.exception("A shardflow task raised outside its error reporting.")
            del fn, args  # drop the task's references while idle
            self._idle.release()
