"""B14: read a Delta Lake table into one Arrow table (read_delta).

The table (generated once under ``benchmarks/data/``, reused while its size matches) has 20
data files of 500k rows x scale each, written by deltalake in 20 commits: ``id`` (int64),
``value`` (float64), ``category`` (one of 50 strings) and ``label`` (16-32 characters).
Every system reads the whole table into one Arrow table in the driver:

- ``shardflow-local``: ``sf.read_delta(path).to_arrow()``;
- ``ray-data``: ``ray.data.read_delta(path)`` and its Arrow blocks;
- ``deltalake``: deltalake's own ``DeltaTable(path).to_pyarrow_dataset().to_table()``.

The time covers opening the table (reading its log) and the read. The results (rows, the sum
of ``id``) must match the values computed when the table was generated.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from benchdata import MANIFEST, check_against_manifest, input_dir, read_manifest
from registry import RAY_DATA, SHARDFLOW_LOCAL, Benchmark, Target

DELTALAKE = "deltalake"
NUM_FILES = 20
ROWS_PER_FILE = 500_000
SEED = 14


def rows(scale: float) -> int:
    return NUM_FILES * max(1000, int(ROWS_PER_FILE * scale))


def _name(scale: float) -> str:
    return f"b14_delta_{rows(scale)}rows_{NUM_FILES}files"


def _table_path(scale: float) -> str:
    return os.path.join(input_dir(_name(scale)), "table")


def prepare(scale: float) -> dict[str, Any]:
    """Write the table unless a matching one is there (the manifest is written last)."""
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    spec = {"rows": rows(scale), "files": NUM_FILES, "seed": SEED}
    manifest = read_manifest(_name(scale))
    if manifest is not None and manifest.get("spec") == spec:
        return manifest
    folder = input_dir(_name(scale))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.default_rng(SEED)
    per_file = rows(scale) // NUM_FILES
    categories = pa.array([f"category-{i:02d}" for i in range(50)])
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = pa.array(["".join(rng.choice(letters, k)) for k in rng.integers(16, 33, 4096)])
    for i in range(NUM_FILES):
        data = pa.table(
            {
                "id": np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64),
                "value": rng.random(per_file),
                "category": categories.take(pa.array(rng.integers(0, 50, per_file))),
                "label": words.take(pa.array(rng.integers(0, 4096, per_file))),
            }
        )
        write_deltalake(_table_path(scale), data, mode="append")
    n = per_file * NUM_FILES
    manifest = {"spec": spec, "expected": {"rows": n, "id_sum": n * (n - 1) // 2}}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def _check(results: dict[str, Any], scale: float) -> str | None:
    return check_against_manifest("B14", _name(scale), results)


BENCHMARKS = [
    Benchmark(
        name="B14",
        title="read_delta(20 files, 10M rows x scale) -> one Arrow table",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, RAY_DATA, DELTALAKE),
        rows=rows,
        check=_check,
        prepare=prepare,
        targets=(
            Target("B14: shardflow-local faster than Ray Data", SHARDFLOW_LOCAL, RAY_DATA, 1.0),
            Target(
                "B14: shardflow-local within 1.3x of deltalake's to_pyarrow_dataset",
                SHARDFLOW_LOCAL,
                DELTALAKE,
                1.3,
                kind="within",
            ),
        ),
    ),
]


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    import deltalake  # imported before the clock on every system
    import pyarrow as pa
    import pyarrow.compute as pc

    prepare(scale)
    path = _table_path(scale)
    if system == DELTALAKE:
        start = time.perf_counter()
        table = deltalake.DeltaTable(path).to_pyarrow_dataset().to_table()
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        start = time.perf_counter()
        table = pa.concat_tables(ray.get(ray.data.read_delta(path).to_arrow_refs()))
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        start = time.perf_counter()
        table = sf.read_delta(path).to_arrow()
    seconds = time.perf_counter() - start
    result = {"rows": table.num_rows, "id_sum": int(pc.sum(table["id"]).as_py() or 0)}
    return {"seconds": seconds, "result": result, "t_result": time.time()}
