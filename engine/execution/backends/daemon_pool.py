"""A pool of daemon threads for the local backend's tasks.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits. A
thread task cannot be interrupted: after ``take(1)``, a ``break`` or Ctrl-C the execution
abandons it (it stops at its next block and its results are dropped), but a user function
that runs on for a while (a long sleep, a slow request) then held the program's exit until it
returned. Threads of this pool are daemon threads that the interpreter does not wait for, so
a script ends as soon as its main thread does; idle threads are reused as the executor's are,
and end after a minute without work (a backend that is replaced, by ``shardflow.init`` for
one, leaves no threads behind).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class DaemonThreadPool:
    """Runs submitted calls in up to ``max_workers`` daemon threads, reusing idle ones.

    Args:
        max_workers: The most threads at once; further calls wait for an idle one.
        name: The prefix of the threads' names.
        idle_timeout_s: How long a thread waits for work before it ends.
    """

    def __init__(self, max_workers: int, name: str, idle_timeout_s: float = 60.0):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers!r}.")
        if not idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be positive, got {idle_timeout_s!r}.")
        self._max = max_workers
        self._name = name
        self._idle_timeout_s = idle_timeout_s
        # Calls, threads and the count of threads waiting for a call change together under
        # this condition's lock: a thread ends only when it finds no call there.
        self._changed = threading.Condition(threading.Lock())
        self._work: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._threads: set[threading.Thread] = set()
        self._waiting = 0
        self._started = 0

    def thread_count(self) -> int:
        """The pool's threads now, busy or idle."""
        with self._changed:
            return len(self._threads)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in a thread of the pool (its result and errors are the call's to
        report: tasks post events)."""
        with self._changed:
            self._work.append((fn, args))
            if len(self._work) <= self._waiting:
                self._changed.notify()
            elif len(self._threads) < self._max:
                thread = threading.Thread(
                    target=self._serve, name=f"{self._name}_{self._started}", daemon=True
                )
                self._started += 1
                self._threads.add(thread)
                thread.start()

    def _next_call(self) -> tuple[Callable[..., Any], tuple] | None:
        """The next call, or None once none came for ``idle_timeout_s`` (the thread ends)."""
        with self._changed:
            while not self._work:
                self._waiting += 1
                try:
                    woken = self._changed.wait(self._idle_timeout_s)
                finally:
                    self._waiting -= 1
                if not woken and not self._work:
                    self._threads.discard(threading.current_thread())
                    return None
            return self._work.popleft()

    def _serve(self) -> None:
        while True:
            call = self._next_call()
            if call is None:
                return
            fn, args = call
            try:
                fn(*args)
            except BaseException:  # a task reports its own errors; this is a bug if reached
                logger.exception("A shardflow task raised outside its error reporting.")
            del fn, args, call  # drop the task's references while idle
