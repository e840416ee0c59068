"""Starting up: ``import shardflow`` stays light, and progress bars show only where wanted.

Each check runs in a fresh interpreter, since this test process has long imported Ray.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import textwrap

import pytest

IMPORT_CHECK = textwrap.dedent(
    """
    import json, sys
    import shardflow as sf
    after_import = "ray" in sys.modules
    rows = sf.range(100).map_batches(lambda b: {"id": b["id"] * 2}).filter(sf.col("id") > 5).take(2)
    print(json.dumps({
        "ray_after_import": after_import,
        "ray_after_local_run": "ray" in sys.modules,
        "rows": rows,
    }))
    """
)

# Long enough for the bars to draw at least once.
PIPELINE = textwrap.dedent(
    """
    import time
    import shardflow as sf

    def slow(batch):
        time.sleep(0.05)
        return batch

    assert sf.range(2000, override_num_blocks=8).map_batches(slow).count() == 2000
    print("done")
    """
)


def _env(**overrides):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.pop("SHARDFLOW_DISABLE_PROGRESS_BARS", None)
    env.update(overrides)
    return env


def _run_with_tty_stderr(code: str, env: dict) -> tuple:
    """Run ``code`` with stderr on a pseudo-terminal; returns (returncode, stdout, stderr)."""
    leader, follower = pty.openpty()
    # a fresh pseudo-terminal is 0 columns wide, in which tqdm draws nothing
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=follower, env=env
    )
    os.close(follower)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        stdout = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        os.close(leader)
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, stdout.decode(), b"".join(chunks).decode(errors="replace")


def test_import_does_not_import_ray():
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ray_after_import"] is False
    assert result["ray_after_local_run"] is False
    assert result["rows"] == [{"id": 6}, {"id": 8}]


@pytest.mark.timeout(120)
def test_no_progress_bars_when_stderr_is_not_a_terminal():
    proc = subprocess.run(
        [sys.executable, "-c", PIPELINE], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    # no bar is drawn; a run longer than DataContext.progress_log_interval_s logs reports
    # (tests/engine/execution/test_progress.py), which this short one may do on a busy machine
    assert "it/s" not in proc.stderr and "%|" not in proc.stderr and "\r" not in proc.stderr
    for line in proc.stderr.splitlines():
        assert re.match(r"(\S+ \S+ shardflow: Running dataset|  - |Execution finished)", line), line


@pytest.mark.timeout(120)
def test_progress_bars_on_a_terminal_unless_disabled():
    code, stdout, stderr = _run_with_tty_stderr(PIPELINE, _env())
    assert code == 0, stderr
    assert stdout.strip() == "done"
    # shown on a terminal: the dataset's bar, and a bar naming the fused operator
    assert "ReadRange->MapBatches(slow)" in stderr
    assert "Running" in stderr and " row" in stderr

    code, stdout, stderr = _run_with_tty_stderr(PIPELINE, _env(SHARDFLOW_DISABLE_PROGRESS_BARS="1"))
    assert code == 0, stderr
    assert stdout.strip() == "done"
    assert stderr.strip() == ""


def test_progress_bars_can_be_turned_off_in_the_context(fresh_context, monkeypatch):
    monkeypatch.delenv("SHARDFLOW_DISABLE_PROGRESS_BARS", raising=False)
    fresh_context.enable_progress_bars = False
    assert fresh_context.progress_bars_enabled() is False
    fresh_context.enable_progress_bars = True
    assert fresh_context.progress_bars_enabled() is True
    monkeypatch.setenv("SHARDFLOW_DISABLE_PROGRESS_BARS", "1")
    assert fresh_context.progress_bars_enabled() is False
