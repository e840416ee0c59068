"""Starting and stopping each system inside a child process, the same way for every benchmark.

Heavy imports happen inside the functions, so a child pays only for the system it measures.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from registry import RAY_DATA, SHARDFLOW_LOCAL, SHARDFLOW_LOCAL_1CPU, SHARDFLOW_RAY

RAY_NUM_CPUS = 2


def loopback_env() -> None:
    """Keep a Ray started here on 127.0.0.1, quiet and without usage reporting."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"


def start_ray_data() -> Any:
    """Start a fresh local Ray for Ray Data and silence its progress bars; returns ``ray``."""
    loopback_env()
    import ray

    ray.init(num_cpus=RAY_NUM_CPUS, include_dashboard=False)
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def start_shardflow(system: str) -> Any:
    """Import shardflow and configure it for ``system``; returns the ``shardflow`` module."""
    loopback_env()
    import shardflow as sf

    if system == SHARDFLOW_RAY:
        sf.init(backend="ray", num_cpus=RAY_NUM_CPUS)
    elif system == SHARDFLOW_LOCAL_1CPU:
        sf.DataContext.get_current().num_cpus = 1
    elif system != SHARDFLOW_LOCAL:
        raise ValueError(f"not a shardflow system: {system!r}")
    return sf


def ship_by_value(module_name: str) -> None:
    """Pickle this module's functions by value: Ray workers cannot import the benchmark folder."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


def shutdown(system: str) -> None:
    """Stop what the child started (Ray, for the Ray-based systems)."""
    if system in (RAY_DATA, SHARDFLOW_RAY) and "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            ray.shutdown()
