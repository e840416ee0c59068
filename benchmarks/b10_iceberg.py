"""B10: Iceberg tables: a selective read of a 20-file table, and a 10M-row write.

Both use a pyiceberg SqlCatalog (sqlite) with a local warehouse under ``benchmarks/data/``.

- **B10R**: the table (generated once, reused while its size matches) has 20 data files of
  1M rows x scale each: ``id`` (int64), ``value`` (float64 in [0, 1)), ``category`` (one of
  50 strings) and ``label`` (a string of 16-32 characters). Every system reads the rows with
  ``value < 0.02`` (about 2%; no file can be skipped, so every file's ``value`` column is
  scanned) into one Arrow table in the driver: shardflow and Ray Data with
  ``read_iceberg(..., row_filter=...)``, pyiceberg with ``table.scan(row_filter=...).to_arrow()``.
- **B10W**: every system appends the same 10M x scale rows (``id``, ``value``, ``category``,
  built in memory before the clock starts, as 20 blocks) to a fresh, empty table in one
  commit: shardflow and Ray Data with ``from_arrow(blocks).write_iceberg(...)``, pyiceberg
  with ``table.append(whole_table)``.

The time covers loading the table from the catalog and the read or the write (imports,
pyiceberg's included, cluster start-up and building the input come first). The results (row
count and sum of ``id``) must equal the values computed when the input was generated (B10R)
or read back with pyiceberg after the write (B10W).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from benchdata import (
    MANIFEST,
    check_against_manifest,
    fresh_output_dir,
    input_dir,
    read_manifest,
    remove,
)
from registry import RAY_DATA, SHARDFLOW_LOCAL, SHARDFLOW_RAY, Benchmark, Target

PYICEBERG = "pyiceberg"
NUM_FILES = 20
ROWS_PER_FILE = 1_000_000
WRITE_ROWS = 10_000_000
WRITE_BLOCKS = 20
SELECTIVE = 0.02  # rows with value < SELECTIVE are read (about 2%)
ROW_FILTER = f"value < {SELECTIVE}"
SEED = 10
FORMAT_VERSION = 1
TABLE = "bench.events"


def read_rows(scale: float) -> int:
    return NUM_FILES * max(1000, int(ROWS_PER_FILE * scale))


def write_rows(scale: float) -> int:
    return max(WRITE_BLOCKS * 1000, int(WRITE_ROWS * scale))


def _input_name(scale: float) -> str:
    return f"b10_iceberg_{read_rows(scale)}rows_{NUM_FILES}files"


def catalog_kwargs(folder: str) -> dict[str, str]:
    return {
        "name": "default",
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": f"file://{folder}/warehouse",
    }


def _catalog(folder: str) -> Any:
    from pyiceberg.catalog import load_catalog

    kwargs = catalog_kwargs(folder)
    os.makedirs(f"{folder}/warehouse", exist_ok=True)
    return load_catalog(kwargs.pop("name"), **kwargs)


def make_rows(n: int, start: int, rng: Any, with_label: bool = True) -> Any:
    """``n`` rows of the benchmark's schema, ids from ``start``."""
    import numpy as np
    import pyarrow as pa

    categories = pa.array([f"category-{i:02d}" for i in range(50)])
    columns = {
        "id": np.arange(start, start + n, dtype=np.int64),
        "value": rng.random(n),
        "category": categories.take(pa.array(rng.integers(0, 50, n))),
    }
    if with_label:
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        words = pa.array(["".join(rng.choice(letters, k)) for k in rng.integers(16, 33, 4096)])
        columns["label"] = words.take(pa.array(rng.integers(0, 4096, n)))
    return pa.table(columns)


def _generate(folder: str, scale: float) -> dict[str, Any]:
    import numpy as np
    import pyarrow.compute as pc

    rng = np.random.default_rng(SEED)
    catalog = _catalog(folder)
    catalog.create_namespace("bench")
    per_file = read_rows(scale) // NUM_FILES
    table = None
    rows = id_sum = 0
    for i in range(NUM_FILES):
        data = make_rows(per_file, i * per_file, rng)
        if table is None:
            table = catalog.create_table(TABLE, schema=data.schema)
        table.append(data)  # one data file per append
        kept = data.filter(pc.less(data["value"], SELECTIVE))
        rows += kept.num_rows
        id_sum += int(pc.sum(kept["id"]).as_py() or 0)
    return {"expected": {"rows": rows, "id_sum": id_sum}}


