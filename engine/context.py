"""DataContext: the settings one execution runs under."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Optional

import psutil

_ENV_DISABLE_BARS = "SHARDFLOW_DISABLE_PROGRESS_BARS"


def _default_memory_budget() -> int:
    return int(psutil.virtual_memory().total * 0.25)


def _bars_enabled_by_env() -> bool:
    return os.environ.get(_ENV_DISABLE_BARS, "").strip().lower() not in ("1", "true", "yes")


@dataclass
class RetryPolicy:
    """How transient storage errors are retried.

    Args:
        max_attempts: Attempts per operation, including the first.
        initial_backoff_s: Wait before the first retry; doubles each time.
        max_backoff_s: Upper bound of one wait.
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 10.0


@dataclass
class DataContext:
    """Settings of the current process's executions, in the manner of Ray Data's DataContext.

    Get the current one with ``DataContext.get_current()`` and change its fields; the change
    applies to datasets executed afterwards.

    Args:
        memory_budget_bytes: Upper bound on bytes of blocks in flight (produced and not yet
            consumed) during an execution. Defaults to a quarter of the machine's RAM.
        target_max_block_size: Reads, transforms and exchanges cut blocks larger than this
            into zero-copy slices (Ray Data's default is 128 MiB).
        target_min_block_size: Fused transforms join consecutive smaller output blocks, and
            exchanges gather smaller input blocks before preparing them.
        preserve_order: Emit blocks in the order of their inputs (deterministic results).
        enable_progress_bars: Show per-operator progress bars on a terminal. The environment
            variable ``SHARDFLOW_DISABLE_PROGRESS_BARS=1`` turns every bar off.
        num_cpus: Worker slots of the local backend; defaults to the machine's cores.
        num_gpus: GPUs the local backend hands to actors and tasks that ask for them;
            defaults to the devices this process can see. Set it (``sf.init(num_gpus=n)``)
            to declare logical GPUs, so GPU scheduling works on a machine without one.
        actor_pool_idle_timeout_s: An autoscaling actor pool stops an actor that has been
            idle this long, down to the pool's minimum size.
        python_udfs_in_processes: Run pure-Python row functions (``map``, ``flat_map``,
            ``filter`` with a function) in worker processes on the local backend, so they use
            every core despite the GIL.
        backend: ``"local"`` or ``"ray"``; set by ``shardflow.init``.
        retry: Retry policy for transient storage errors.
        max_task_retries: How many times a task whose worker died (killed, out of memory) runs
            again before the execution fails; user exceptions are retried only when the
            operation asks (``map_batches(..., retry_exceptions=...)``).
        max_errored_blocks: How many failed tasks an execution may skip (their blocks are
            dropped and counted in ``stats()``) instead of failing; ``-1`` for no limit.
        no_progress_timeout_s: Fail an execution in which no task produced or finished
            anything for this many seconds while the consumer waited, naming the stage and
            what it waits for; None (the default) waits as long as tasks run.
        streaming_split_timeout_s: Longest wait, in seconds, of a ``streaming_split``
            consumer for the others: for all splits to start an epoch, or (with
            ``equal=True``) for lagging splits to read their share. A TimeoutError then says
            which splits held it up. None waits without end.

    Examples:
        >>> import shardflow as sf
        >>> ctx = sf.DataContext.get_current()
        >>> ctx.memory_budget_bytes = 512 * 1024 * 1024
    """

    memory_budget_bytes: int = field(default_factory=_default_memory_budget)
    target_max_block_size: int = 64 * 1024 * 1024
    target_min_block_size: int = 1024 * 1024
    preserve_order: bool = True
    enable_progress_bars: bool = field(default_factory=_bars_enabled_by_env)
    num_cpus: Optional[int] = None
    num_gpus: Optional[int] = None
    actor_pool_idle_timeout_s: float = 1.0
    python_udfs_in_processes: bool = True
    backend: str = "local"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_task_retries: int = 3
    max_errored_blocks: int = 0
    no_progress_timeout_s: Optional[float] = None
    streaming_split_timeout_s: Optional[float] = 1800.0

    _current: "Optional[DataContext]" = None
    _lock = threading.Lock()

    @staticmethod
    def get_current() -> "DataContext":
        """The process-wide context, created on first use."""
        with DataContext._lock:
            if DataContext._current is None:
                DataContext._current = DataContext()
            return DataContext._current

    @staticmethod
    def _set_current(context: "DataContext") -> None:
        with DataContext._lock:
            DataContext._current = context

    def effective_num_cpus(self) -> int:
        """Worker slots of the local backend."""
        if self.num_cpus is not None:
            if self.num_cpus < 1:
                raise ValueError(f"DataContext.num_cpus must be >= 1, got {self.num_cpus}.")
            return self.num_cpus
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)

    def progress_bars_enabled(self) -> bool:
        return self.enable_progress_bars and _bars_enabled_by_env()

    def validate(self) -> None:
        if not isinstance(self.memory_budget_bytes, int) or self.memory_budget_bytes <= 0:
            raise ValueError(
                f"DataContext.memory_budget_bytes must be a positive int, got {self.memory_budget_bytes!r}."
            )
        for name, low in (("max_task_retries", 0), ("max_errored_blocks", -1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"DataContext.{name} must be an int >= {low}, got {value!r}.")
        for name in ("target_max_block_size", "target_min_block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"DataContext.{name} must be a positive int, got {value!r}.")
        if self.target_min_block_size > self.target_max_block_size:
            raise ValueError(
                f"DataContext.target_min_block_size ({self.target_min_block_size}) must not exceed "
                f"target_max_block_size ({self.target_max_block_size})."
            )
        if self.num_gpus is not None and (
            isinstance(self.num_gpus, bool) or not isinstance(self.num_gpus, int) or self.num_gpus < 0
        ):
            raise ValueError(f"DataContext.num_gpus must be an int >= 0, got {self.num_gpus!r}.")
        if not isinstance(self.actor_pool_idle_timeout_s, (int, float)) or self.actor_pool_idle_timeout_s < 0:
            raise ValueError(
                "DataContext.actor_pool_idle_timeout_s must be a number >= 0, got "
                f"{self.actor_pool_idle_timeout_s!r}."
            )
        if self.backend not in ("local", "ray"):
            raise ValueError(f"DataContext.backend must be 'local' or 'ray', got {self.backend!r}.")
