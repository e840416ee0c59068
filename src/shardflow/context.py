"""Settings, as Ray Data's ``ray.data.context``: ``DataContext`` and the setting types it holds.

Examples:
    >>> from shardflow.context import DataContext, ShuffleStrategy
    >>> DataContext.get_current().shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
"""

from __future__ import annotations

from shardflow.engine.api.context import DataContext, DatasetContext
from shardflow.engine.api.context_configs import (
    AutoscalingConfig,
    DeltaConfig,
    IcebergConfig,
    LanceConfig,
    ShuffleStrategy,
)

__all__ = [
    "AutoscalingConfig",
    "DataContext",
    "DatasetContext",
    "DeltaConfig",
    "IcebergConfig",
    "LanceConfig",
    "ShuffleStrategy",
]
