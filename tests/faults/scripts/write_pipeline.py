"""The write that the resume and commit fault tests kill and rerun.

Usage: python write_pipeline.py SPEC_JSON

SPEC_JSON holds ``src`` and ``dest`` (paths or URLs), ``options`` (storage options),
``mode``, ``resume``, ``blocks`` (override_num_blocks or null), ``num_cpus`` (or null) and
``plan`` (``"triple"``, ``"quadruple"`` or ``"select"``). The tests run it in a child process,
which they kill, and then call :func:`run` with a spec in their own process: the functions
here are the same code in both, so both runs are the same plan.

A child whose environment names ``SHARDFLOW_TEST_KILL_DRIVER_AT_ID`` kills itself (the
driver) with SIGKILL when its map function meets the row with that id; with
``SHARDFLOW_TEST_KILL_AT_COMMIT_STEP`` the commit does (see shardflow.sdk.file_commit).
``SHARDFLOW_TEST_MARKS``, when set, names a folder where the map function leaves one empty
file per batch (its first id), so a test sees which rows were read.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import shardflow as sf


def triple(batch):
    marks = os.environ.get("SHARDFLOW_TEST_MARKS")
    if marks:
        first = int(batch["id"][0]) if len(batch["id"]) else -1
        open(os.path.join(marks, f"{first}-{os.getpid()}-{len(batch['id'])}"), "w").close()
    kill_at = os.environ.get("SHARDFLOW_TEST_KILL_DRIVER_AT_ID")
    if kill_at is not None and int(kill_at) in set(batch["id"].tolist()):
        os.kill(int(os.environ["SHARDFLOW_TEST_DRIVER_PID"]), signal.SIGKILL)
    batch["y"] = batch["id"] * 3
    return batch


def quadruple(batch):
    batch["y"] = batch["id"] * 4
    return batch


def dataset(spec):
    ds = sf.read_parquet(spec["src"], override_num_blocks=spec.get("blocks"), **_options(spec))
    if spec.get("plan") == "quadruple":
        return ds.map_batches(quadruple)
    ds = ds.map_batches(triple)
    if spec.get("plan") == "select":
        ds = ds.select_columns(["id", "y"])
    return ds


def run(spec):
    """Write the pipeline of ``spec`` (in this process)."""
    context = sf.DataContext.get_current()
    previous = context.num_cpus
    if spec.get("num_cpus"):
        context.num_cpus = spec["num_cpus"]
    try:
        dataset(spec).write_parquet(
            spec["dest"],
            mode=spec.get("mode", "error"),
            resume=spec.get("resume", False),
            **_options(spec),
        )
    finally:
        context.num_cpus = previous


def _options(spec):
    return {"storage_options": spec["options"]} if spec.get("options") else {}


if __name__ == "__main__":
    os.environ["SHARDFLOW_TEST_DRIVER_PID"] = str(os.getpid())
    run(json.loads(sys.argv[1]))
    print("done", flush=True)
