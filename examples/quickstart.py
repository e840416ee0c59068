"""shardflow quickstart: real files in, transforms, real files out, checked against pandas.

Run with ``make demo``. It writes a small sensor dataset as Parquet (partitioned by day) and CSV,
and a folder of PNG images; then reads them back with shardflow, transforms them (a vectorized
map_batches, an expression filter pushed into the Parquet reader, a plain-Python map running in
worker processes, image resizing), writes the results as Parquet, and checks every number against
pandas and NumPy. Progress bars show on a terminal; stats() prints what each operator did.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import shardflow as sf


def make_inputs(root: Path, rng: np.random.Generator) -> pd.DataFrame:
    """Write the input files with shardflow itself and return the pandas oracle."""
    n = 1_000_000
    frame = pd.DataFrame(
        {
            "day": rng.integers(1, 8, n),
            "sensor": rng.integers(0, 100, n),
            "reading": rng.normal(50.0, 10.0, n),
        }
    )
    sf.from_pandas(frame, override_num_blocks=8).write_parquet(
        str(root / "readings"), partition_cols=["day"]
    )
    sf.from_pandas(frame.iloc[:100_000], override_num_blocks=4).write_csv(
        str(root / "readings_csv")
    )
    images = rng.integers(0, 256, size=(200, 48, 64, 3), dtype=np.uint8)
    sf.from_numpy(images).write_images(str(root / "images"), column="data", file_format="png")
    return frame


def normalize(batch: dict) -> dict:
    """Vectorized: scale each reading and flag outliers."""
    batch["scaled"] = (batch["reading"] - 50.0) / 10.0
    batch["outlier"] = np.abs(batch["scaled"]) > 2.5
    return batch


def label(row: dict) -> dict:
    """Plain Python, one row at a time (runs in worker processes, on every core)."""
    level = "high" if row["scaled"] > 0 else "low"
    return {"sensor": row["sensor"], "label": f"sensor-{row['sensor']:03d}-{level}"}


def brightness(batch: dict) -> dict:
    """Vectorized over a batch of images."""
    return {"brightness": batch["image"].reshape(len(batch["image"]), -1).mean(axis=1)}


def main() -> None:
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    root = Path(tempfile.mkdtemp(prefix="shardflow-demo-"))
    try:
        frame = make_inputs(root, rng)
        print(f"wrote Parquet, CSV and 200 PNG files under {root}")

        # Parquet: partition values are strings unless typed (as in Ray Data); the filter on
        # the typed partition column prunes whole folders before any file is opened.
        readings = sf.read_parquet(
            str(root / "readings"),
            partitioning=sf.Partitioning("hive", field_types={"day": int}),
        ).filter(expr=sf.col("day") <= 3)
        clean = readings.map_batches(normalize).filter(expr=~sf.col("outlier"))
        kept, mean_scaled = clean.count(), clean.mean("scaled")
        print(f"days 1-3: kept {kept} readings, mean scaled reading {mean_scaled:.5f}")
        print(clean.stats())

        labelled = clean.limit(100_000).map(label)
        highs = labelled.filter(
            expr=sf.col("label").is_in([f"sensor-{i:03d}-high" for i in range(100)])
        )
        n_high = highs.count()
        labelled.write_parquet(str(root / "labelled"))
        print(
            f"{n_high} of 100000 labelled rows are high; "
            f"wrote {sf.read_parquet(str(root / 'labelled')).count()} rows"
        )

        # CSV.
        csv_sum = sf.read_csv(str(root / "readings_csv")).sum("sensor")
        print(
            f"CSV: sum of sensor ids over {sf.read_csv(str(root / 'readings_csv')).count()} rows = {csv_sum}"
        )

        # Images: decoded and resized inside the read tasks.
        images = sf.read_images(str(root / "images"), size=(24, 32), include_paths=True)
        images.map_batches(brightness, batch_size=64).write_parquet(str(root / "brightness"))
        mean_brightness = sf.read_parquet(str(root / "brightness")).mean("brightness")
        print(
            f"images: {images.count()} resized to {images.take_batch(1)['image'].shape[1:]}, "
            f"mean brightness {mean_brightness:.2f}"
        )

        # Check against pandas / NumPy.
        part = frame[frame["day"] <= 3]
        scaled = (part["reading"] - 50.0) / 10.0
        expected = scaled[np.abs(scaled) <= 2.5]
        assert kept == len(expected), (kept, len(expected))
        assert abs(mean_scaled - expected.mean()) < 1e-9
        assert csv_sum == int(frame.iloc[:100_000]["sensor"].sum())
        assert 0 < n_high < 100_000
        assert 100.0 < mean_brightness < 155.0
        print(f"all results match pandas and NumPy; {time.perf_counter() - started:.1f}s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
