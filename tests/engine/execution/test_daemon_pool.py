"""DaemonThreadPool: every call runs once, idle threads end, and calls after that still run."""

from __future__ import annotations

import threading
import time

import pytest

from shardflow.engine.execution.backends.daemon_pool import DaemonThreadPool

pytestmark = pytest.mark.timeout(60)


def _wait_for(predicate, limit_s: float = 30.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_every_call_runs_once_while_threads_come_and_go():
    pool = DaemonThreadPool(4, "test-pool", idle_timeout_s=0.01)
    seen: list[int] = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def call(i: int) -> None:
        with lock:
            seen.append(i)
        done.release()

    for i in range(2000):
        pool.submit(call, i)
        if i % 97 == 0:
            time.sleep(0.02)  # long enough for idle threads to end between bursts
    for _ in range(2000):
        assert done.acquire(timeout=30)
    assert sorted(seen) == list(range(2000))
    assert pool.thread_count() <= 4


def test_idle_threads_end_and_the_pool_starts_new_ones():
    pool = DaemonThreadPool(3, "test-pool", idle_timeout_s=0.05)
    release = threading.Event()
    started = threading.Semaphore(0)

    def blocked() -> None:
        started.release()
        release.wait()

    for _ in range(3):
        pool.submit(blocked)
    for _ in range(3):
        assert started.acquire(timeout=30)
    assert pool.thread_count() == 3
    release.set()
    assert _wait_for(lambda: pool.thread_count() == 0)
    ran = threading.Event()
    pool.submit(ran.set)
    assert ran.wait(30)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="max_workers"):
        DaemonThreadPool(0, "x")
    with pytest.raises(ValueError, match="idle_timeout_s"):
        DaemonThreadPool(1, "x", idle_timeout_s=0)
