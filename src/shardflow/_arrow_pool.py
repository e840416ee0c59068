"""Arrow's default memory pool, chosen before pyarrow loads.

pyarrow reads ``ARROW_DEFAULT_MEMORY_POOL`` once, while it is imported, and the pool it picks
then is the one Arrow's C++ code allocates from whenever Python cannot pass a pool: the
Parquet writer's encoders and page buffers, the Parquet reader's pre-buffered column chunks.
``pyarrow.set_memory_pool`` (what an execution applies, see
``shardflow.engine.execution.arrow_memory``) changes only the pool of allocations made through
pyarrow's Python API. Measured on the Parquet ETL benchmark, Arrow's wheels' default,
mimalloc, zeroes freed huge pages again and again (12% of the CPU in ``clear_page``) and
copies on every buffer growth; jemalloc everywhere took 0.84x the CPU time of jemalloc for
Python's allocations only (3.7 s against 4.4 s).

So when ``import shardflow`` runs before pyarrow is imported, on Linux (where Arrow's wheels
carry jemalloc), and the user has not set ``ARROW_DEFAULT_MEMORY_POOL`` themselves,
:func:`choose_before_pyarrow_loads` sets that variable for the duration of pyarrow's import
only (it is not left for child processes to inherit). Imported after pyarrow, shardflow
changes nothing here.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

ENV_VAR = "ARROW_DEFAULT_MEMORY_POOL"
DEFAULT_POOL = "jemalloc"


def choose_before_pyarrow_loads(pool: str = DEFAULT_POOL) -> bool:
    """Make ``pool`` Arrow's default when pyarrow is imported later in this process.

    Args:
        pool: The name Arrow accepts in ``ARROW_DEFAULT_MEMORY_POOL``.

    Returns:
        True if pyarrow's import will see ``pool``; False if pyarrow is already imported,
        the user chose a pool, or this is not Linux.
    """
    if "pyarrow" in sys.modules or os.environ.get(ENV_VAR) or not sys.platform.startswith("linux"):
        return False
    if not any(isinstance(finder, _PoolAtImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PoolAtImport(pool))
    return True


class _PoolAtImport:
    """A finder of ``sys.meta_path`` that finds nothing itself: when ``pyarrow`` is
    imported, it wraps the loader the other finders return so that
    ``ARROW_DEFAULT_MEMORY_POOL`` is set while pyarrow executes."""

    def __init__(self, pool: str):
        self.pool = pool

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "pyarrow":
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once: later imports find pyarrow in sys.modules
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or os.environ.get(ENV_VAR):
            return spec
        spec.loader = _LoaderWithPool(spec.loader, self.pool)  # type: ignore[assignment]
        return spec


class _LoaderWithPool:
    def __init__(self, loader: Any, pool: str):
        self.loader = loader
        self.pool = pool

    def create_module(self, spec: Any) -> ModuleType | None:
        module: ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        os.environ[ENV_VAR] = self.pool
        try:
            self.loader.exec_module(module)
        finally:
            if os.environ.get(ENV_VAR) == self.pool:
                del os.environ[ENV_VAR]
            # pyarrow keeps its own loader (resource readers, source lookups go through it)
            module.__loader__ = self.loader
            if module.__spec__ is not None:
                module.__spec__.loader = self.loader
