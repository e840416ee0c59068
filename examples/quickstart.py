"""shardflow quickstart: a real pipeline with progress bars and statistics.

Run with ``make demo``. It builds a small synthetic "sensor readings" dataset, normalizes it
with a vectorized map_batches, filters it with an expression, enriches rows with a Python
function (run in worker processes), and aggregates the result, checking every number against
pandas.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

import shardflow as sf


def normalize(batch: dict) -> dict:
    """Vectorized: scale the reading and flag outliers."""
    reading = batch["reading"]
    batch["scaled"] = (reading - 50.0) / 10.0
    batch["outlier"] = np.abs(batch["scaled"]) > 2.5
    return batch


def label(row: dict) -> dict:
    """Pure Python, per row: a readable label for each reading."""
    level = "high" if row["scaled"] > 0 else "low"
    return {**row, "label": f"sensor-{row['sensor']:03d}-{level}"}


def main() -> None:
    rng = np.random.default_rng(0)
    n = 2_000_000
    frame = pd.DataFrame(
        {
            "sensor": rng.integers(0, 100, n),
            "reading": rng.normal(50.0, 10.0, n),
        }
    )
    started = time.perf_counter()

    ds = (
        sf.from_pandas(frame, override_num_blocks=16)
        .map_batches(normalize, batch_size=None)
        .filter(expr=~sf.col("outlier"))
    )
    kept = ds.count()
    mean_scaled = ds.mean("scaled")
    print(f"kept {kept} of {n} readings; mean scaled reading {mean_scaled:.4f}")
    print(ds.stats())

    labelled = ds.limit(200_000).map(label)
    first = labelled.take(3)
    for row in first:
        print(row)
    counts = labelled.to_pandas()["label"].str.endswith("high").sum()
    print(f"{counts} of 200000 labelled rows are high")
    print(labelled.stats())

    # Check against pandas.
    scaled = (frame["reading"] - 50.0) / 10.0
    expected = scaled[np.abs(scaled) <= 2.5]
    assert kept == len(expected), (kept, len(expected))
    assert abs(mean_scaled - expected.mean()) < 1e-9
    assert counts == int((expected.iloc[:200_000] > 0).sum())
    print(f"all results match pandas; {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
