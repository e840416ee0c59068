"""The Arrow memory pool executions allocate from (DataContext.arrow_memory_pool).

Which pool is the process default is process-wide state, so each check runs in a fresh
interpreter; the Ray check runs on the session's Ray, whose workers outlive a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import shardflow as sf

try:
    pa.jemalloc_memory_pool()
    HAS_JEMALLOC = True
except NotImplementedError:
    HAS_JEMALLOC = False

needs_jemalloc = pytest.mark.skipif(not HAS_JEMALLOC, reason="pyarrow built without jemalloc")

POOLS = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    import shardflow as sf

    setting = sys.argv[1]
    if setting != "default":
        sf.DataContext.get_current().arrow_memory_pool = None if setting == "none" else setting
    before = pa.default_memory_pool().backend_name

    def pool_in_worker(row):
        import pyarrow as pa
        return {"pool": pa.default_memory_pool().backend_name, "id": row["id"]}

    def pool_in_thread(batch):
        import pyarrow as pa
        return {"pool": [pa.default_memory_pool().backend_name] * batch.num_rows}

    threads = sf.range(4).map_batches(pool_in_thread, batch_format="pyarrow").take_all()
    workers = sf.range(4, override_num_blocks=2).map(pool_in_worker).take_all()
    print(json.dumps({
        "before": before,
        "driver": pa.default_memory_pool().backend_name,
        "threads": sorted({r["pool"] for r in threads}),
        "workers": sorted({r["pool"] for r in workers}),
        "ids": sorted(r["id"] for r in workers),
    }))
    """
)


def _run(script: str, argument: str, **env_overrides: str) -> dict:
    """The JSON ``script`` prints last, run in a fresh interpreter without the user's pool."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    env.update(env_overrides)
    out = subprocess.run(
        [sys.executable, "-c", script, argument],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _pools(setting: str, **env_overrides: str) -> dict:
    return _run(POOLS, setting, **env_overrides)


@needs_jemalloc
def test_executions_allocate_from_jemalloc_by_default_in_driver_and_workers():
    seen = _pools("default")
    assert seen["before"] != "jemalloc"  # Arrow's own default (mimalloc) until an execution
    assert seen["driver"] == "jemalloc"
    assert seen["threads"] == ["jemalloc"]
    assert seen["workers"] == ["jemalloc"]  # worker processes start with the driver's pool
    assert seen["ids"] == [0, 1, 2, 3]


def test_none_leaves_arrows_default_alone():
    seen = _pools("none")
    assert seen["driver"] == seen["before"]
    assert seen["threads"] == [seen["before"]]
    assert seen["workers"] == [seen["before"]]


def test_the_system_pool_can_be_chosen():
    seen = _pools("system")
    assert seen["driver"] == "system"
    assert seen["threads"] == ["system"]
    assert seen["workers"] == ["system"]


def test_the_environment_variable_wins_over_the_setting():
    seen = _pools("default", ARROW_DEFAULT_MEMORY_POOL="system")
    assert seen["before"] == seen["driver"] == "system"
    assert seen["workers"] == ["system"]


def test_a_pool_that_does_not_exist_is_refused_before_anything_runs():
    ctx = sf.DataContext.get_current()
    ctx.arrow_memory_pool = "tcmalloc"
    with pytest.raises(ValueError, match="arrow_memory_pool must be"):
        sf.range(3).take_all()


@needs_jemalloc
def test_ray_tasks_and_actors_allocate_from_the_drivers_pool(ray_session):
    sf.init(backend="ray")

    def pool_of(batch):
        import pyarrow as pa

        return {"pool": [pa.default_memory_pool().backend_name] * len(batch["id"])}

    class PoolOf:
        def __call__(self, batch):
            return pool_of(batch)

    tasks = sf.range(4, override_num_blocks=2).map_batches(pool_of).take_all()
    actors = sf.range(4, override_num_blocks=2).map_batches(PoolOf, concurrency=1).take_all()
    assert {r["pool"] for r in tasks} == {"jemalloc"}
    assert {r["pool"] for r in actors} == {"jemalloc"}


IMPORT_ORDER = textwrap.dedent(
    """
    import json, os, sys
    if sys.argv[1] == "pyarrow-first":
        import pyarrow
    import shardflow
    import pyarrow as pa
    print(json.dumps({
        "cpp_default": pa.default_memory_pool().backend_name,
        "env_after_import": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
        "loader_restored": type(pa.__spec__.loader).__name__,
    }))
    """
)


def _import_order(order: str, **env_overrides: str) -> dict:
    return _run(IMPORT_ORDER, order, **env_overrides)


@needs_jemalloc
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="chosen on Linux only")
def test_importing_shardflow_first_gives_arrows_cpp_code_jemalloc_without_leaking_the_variable():
    seen = _import_order("shardflow-first")
    assert seen["cpp_default"] == "jemalloc"
    assert seen["env_after_import"] is None  # set only while pyarrow was imported
    assert seen["loader_restored"] != "_LoaderWithPool"


def test_importing_pyarrow_first_keeps_arrows_own_default():
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    alone = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pyarrow as pa; print(pa.default_memory_pool().backend_name)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.strip()
    first = _import_order("pyarrow-first")
    assert first["cpp_default"] == alone
    assert first["env_after_import"] is None


def test_the_users_variable_wins_at_import():
    seen = _import_order("shardflow-first", ARROW_DEFAULT_MEMORY_POOL="system")
    assert seen["cpp_default"] == "system"
    assert seen["env_after_import"] == "system"
