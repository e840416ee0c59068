"""Fixtures for file connector tests (the storage servers are in tests/storage_fixtures.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

# Helpers shared by the connector folders' tests (table_oracle) import from here.
sys.path.insert(0, os.path.dirname(__file__))

import pytest
from storage_fixtures import FAKE_KEY, FAKE_SECRET, Store  # noqa: F401 (used by tests)


class _Reader:
    """A read-only file wrapper that counts bytes and can fail once past a byte offset."""

    def __init__(self, f: Any, fs: InstrumentedLocalFileSystem):
        self._f = f
        self._fs = fs
        self._pos_read = 0

    def _maybe_fail(self) -> None:
        fs = self._fs
        if (
            fs.fail_reads_after is not None
            and self._pos_read >= fs.fail_reads_after
            and fs.read_failures < fs.fail_reads
        ):
            fs.read_failures += 1
            raise TimeoutError("read timed out (injected)")

    def read(self, size: int = -1) -> bytes:
        self._maybe_fail()
        data = self._f.read(size)
        self._pos_read += len(data)
        self._fs.bytes_read += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._f.close()


class InstrumentedLocalFileSystem:
    """Factory for a local filesystem that counts bytes read and injects transient faults.

    ``fail_opens``: the first N opens for reading raise ConnectionResetError.
    ``fail_reads`` with ``fail_reads_after``: that many reads raise TimeoutError once a file
    has been read past that many bytes.
    """

    def __new__(cls, fail_opens: int = 0, fail_reads: int = 0, fail_reads_after: Any = None):
        from fsspec.implementations.local import LocalFileSystem

        class _Instrumented(LocalFileSystem):
            cachable = False

            def __init__(self) -> None:
                super().__init__()
                self.fail_opens, self.fail_reads, self.fail_reads_after = (
                    fail_opens,
                    fail_reads,
                    fail_reads_after,
                )
                self.open_failures = self.read_failures = self.bytes_read = self.opens = 0

            def _open(self, path, mode="rb", block_size=None, **kwargs):
                f = super()._open(path, mode, block_size=block_size, **kwargs)
                if "r" not in mode:
                    return f
                self.opens += 1
                if self.open_failures < self.fail_opens:
                    self.open_failures += 1
                    f.close()
                    raise ConnectionResetError(
                        f"connection reset by peer (injected) opening {path}"
                    )
                return _Reader(f, self)

        return _Instrumented()


@pytest.fixture
def fast_retries(fresh_context):
    """Retries without waiting, so fault-injection tests stay fast."""
    from shardflow.engine.api.context import RetryPolicy

    fresh_context.retry = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002)
    return fresh_context


@pytest.fixture
def instrumented_fs():
    """``instrumented_fs(fail_opens=..., fail_reads=..., fail_reads_after=...)`` makes a fresh
    local filesystem that counts ``bytes_read`` and injects transient faults."""
    return InstrumentedLocalFileSystem
