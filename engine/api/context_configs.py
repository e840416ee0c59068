"""The setting types of Ray Data's ``ray.data.context``: ``ShuffleStrategy`` and the
configuration objects ``DataContext`` holds (autoscaling, Iceberg, Lance, Delta).

shardflow's exchanges (shuffles, sorts, aggregations, joins) have one implementation, which
spills to disk and gives the same rows whatever ``DataContext.shuffle_strategy`` says; the
setting is kept so code that sets it runs unchanged. The configuration objects carry Ray
Data's fields and defaults for the connectors that read them.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.context import ShuffleStrategy
    >>> sf.DataContext.get_current().shuffle_strategy = ShuffleStrategy.HASH_SHUFFLE
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# Error-message fragments retried by catalog and commit operations (Ray Data's lists).
_SERVICE_ERRORS = (
    "429",
    "503",
    "502",
    "500",
    "Too Many Requests",
    "Service Unavailable",
    "Internal Server Error",
    "Connection reset",
    "Connection refused",
    "Connection timed out",
    "Read timed out",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
)


class ShuffleStrategy(str, enum.Enum):
    """Ray Data's choice of shuffle algorithm; shardflow's results do not depend on it."""

    SORT_SHUFFLE_PULL_BASED = "sort_shuffle_pull_based"
    SORT_SHUFFLE_PUSH_BASED = "sort_shuffle_push_based"
    HASH_SHUFFLE = "hash_shuffle"
    SHUFFLE_V2 = "shuffle_v2"
    GPU_SHUFFLE = "gpu_shuffle"
    HASH_SHUFFLE_V2 = "shuffle_v2"  # noqa: PIE796  (an alias of SHUFFLE_V2, as in Ray Data)


@dataclass
class AutoscalingConfig:
    """How actor pools grow and shrink (Ray Data's thresholds of pool utilization).

    Args:
        actor_pool_util_upscaling_threshold: Utilization above which a pool adds actors.
        actor_pool_util_downscaling_threshold: Utilization below which it removes actors.
        actor_pool_max_upscaling_delta: Most actors added at once (None: no bound).
    """

    actor_pool_util_upscaling_threshold: float = 1.75
    actor_pool_util_downscaling_threshold: float = 0.5
    actor_pool_max_upscaling_delta: int | None = None


@dataclass
class IcebergConfig:
    """Retries of Iceberg reads, writes and catalog operations."""

    write_file_max_attempts: int = 10
    write_file_retry_max_backoff_s: int = 32
    catalog_max_attempts: int = 5
    catalog_retry_max_backoff_s: int = 16
    catalog_retried_errors: list[str] = field(default_factory=lambda: list(_SERVICE_ERRORS))
    read_file_tasks_sequentially: bool = True


@dataclass
class LanceConfig:
    """Retries of Lance fragment reads and writes."""

    read_fragments_errors_to_retry: list[str] = field(default_factory=lambda: ["LanceError(IO)"])
    read_fragments_max_attempts: int = 10
    read_fragments_retry_max_backoff_s: int = 32
    write_fragments_errors_to_retry: list[str] = field(default_factory=lambda: ["LanceError(IO)"])
    write_fragments_max_attempts: int = 10
    write_fragments_retry_max_backoff_s: int = 32


@dataclass
class DeltaConfig:
    """Retries of Delta Lake commits."""

    commit_max_attempts: int = 5
    commit_retry_max_backoff_s: int = 16
    commit_retried_errors: list[str] = field(default_factory=lambda: list(_SERVICE_ERRORS))
    credential_refresh_enabled: bool = True


__all__ = ["AutoscalingConfig", "DeltaConfig", "IcebergConfig", "LanceConfig", "ShuffleStrategy"]
