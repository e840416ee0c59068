"""B20: read an Apache Hudi table into one Arrow table (read_hudi).

The table (generated once under ``benchmarks/data/``, reused while its size matches) is a
copy-on-write table partitioned by ``category`` (10 values), laid down by shardflow's sample
table writer in two commits: 100k rows x scale inserted, then a tenth of them updated, so the
latest slices are read and the older ones skipped. Columns: ``id`` (int64), ``value``
(float64), ``category`` (string) and ``label`` (16-32 characters), after Hudi's five meta
columns. Every system reads the latest snapshot into one Arrow table in the driver:

- ``shardflow-local``: ``sf.read_hudi(path).to_arrow()``;
- ``ray-data``: ``ray.data.read_hudi(path)`` and its Arrow blocks;
- ``hudi``: hudi's own loop over the file slices with its file group reader, one slice after
  another (``read_file_slice_by_base_file_path``, hudi 0.4's API).

The time covers opening the table (reading its timeline) and the read. The results (rows, the
sum of ``id``, the sum of ``value``) must match the values computed when the table was written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from benchdata import MANIFEST, check_against_manifest, input_dir, read_manifest
from registry import RAY_DATA, SHARDFLOW_LOCAL, Benchmark, Target

HUDI = "hudi"
ROWS = 100_000
MAX_FILE_ROWS = 5_000
SEED = 20


def rows(scale: float) -> int:
    return max(2000, int(ROWS * scale))


def _name(scale: float) -> str:
    return f"b20_hudi_{rows(scale)}rows"


def _table_path(scale: float) -> str:
    return os.path.join(input_dir(_name(scale)), "table")


def prepare(scale: float) -> dict[str, Any]:
    """Write the table unless a matching one is there (the manifest is written last)."""
    import numpy as np
    import pyarrow as pa

    from shardflow.connectors.hudi.sample_tables import SampleHudiTable

    spec = {"rows": rows(scale), "max_file_rows": MAX_FILE_ROWS, "seed": SEED}
    manifest = read_manifest(_name(scale))
    if manifest is not None and manifest.get("spec") == spec:
        return manifest
    folder = input_dir(_name(scale))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = np.random.default_rng(SEED)
    n = rows(scale)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = pa.array(["".join(rng.choice(letters, k)) for k in rng.integers(16, 33, 1024)])
    ids = np.arange(n, dtype=np.int64)
    data = pa.table(
        {
            "id": ids,
            "value": rng.random(n),
            "category": pa.array([f"c{i % 10}" for i in range(n)]),
            "label": words.take(pa.array(rng.integers(0, 1024, n))),
        }
    )
    updated = data.filter(pa.array(ids % 10 == 3)).set_column(
        1, "value", pa.array(rng.random((n + 6) // 10))
    )
    table = SampleHudiTable(
        _table_path(scale), partition_field="category", max_file_rows=MAX_FILE_ROWS
    )
    table.commit(data)
    table.commit(updated)
    values = dict(zip(data["id"].to_pylist(), data["value"].to_pylist()))
    values.update(zip(updated["id"].to_pylist(), updated["value"].to_pylist()))
    expected = {"rows": n, "id_sum": n * (n - 1) // 2, "value_sum": round(sum(values.values()), 6)}
    manifest = {"spec": spec, "expected": expected}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def _check(results: dict[str, Any], scale: float) -> str | None:
    return check_against_manifest("B20", _name(scale), results)


BENCHMARKS = [
    Benchmark(
        name="B20",
        title="read_hudi(copy-on-write, 100k rows x scale, 2 commits) -> one Arrow table",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, RAY_DATA, HUDI),
        rows=rows,
        check=_check,
        prepare=prepare,
        targets=(
            Target("B20: shardflow-local faster than Ray Data", SHARDFLOW_LOCAL, RAY_DATA, 1.0),
            Target(
                "B20: shardflow-local within 1.3x of hudi's own slice loop",
                SHARDFLOW_LOCAL,
                HUDI,
                1.3,
                kind="within",
            ),
        ),
    ),
]


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    import hudi  # imported before the clock on every system
    import pyarrow as pa
    import pyarrow.compute as pc

    prepare(scale)
    path = _table_path(scale)
    if system == HUDI:
        start = time.perf_counter()
        table_ = hudi.HudiTableBuilder.from_base_uri(path).build()
        reader = hudi.HudiFileGroupReader(
            path, {**table_.storage_options(), **table_.hudi_options()}
        )
        batches = [
            reader.read_file_slice_by_base_file_path(s.base_file_relative_path())
            for s in table_.get_file_slices(None)
        ]
        table = pa.Table.from_batches(batches)
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        start = time.perf_counter()
        table = pa.concat_tables(ray.get(ray.data.read_hudi(path).to_arrow_refs()))
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        start = time.perf_counter()
        table = sf.read_hudi(path).to_arrow()
    seconds = time.perf_counter() - start
    result = {
        "rows": table.num_rows,
        "id_sum": int(pc.sum(table["id"]).as_py() or 0),
        "value_sum": round(float(pc.sum(table["value"]).as_py() or 0.0), 6),
    }
    return {"seconds": seconds, "result": result, "t_result": time.time()}
