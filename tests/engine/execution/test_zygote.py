"""The zygote forks workers only while it is single-threaded, and starts them fresh
otherwise (engine/execution/backends/zygote.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(
    """
    import json, os
    import shardflow as sf
    from shardflow.engine.execution.backends.worker_pool import Zygote

    def where(row):
        with open("/proc/self/cmdline", "rb") as f:
            started = b"--worker" in f.read()
        return {"id": row["id"], "pid": os.getpid(), "fresh": started}

    sf.init(backend="local")
    rows = sf.range(40, override_num_blocks=4).map(where).take_all()
    zygote = Zygote.instance()._process.pid
    print(json.dumps({
        "ids": sorted(r["id"] for r in rows),
        "pids": sorted({r["pid"] for r in rows}),
        "fresh": sorted({r["fresh"] for r in rows}),
        "driver": os.getpid(),
        "zygote_threads": len(os.listdir(f"/proc/{zygote}/task")),
    }))
    """
)


def _run(env_overrides: dict[str, str]) -> dict:
    env = {**os.environ, "SHARDFLOW_DISABLE_PROGRESS_BARS": "1", **env_overrides}
    for name in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF"):
        if name not in env_overrides:
            env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=100
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_zygote_is_single_threaded_and_forks():
    seen = _run({})
    assert seen["ids"] == list(range(40))
    assert seen["zygote_threads"] == 1
    assert seen["fresh"] == [False]
    assert seen["driver"] not in seen["pids"]


def test_a_zygote_with_threads_starts_workers_fresh():
    # The user's own OpenBLAS setting wins; its thread pool makes the zygote multi-threaded.
    seen = _run({"OPENBLAS_NUM_THREADS": "2"})
    assert seen["ids"] == list(range(40))
    assert seen["zygote_threads"] > 1
    assert seen["fresh"] == [True]
    assert seen["driver"] not in seen["pids"]
