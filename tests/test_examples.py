"""The examples run: `make demo` is examples/quickstart.py, which checks its own results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_its_results_match_pandas(tmp_path):
    env = {**os.environ, "SHARDFLOW_DISABLE_PROGRESS_BARS": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "all results match pandas and NumPy" in proc.stdout
