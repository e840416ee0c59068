"""Optional dependencies: absent from ``import shardflow``; a feature used without its extra
raises an ImportError naming that extra.

The child processes make the optional packages unimportable (``sys.modules[name] = None``), as
in an install without extras; tests/packaging/test_wheel.py checks the same in a real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shardflow.sdk.optional import EXTRAS, install_command, missing_message, require

OPTIONAL_MODULES = [
    *("ray", "torch", "PIL", "s3fs", "gcsfs", "pyiceberg", "daft", "datasets"),
    *("soundfile", "av", "lance", "deltalake", "hudi", "psycopg"),
    *("fastavro", "google.protobuf", "google_crc32c", "msgpack", "mcap", "zarr"),
]

# One call per extra, each the first use of the feature. Shared with test_wheel.py.
FEATURE_CALLS = """
import json, sys
import shardflow as sf

CALLS = {
    "ray": [lambda: sf.init(backend="ray")],
    "torch": [lambda: sf.from_torch([1, 2]), lambda: sf.range(3).iter_torch_batches()],
    "images": [lambda: sf.read_images(sys.argv[1]),
               lambda: sf.range(1).write_images(sys.argv[1] + "/out", column="id")],
    "s3": [lambda: sf.read_parquet("s3://bucket/data/")],
    "gcs": [lambda: sf.read_parquet("gs://bucket/data/")],
    "iceberg": [lambda: sf.read_iceberg("db.table", catalog_kwargs={"name": "default"}),
                lambda: sf.range(1).write_iceberg("db.table", catalog_kwargs={"name": "x"})],
    "audio": [lambda: sf.read_audio(sys.argv[1])],
    "video": [lambda: sf.read_videos(sys.argv[1])],
    "lance": [lambda: sf.read_lance(sys.argv[1] + "/x.lance"),
              lambda: sf.range(1).write_lance(sys.argv[1] + "/x.lance")],
    "delta": [lambda: sf.read_delta(sys.argv[1]), lambda: sf.range(1).write_delta(sys.argv[1])],
    "hudi": [lambda: sf.read_hudi(sys.argv[1])],
    "sql": [lambda: sf.read_sql("SELECT 1", lambda: __import__("psycopg").connect("")).take_all()],
}
import io, os, tarfile
_shard = os.path.join(sys.argv[1], "shard.tar")
with tarfile.open(_shard, "w") as _tar:
    _info = tarfile.TarInfo("k.png")
    _info.size = 3
    _tar.addfile(_info, io.BytesIO(b"png"))
# The modules are made unimportable in this process only: decode in its threads, not in the
# worker processes that reads decoded in Python use.
sf.DataContext.get_current().python_udfs_in_processes = False
CALLS["webdataset"] = [lambda: sf.read_webdataset(_shard).take_all(),
                       lambda: sf.from_items([{"png": __import__("numpy").zeros((2, 2), "uint8")}])
                       .write_webdataset(sys.argv[1] + "/w")]
CALLS["tfrecords"] = [lambda: sf.read_tfrecords(sys.argv[1]),
                      lambda: sf.range(1).write_tfrecords(sys.argv[1] + "/t")]
CALLS["avro"] = [lambda: sf.read_avro(sys.argv[1])]
CALLS["mcap"] = [lambda: sf.read_mcap(sys.argv[1])]
CALLS["zarr"] = [lambda: sf.read_zarr(sys.argv[1])]
CALLS["lerobot"] = [lambda: sf.read_lerobot(sys.argv[1])]
messages = {}
for extra, calls in CALLS.items():
    for call in calls:
        try:
            call()
        except ImportError as exc:
            messages.setdefault(extra, []).append(str(exc))
        else:
            messages.setdefault(extra, []).append("no ImportError")
print(json.dumps(messages))
"""

IMPORT_ONLY = """
import sys
import shardflow, shardflow.sdk, shardflow.connectors, shardflow.engine, shardflow.xshards
import shardflow.orca.data
loaded = sorted(m for m in %r if m in sys.modules)
assert not loaded, f"import shardflow imported {loaded}"
"""


def _blocking(code: str) -> str:
    """``code`` run as if no optional dependency were installed."""
    return f"import sys\nfor m in {OPTIONAL_MODULES!r}:\n    sys.modules[m] = None\n" + code


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1")
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120
    )


def check_messages(messages: dict) -> None:
    """Every feature call raised an ImportError naming its extra's pip command."""
    assert set(messages) == {
        "ray",
        "torch",
        "images",
        "s3",
        "gcs",
        "iceberg",
        "audio",
        "video",
        "lance",
        "delta",
        "hudi",
        "sql",
        "webdataset",
        "tfrecords",
        "avro",
        "mcap",
        "zarr",
        "lerobot",
    }
    for extra, texts in messages.items():
        for text in texts:
            assert install_command(extra) in text, (extra, text)


def test_import_shardflow_imports_no_optional_dependency():
    proc = _run(IMPORT_ONLY % (OPTIONAL_MODULES,))
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_each_feature_names_its_extra(tmp_path):
    proc = _run(_blocking(FEATURE_CALLS), str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_messages(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_require_returns_the_module():
    assert require("json", "none", "Parsing").dumps([1]) == "[1]"


def test_require_names_feature_package_and_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError) as info:
        require("PIL.Image", "images", "read_images")
    assert str(info.value) == (
        "read_images needs Pillow, which is not installed. Install it with: "
        "pip install 'shardflow[images]'"
    )
    assert isinstance(info.value.__cause__, ImportError)


def test_require_reports_a_broken_install(tmp_path, monkeypatch):
    (tmp_path / "sf_broken_pkg.py").write_text("import sf_no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"failed to import .*sf_no_such_dependency_here"):
        require("sf_broken_pkg", "extra", "A feature")


def test_every_optional_module_has_an_extra_in_pyproject():
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    core = " ".join(pyproject["project"]["dependencies"])
    assert "ray" not in core and "torch" not in core
    assert missing_message("ray", "ray", "X").endswith(install_command("ray"))
