"""Starting and stopping each system inside a child process, the same way for every benchmark.

Heavy imports happen inside the functions, so a child pays only for the system it measures.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from registry import (
    DAFT,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_LOCAL_1CPU,
    SHARDFLOW_RAY,
    Unavailable,
)

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

    # `import shardflow` loads its public names on first use; load them here, as
    # `import polars` or `import ray.data` does, since the clocks start after imports
    # (B1, whose clock starts at the child's spawn, measures them).
    sf.Dataset  # noqa: B018  (the module behind every read_* and from_* function)
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


# Daft caps pyarrow below the version shardflow is tested with, so ``make bench`` installs it
# in a virtual environment of its own; its children run with that interpreter.
DAFT_PYTHON_ENV = "SHARDFLOW_BENCH_DAFT_PYTHON"
DAFT_VENV = ".venv-daft"


def interpreter(system: str) -> str:
    """The Python that runs ``system``'s children (this one, except for Daft when its own
    environment exists: ``$SHARDFLOW_BENCH_DAFT_PYTHON`` or ``.venv-daft`` at the repo root)."""
    if system == DAFT:
        if os.environ.get(DAFT_PYTHON_ENV):
            return os.environ[DAFT_PYTHON_ENV]
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        candidate = os.path.join(repo, DAFT_VENV, "bin", "python")
        if os.path.exists(candidate):
            return candidate
    return sys.executable


def import_engine(module: str) -> Any:
    """Import ``polars``, ``duckdb`` or ``daft``, or raise :class:`Unavailable` saying how to
    install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        how = (
            f"`make bench` installs it in {DAFT_VENV}"
            if module == DAFT
            else "run `make bench` or pip install -e '.[bench]'"
        )
        raise Unavailable(f"{module} is not installed ({exc}); {how}") from None


def require(obj: Any, *names: str, owner: str | None = None) -> None:
    """Raise :class:`Unavailable` unless ``obj`` has every attribute in ``names`` (an API the
    benchmark needs, such as ``Dataset.random_shuffle``); ``owner`` names ``obj`` in the message."""
    missing = [n for n in names if not hasattr(obj, n)]
    if missing:
        owner = owner or getattr(obj, "__name__", type(obj).__name__)
        raise Unavailable(f"{owner} has no {', '.join(missing)} yet")


def own_peak_rss() -> int | None:
    """Peak resident memory of this process so far, in bytes, or None where unknown.

    Read from ``VmHWM`` (Linux), which starts afresh at ``exec``; ``ru_maxrss`` would not do:
    it carries over the forking parent's resident size.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
