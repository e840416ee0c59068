"""The examples run: `make demo` is examples/quickstart.py, which checks its own results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_batch_inference_reads_webdataset_shards(tmp_path):
    """examples/batch_inference.py --source webdataset: JPEGs packed into shards, labelled."""
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    env = {**os.environ, "SHARDFLOW_DISABLE_PROGRESS_BARS": "1", "TMPDIR": str(tmp_path)}
    args = ["--images", "48", "--source", "webdataset", "--no-training"]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "batch_inference.py"),
            *args,
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "labelled 48 images" in proc.stdout
    shards = sorted(p for p in (tmp_path / "shards-48").iterdir() if p.suffix == ".tar")
    assert shards, "no WebDataset shard was written"
    import pyarrow.parquet as pq

    (predictions,) = [p for p in tmp_path.iterdir() if p.name.startswith("predictions-")]
    table = pq.read_table(predictions)
    assert sorted(table.column("path").to_pylist()) == [f"img-{i:05d}" for i in range(48)]
