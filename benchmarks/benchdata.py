"""Input data generated once under ``benchmarks/data/`` and reused, and fresh output folders.

A generated input lives in ``data/<name>/`` with its files in ``files/`` and a
``manifest.json`` written last: the manifest records what was generated (the spec) and the
facts the result checks need (row counts, expected sums). An input is reused when its
manifest's spec matches the one asked for, and regenerated otherwise. Generation writes to
a temporary sibling folder that is renamed into place, so an interrupted run never leaves a
half-written input that looks complete.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "data")
OUTPUT_DIR = os.path.join(DATA_DIR, "out")
MANIFEST = "manifest.json"
FILES = "files"


def input_dir(name: str) -> str:
    """The folder of the generated input ``name`` (its data files are in ``files/``)."""
    return os.path.join(DATA_DIR, name)


def files_dir(name: str) -> str:
    """The folder holding the data files of the input ``name``."""
    return os.path.join(input_dir(name), FILES)


def read_manifest(name: str) -> dict[str, Any] | None:
    """The manifest of the input ``name``, or None when it is missing or unreadable."""
    try:
        with open(os.path.join(input_dir(name), MANIFEST)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def check_against_manifest(label: str, name: str, results: dict[str, Any]) -> str | None:
    """None when every system's result equals the ``expected`` of input ``name``'s manifest,
    else what is wrong (``label`` names the benchmark in the message)."""
    manifest = read_manifest(name)
    if manifest is None:
        return f"{label}: the input's manifest is missing; cannot check the results"
    wrong = {s: got for s, got in results.items() if got != manifest["expected"]}
    return f"{label}: every system must read {manifest['expected']}; got {wrong}" if wrong else None


def ensure_input(
    name: str,
    spec: dict[str, Any],
    generate: Callable[[str], dict[str, Any]],
) -> dict[str, Any]:
    """Return the manifest of input ``name``, generating the input first when needed.

    Args:
        name: Folder name under ``benchmarks/data/``.
        spec: What the input must be (sizes, seed, format version); compared with the
            stored manifest's ``spec`` to decide whether to reuse it.
        generate: Called with an empty folder to fill with the data files; returns the
            facts to store in the manifest next to ``spec``.

    Returns:
        The manifest: ``{"spec": spec, **facts}``.
    """
    manifest = read_manifest(name)
    if manifest is not None and manifest.get("spec") == spec:
        return manifest
    final = input_dir(name)
    staging = f"{final}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(os.path.join(staging, FILES))
    try:
        facts = generate(os.path.join(staging, FILES))
        manifest = {"spec": spec, **facts}
        with open(os.path.join(staging, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def fresh_output_dir(tag: str) -> str:
    """A path under ``benchmarks/data/out/`` that does not exist yet (the writer creates it)."""
    os.makedirs(OUTPUT_DIR, exist_ok=True)
    path = os.path.join(OUTPUT_DIR, f"{tag}-{os.getpid()}-{time.time_ns()}")
    shutil.rmtree(path, ignore_errors=True)
    return path


def remove(path: str) -> None:
    """Delete an output folder once its result has been read back."""
    shutil.rmtree(path, ignore_errors=True)
