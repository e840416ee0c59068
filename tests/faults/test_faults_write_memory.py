"""Memory on the write path: a CSV several times the memory budget streams through
read_csv -> map_batches -> write_parquet without the process tree's memory growing with it."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "write_memory.py")
MiB = 1 << 20
BUDGET_MIB = 16
ROWS = 2_000_000  # about 84 MB of CSV, about 100 MB of Arrow data after the map
# What the process tree may hold beyond the blocks the budget counts, measured on this
# pipeline (a steady 35-50 MiB for CSV files of 40 MB to 250 MB; Arrow's pool peaks at ~30 MiB):
# the 8 MiB chunk of CSV being parsed and the table parsed from it, the transformed block
# being encoded by the Parquet writer, and the allocator's slack (freed pages its per-thread
# heaps keep). A reader that buffers the file ahead of the budget, or a write task that
# gathers its blocks, grows by the data's size (over 100 MiB here) and fails.
BASE_MIB = 64


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory) -> str:
    rng = np.random.default_rng(11)
    ids = pa.array(np.arange(ROWS))
    table = pa.table(
        {
            "id": ids,
            "x": rng.random(ROWS),
            "k": rng.integers(0, 1000, ROWS),
            "label": pc.binary_join_element_wise(
                "item-", pc.cast(pc.bit_wise_and(ids, 8191), pa.string()), ""
            ),
        }
    )
    path = str(tmp_path_factory.mktemp("write_memory") / "input.csv")
    pacsv.write_csv(table, path)
    return path


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_csv_to_parquet_holds_memory_at_a_small_budget(csv_file, tmp_path):
    out = subprocess.run(
        [sys.executable, SCRIPT, csv_file, str(tmp_path), str(BUDGET_MIB)],
        capture_output=True,
        text=True,
        timeout=110,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])

    # The output is the input, transformed (oracle: pyarrow reading the CSV itself).
    expected = pacsv.read_csv(csv_file)
    written = pq.read_table(sorted(glob.glob(str(tmp_path / "out" / "*.parquet")))).sort_by("id")
    assert written.num_rows == ROWS
    assert written.column_names == ["id", "x", "k", "label", "y", "label_len"]
    assert written["id"].equals(expected["id"])
    assert written["label"].equals(expected["label"])
    assert np.allclose(written["y"].to_numpy(), expected["x"].to_numpy() * 2.0)
    assert written["label_len"].equals(pc.utf8_length(expected["label"]))
    data_bytes = written.nbytes
    assert data_bytes > 5 * BUDGET_MIB * MiB  # the data streamed through is many budgets

    budget = BUDGET_MIB * MiB
    growth = result["rss_growth"]
    assert growth <= 2 * budget + BASE_MIB * MiB, (
        f"RSS of the process tree grew by {growth / MiB:.0f} MiB for {data_bytes / MiB:.0f} MiB "
        f"of data at a {BUDGET_MIB} MiB budget (Arrow's pool peaked at "
        f"{result['arrow_peak'] / MiB:.0f} MiB)"
    )
