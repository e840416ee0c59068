"""Expressions whose values come from no column: ``uuid()``, ``monotonically_increasing_id()``
and ``random()``, as in Ray Data. Each evaluation draws new values (``random`` with a seed
draws them reproducibly), so they are never pushed into reads and are not idempotent.
"""

from __future__ import annotations

import threading
from typing import Any

from shardflow.sdk.expressions import Expr

_EXECUTIONS_LOCK = threading.Lock()


class UUIDExpr(Expr):
    """A new random UUID (version 4) per row, as a string; build it with :func:`uuid`."""

    kind = "uuid"

    def __repr__(self) -> str:
        return "UUID()"


def uuid() -> UUIDExpr:
    """An expression giving each row a new random identifier: a UUID4 string, as Ray Data's
    ``uuid()``. Each evaluation draws new identifiers.

    Returns:
        A :class:`UUIDExpr`.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.expressions import uuid
        >>> rows = sf.range(2).with_column("key", uuid()).take_all()
        >>> [len(r["key"]) for r in rows]
        [36, 36]
    """
    return UUIDExpr()


class MonotonicallyIncreasingIdExpr(Expr):
    """Unique, increasing ids per task; build it with :func:`monotonically_increasing_id`."""

    kind = "monotonically_increasing_id"

    def __repr__(self) -> str:
        return "monotonically_increasing_id()"


def monotonically_increasing_id() -> MonotonicallyIncreasingIdExpr:
    """An expression giving each row a unique int64 id, as Ray Data's
    ``monotonically_increasing_id()``: the task's index in the upper 31 bits and the row's
    number among the rows the task handled in the lower 33, so ids increase within a task
    and are unique, but not consecutive across tasks.

    Returns:
        A :class:`MonotonicallyIncreasingIdExpr`.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.expressions import monotonically_increasing_id
        >>> ds = sf.range(4, override_num_blocks=2)
        >>> ds.with_column("uid", monotonically_increasing_id()).take_all()
        [{'id': 0, 'uid': 0}, {'id': 1, 'uid': 1}, {'id': 2, 'uid': 8589934592}, {'id': 3, 'uid': 8589934593}]
    """
    return MonotonicallyIncreasingIdExpr()


class RandomExpr(Expr):
    """Random floats in [0, 1), one per row; build it with :func:`random`.

    Args:
        seed: The base seed, or None for fresh randomness on every evaluation.
        reseed_after_execution: With a seed, whether each execution of the dataset draws
            other numbers (True, the default) or the same ones (False).
    """

    kind = "random"

    def __init__(self, seed: int | None = None, reseed_after_execution: bool = True):
        import uuid as uuid_module

        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise TypeError(
                f"random() takes a non-negative int seed (NumPy's seeds), or None; got {seed!r}."
            )
        if not isinstance(reseed_after_execution, bool):
            raise TypeError(
                f"reseed_after_execution must be a bool, got {reseed_after_execution!r}."
            )
        self.seed, self.reseed_after_execution = seed, reseed_after_execution
        # Identifies the expression across processes: its block counter and execution number.
        self._instance_id = str(uuid_module.uuid4())
        self._executions = 0

    def next_execution(self) -> int:
        """The number of the execution about to start (0, 1, ...), counting it."""
        with _EXECUTIONS_LOCK:
            execution = self._executions
            self._executions += 1
        return execution

    def _key(self) -> tuple[Any, ...]:
        return (self.seed, self.reseed_after_execution)

    def __repr__(self) -> str:
        if self.seed is None:
            return "RANDOM()"
        return f"RANDOM(seed={self.seed}, reseed_after_execution={self.reseed_after_execution})"


_EXECUTIONS_LOCK = threading.Lock()


def random(*, seed: int | None = None, reseed_after_execution: bool = True) -> RandomExpr:
    """An expression giving each row a random float in [0, 1), as Ray Data's ``random()``.

    The numbers of a block come from ``numpy.random.default_rng([block, task, execution,
    seed]).random(rows)``: the block's number among the blocks the task evaluated, the
    task's index, the execution's number (0 when ``reseed_after_execution`` is False) and
    the seed, as Ray Data draws them. So with a seed and ``reseed_after_execution=False``
    every execution gives the same numbers; with True (the default) each execution of the
    dataset gives others, reproducibly from the seed. Without a seed every evaluation
    draws fresh numbers.

    Args:
        seed: A non-negative int seed, or None.
        reseed_after_execution: Whether each execution draws other numbers (with a seed).

    Returns:
        A :class:`RandomExpr`.

    Raises:
        TypeError: for a seed that is not a non-negative int (Ray Data fails only when the
            dataset runs).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.expressions import random
        >>> ds = sf.range(3).with_column("r", random(seed=42, reseed_after_execution=False))
        >>> [round(r["r"], 4) for r in ds.take_all()] == [round(r["r"], 4) for r in ds.take_all()]
        True
    """
    return RandomExpr(seed=seed, reseed_after_execution=reseed_after_execution)


__all__ = [
    "MonotonicallyIncreasingIdExpr",
    "RandomExpr",
    "UUIDExpr",
    "monotonically_increasing_id",
    "random",
    "uuid",
]