def prepare(scale: float) -> dict[str, Any]:
    """Generate the table read by B10R unless a matching one is already there.

    Iceberg metadata holds absolute paths, so the table is generated where it stays (not
    renamed into place as ``benchdata.ensure_input`` does); the manifest is written last, so
    an interrupted generation is redone.
    """
    name = _input_name(scale)
    spec = {"rows": read_rows(scale), "files": NUM_FILES, "seed": SEED, "version": FORMAT_VERSION}
    manifest = read_manifest(name)
    if manifest is not None and manifest.get("spec") == spec:
        return manifest
    folder = input_dir(name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    manifest = {"spec": spec, **_generate(folder, scale)}
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def _summary(table: Any) -> dict[str, int]:
    import pyarrow.compute as pc

    return {"rows": table.num_rows, "id_sum": int(pc.sum(table["id"]).as_py() or 0)}


def _check_read(results: dict[str, Any], scale: float) -> str | None:
    return check_against_manifest("B10R", _input_name(scale), results)


def _check_write(results: dict[str, Any], scale: float) -> str | None:
    n = write_rows(scale)
    want = {"rows": n, "id_sum": n * (n - 1) // 2}
    wrong = {s: got for s, got in results.items() if got != want}
    return f"B10W: every system must commit {want}; got {wrong}" if wrong else None


SYSTEMS = (SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PYICEBERG)

BENCHMARKS = [
    Benchmark(
        name="B10R",
        title=f"read_iceberg(20 files, {ROW_FILTER!r}: ~2% of the rows) -> one Arrow table",
        family=__name__,
        systems=SYSTEMS,
        rows=read_rows,
        check=_check_read,
        prepare=prepare,
        targets=(
            Target(
                "B10R: shardflow-local >= 2x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 2.0
            ),
            Target(
                "B10R: shardflow-local within 1.25x of pyiceberg's arrow scan",
                SHARDFLOW_LOCAL,
                PYICEBERG,
                1.25,
                kind="within",
            ),
        ),
    ),
    Benchmark(
        name="B10W",
        title="from_arrow(10M rows x scale, 20 blocks) -> write_iceberg (append, one commit)",
        family=__name__,
        systems=SYSTEMS,
        rows=write_rows,
        check=_check_write,
        targets=(
            Target(
                "B10W: shardflow-local >= 2x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 2.0
            ),
            Target(
                "B10W: shardflow-local within 1.25x of pyiceberg's append",
                SHARDFLOW_LOCAL,
                PYICEBERG,
                1.25,
                kind="within",
            ),
        ),
    ),
]


def _row_filter() -> Any:
    """The filter as a pyiceberg expression (Ray Data 2.60 cannot take it as a string)."""
    from pyiceberg.expressions import LessThan

    return LessThan("value", SELECTIVE)


def _read(system: str, folder: str) -> tuple[float, Any]:
    import pyarrow as pa

    kwargs = catalog_kwargs(folder)
    row_filter = _row_filter()
    if system == PYICEBERG:
        start = time.perf_counter()
        table = _catalog(folder).load_table(TABLE)
        return start, table.scan(row_filter=row_filter).to_arrow()
    if system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        start = time.perf_counter()
        ds = ray.data.read_iceberg(
            table_identifier=TABLE, catalog_kwargs=kwargs, row_filter=row_filter
        )
        return start, pa.concat_tables(ray.get(ds.to_arrow_refs()))
    from systems import start_shardflow

    sf = start_shardflow(system)
    start = time.perf_counter()
    return start, sf.read_iceberg(TABLE, catalog_kwargs=kwargs, row_filter=row_filter).to_arrow()


def _write(system: str, folder: str, scale: float) -> float:
    import numpy as np

    n = write_rows(scale)
    data = make_rows(n, 0, np.random.default_rng(SEED), with_label=False)
    step = -(-n // WRITE_BLOCKS)
    blocks = [data.slice(i, step) for i in range(0, n, step)]
    catalog = _catalog(folder)
    catalog.create_namespace("bench")
    catalog.create_table(TABLE, schema=data.schema)
    kwargs = catalog_kwargs(folder)
    if system == PYICEBERG:
        start = time.perf_counter()
        _catalog(folder).load_table(TABLE).append(data)
    elif system == RAY_DATA:
        from systems import start_ray_data

        ray = start_ray_data()
        ds = ray.data.from_arrow(blocks)
        start = time.perf_counter()
        ds.write_iceberg(TABLE, catalog_kwargs=kwargs)
    else:
        from systems import start_shardflow

        sf = start_shardflow(system)
        ds = sf.from_arrow(blocks)
        start = time.perf_counter()
        ds.write_iceberg(TABLE, catalog_kwargs=kwargs)
    return start


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run B10R or B10W on ``system`` (in the child), time it, and check the result."""
    # Imported before the clock on every system, as all other imports are.
    import pyiceberg.catalog.sql
    import pyiceberg.io.pyarrow  # noqa: F401

    if bench.name == "B10R":
        prepare(scale)
        start, table = _read(system, input_dir(_input_name(scale)))
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "result": _summary(table), "t_result": time.time()}
    folder = fresh_output_dir(f"b10w-{system}")
    os.makedirs(folder)
    try:
        start = _write(system, folder, scale)
        seconds = time.perf_counter() - start
        done = time.time()
        written = _catalog(folder).load_table(TABLE).scan(selected_fields=("id",)).to_arrow()
        result = _summary(written)
    finally:
        remove(folder)
    return {"seconds": seconds, "result": result, "t_result": done}
