"""The built wheel, installed with no extras into a fresh venv, runs a local pipeline, and each
extra's feature says what to install.

Works offline: the wheel is built with the running environment's setuptools, and the fresh
venv gets only the core dependencies, linked from the running environment into a folder on
its path (the running environment itself, which has Ray, is not visible from it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from check_wheel import problems
from test_optional_extras import FEATURE_CALLS, check_messages

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = """
import json, sys
import numpy as np
import pyarrow.parquet as pq
import shardflow as sf

out = sys.argv[1]
ds = sf.range(1000, override_num_blocks=4).map_batches(lambda b: {"id": b["id"], "sq": b["id"] ** 2})
ds.write_parquet(out)
back = sf.read_parquet(out).sort("id").to_pandas()
oracle = pq.read_table(out).to_pandas().sort_values("id")
assert back["sq"].tolist() == [i * i for i in range(1000)]
assert oracle["sq"].tolist() == back["sq"].tolist()
from shardflow.connectors.csv import native as csv_native
from shardflow.connectors.json import native as json_lines_native
from shardflow.connectors.parquet import dictionary_strings
from shardflow.connectors.parquet import flat_writer as parquet_flat_writer
with open(out + ".jsonl", "w") as f:
    f.write("".join(json.dumps({"id": i, "x": i / 4}) + chr(10) for i in range(100)))
assert sf.read_json(out + ".jsonl").sum("x") == sum(i / 4 for i in range(100))
try:
    import ray  # noqa: F401
    ray_importable = True
except ImportError:
    ray_importable = False
print(json.dumps({"rows": len(back), "version": sf.__version__, "file": sf.__file__,
                  "ray": ray_importable, "ray_loaded": "ray" in sys.modules,
                  "native_json": json_lines_native.available(),
                  "native_csv": csv_native.available(),
                  "native_dictionary": dictionary_strings.available(),
                  "native_parquet_writer": parquet_flat_writer.available()}))
"""


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


# Left out of the copy the wheel is built from: environments, caches and build outputs (an
# old build/ folder could put deleted modules into the wheel).
_NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    "*.so",
    ".*_cache",
    ".hypothesis",
)


def _not_copied(folder: str, names: list[str]) -> set[str]:
    ignored = set(_NOT_COPIED(folder, names))
    if Path(folder) == ROOT:
        ignored |= {"benchmarks", "examples", "tests", "docs"}  # not in the wheel; may be large
    return ignored


def _build_wheel(root: Path) -> Path:
    source, dist = root / "source", root / "dist"
    shutil.copytree(ROOT, source, ignore=_not_copied, symlinks=True)
    args = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)]
    try:
        setuptools_major = int(metadata.version("setuptools").split(".")[0])
    except metadata.PackageNotFoundError:
        setuptools_major = 0
    if setuptools_major >= 77:
        args.insert(4, "--no-build-isolation")  # no download of build tools: works offline
    _run(args)
    (wheel,) = dist.glob("shardflow-*.whl")
    return wheel


def _requirement_closure(names: list[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need, transitively (extras and markers applied)."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        requirement = Requirement(todo.pop())
        key = requirement.name.lower().replace("_", "-")
        if key in seen:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(requirement.name)
        seen[key] = dist
        todo += dist.requires or []
    return list(seen.values())


def _link_core_dependencies(wheel: Path, site: Path) -> list[str]:
    """Link the wheel's core dependencies from this environment into ``site``."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    requires = [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    site.mkdir()
    linked = []
    for dist in _requirement_closure(requires):
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
        linked.append(dist.metadata["Name"])
    return sorted(linked)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """(wheel, python of a fresh venv with the wheel and the core dependencies only)."""
    pytest.importorskip("packaging")
    root = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(root)
    assert problems(wheel, ROOT) == []
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False, symlinks=True)
    python = env_dir / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    linked = _link_core_dependencies(wheel, root / "core-site")
    assert not {"ray", "torch", "pillow", "s3fs", "gcsfs", "pyiceberg"} & {
        n.lower() for n in linked
    }
    (Path(purelib.stdout.strip()) / "core_dependencies.pth").write_text(f"{root / 'core-site'}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run(pip + ["install", "-q", "--no-deps", "--no-index", str(wheel)])
    _run(pip + ["check"])  # the linked core dependencies satisfy the wheel's requirements
    return wheel, python


def _clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"
    return env


@pytest.mark.slow
def test_wheel_without_extras_runs_a_local_pipeline(wheel_env, tmp_path):
    wheel, python = wheel_env
    proc = _run(
        [str(python), "-c", PIPELINE, str(tmp_path / "out")], cwd=tmp_path, env=_clean_env()
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["rows"] == 1000
    assert wheel.name.startswith(f"shardflow-{result['version']}-")
    assert not result["file"].startswith(str(ROOT)), result["file"]  # the wheel, not the source
    assert result["ray"] is False and result["ray_loaded"] is False
    assert result["native_json"] is True  # the compiled parsers came with the wheel
    assert result["native_csv"] is True
    assert result["native_dictionary"] is True
    assert result["native_parquet_writer"] is True
    console_script = python.parent / "shardflow"  # the entry point the wheel declares
    proc = _run([str(console_script), "--help"], cwd=tmp_path, env=_clean_env())
    assert "new-connector" in proc.stdout


@pytest.mark.slow
def test_wheel_without_extras_names_each_extra(wheel_env, tmp_path):
    _, python = wheel_env
    proc = _run([str(python), "-c", FEATURE_CALLS, str(tmp_path)], cwd=tmp_path, env=_clean_env())
    check_messages(json.loads(proc.stdout.strip().splitlines()[-1]))
