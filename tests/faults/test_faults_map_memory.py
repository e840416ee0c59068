"""Memory of row-wise functions: a ``map`` in worker processes over blocks of half a million
rows holds the process tree's memory within about twice the budget, as ``map_batches`` does,
instead of turning whole blocks into Python objects (~30 times their Arrow size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "map_memory.py")
MiB = 1 << 20
BUDGET_MIB = 16
ROWS, BLOCKS = 1_000_000, 2  # 8 MB of Arrow per block; ~250 MB per block as Python rows
# What the tree may hold beyond the blocks the budget counts: each worker's input block
# (8 MB), the slice of rows it holds as Python objects, and the allocators' slack. Turning
# whole blocks into rows, the tree grew by ~500 MB here.
BASE_MIB = 48


def _measure(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, SCRIPT, mode, str(BUDGET_MIB), str(ROWS), str(BLOCKS)],
        capture_output=True,
        text=True,
        timeout=150,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["rows", "batches"])
def test_row_map_in_worker_processes_holds_memory_like_map_batches(mode):
    result = _measure(mode)
    # The rows are all there, doubled (oracle: the arithmetic series).
    assert result["rows"] == ROWS
    assert result["sum"] == ROWS * (ROWS - 1)
    growth = result["rss_growth"]
    assert growth <= 2 * BUDGET_MIB * MiB + BASE_MIB * MiB, (
        f"{mode}: the process tree grew by {growth / MiB:.0f} MiB at a {BUDGET_MIB} MiB budget"
    )
