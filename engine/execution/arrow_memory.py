"""Which Arrow memory pool a process running shardflow allocates blocks from.

Arrow's wheels default to mimalloc, which keeps the pages a thread freed for that thread's
next allocations. A streaming read parses a chunk on one thread, hands the block on and
frees it on another, so mimalloc's retained pages add up to the process's peak memory:
1.4-1.8x Polars' on the file benchmarks. jemalloc (built into Arrow's Linux wheels) returns
freed pages after a short decay and shares them between threads: on the same runs the peak
fell by 25-40% at the same or better speed (benchmarks/README.md). So an execution makes
``DataContext.arrow_memory_pool`` (default ``"jemalloc"``) Arrow's default pool, in the
driver before it starts and in every worker process shardflow starts.

A user's own choice wins: nothing changes when ``ARROW_DEFAULT_MEMORY_POOL`` is set in the
environment (Arrow reads it at import), when the setting is None, or when this pyarrow was
built without the pool asked for.
"""

from __future__ import annotations

import os
import threading

ENV_VAR = "ARROW_DEFAULT_MEMORY_POOL"
POOLS = ("jemalloc", "mimalloc", "system")

_lock = threading.Lock()
_applied: str | None = None  # the pool this module made the default, if any


def apply_memory_pool(name: str | None) -> str | None:
    """Make the Arrow pool ``name`` this process's default, unless the user chose one.

    Idempotent and cheap after the first call. Buffers allocated before the switch stay in
    their pool and are freed there.

    Args:
        name: ``"jemalloc"``, ``"mimalloc"``, ``"system"`` or None (leave Arrow's default).

    Returns:
        The name of the pool this module made the default, or None if it changed nothing.
    """
    global _applied
    if name is None or os.environ.get(ENV_VAR):
        return None
    if name not in POOLS:
        raise ValueError(f"arrow_memory_pool must be one of {POOLS} or None, got {name!r}.")
    with _lock:
        if _applied == name:
            return name
        import pyarrow as pa

        factory = {
            "jemalloc": pa.jemalloc_memory_pool,
            "mimalloc": pa.mimalloc_memory_pool,
            "system": pa.system_memory_pool,
        }[name]
        try:
            pool = factory()
        except NotImplementedError:  # this pyarrow was built without it: keep its default
            return None
        pa.set_memory_pool(pool)
        _applied = name
        return name


def applied_memory_pool() -> str | None:
    """The pool :func:`apply_memory_pool` made this process's default, or None."""
    return _applied


def child_environment() -> dict[str, str]:
    """Environment variables that give a child process the driver's pool from its start
    (Arrow reads ``ARROW_DEFAULT_MEMORY_POOL`` when it is imported): the pool applied, else
    the driver's own default (a child imports shardflow before pyarrow, which would
    otherwise choose jemalloc for it, see ``shardflow._arrow_pool``)."""
    if _applied is not None:
        return {ENV_VAR: _applied}
    if os.environ.get(ENV_VAR):
        return {}
    import pyarrow as pa

    return {ENV_VAR: pa.default_memory_pool().backend_name}
