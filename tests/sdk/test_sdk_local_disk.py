"""LocalDisk: local reads without fsspec, every other call through fsspec's LocalFileSystem."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardflow.sdk.filesystems import is_local, resolve_paths
from shardflow.sdk.local_disk import LocalDisk


def test_info_agrees_with_fsspec(tmp_path):
    import fsspec

    reference = fsspec.filesystem("file")
    (tmp_path / "f.txt").write_bytes(b"12345")
    (tmp_path / "d").mkdir()
    disk = LocalDisk()
    for name in ("f.txt", "d"):
        path = str(tmp_path / name)
        got, want = disk.info(path), reference.info(path)
        assert (got["name"], got["size"], got["type"]) == (want["name"], want["size"], want["type"])
        assert disk.info("file://" + path)["name"] == path
    with pytest.raises(FileNotFoundError):
        disk.info(str(tmp_path / "missing"))
    assert disk.exists(str(tmp_path / "f.txt")) and not disk.exists(str(tmp_path / "missing"))
    assert disk.isdir(str(tmp_path / "d")) and disk.isfile(str(tmp_path / "f.txt"))


def test_other_calls_go_to_fsspec_and_it_pickles(tmp_path):
    disk = LocalDisk()
    disk.makedirs(str(tmp_path / "a" / "b"), exist_ok=True)
    with disk.open(str(tmp_path / "a" / "b" / "x.bin"), "wb") as f:
        f.write(b"abc")
    disk.mv(str(tmp_path / "a" / "b" / "x.bin"), str(tmp_path / "y.bin"))
    assert (tmp_path / "y.bin").read_bytes() == b"abc"
    clone = pickle.loads(pickle.dumps(disk))
    assert clone == disk and clone.info(str(tmp_path / "y.bin"))["size"] == 3


def test_local_paths_resolve_to_local_disk_with_a_native_filesystem(tmp_path):
    resolved = resolve_paths([str(tmp_path)])
    assert isinstance(resolved.fs, LocalDisk) and is_local(resolved.fs)
    assert resolved.native is not None
    again = resolve_paths([str(tmp_path / "x")], resolved.fs)
    assert again.fs is resolved.fs and again.native is not None
    assert not isinstance(resolve_paths(["memory://x/y"]).fs, LocalDisk)


def test_a_local_read_never_imports_fsspec(tmp_path):
    """Nor, for text formats, pyarrow.fs (which loads the SSL and cloud modules)."""
    path = str(tmp_path / "t.parquet")
    pq.write_table(pa.table({"x": list(range(100))}), path)
    (tmp_path / "t.csv").write_text("x\n" + "\n".join(str(i) for i in range(100)) + "\n")
    code = (
        "import sys\n"
        "import shardflow as sf\n"
        f"assert len(sf.read_csv({str(tmp_path / 't.csv')!r}).take_all()) == 100\n"
        "assert 'pyarrow.fs' not in sys.modules\n"
        f"assert sf.read_parquet({path!r}).sum('x') == 4950\n"
        "print('fsspec' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SHARDFLOW_NATIVE_FILESYSTEMS"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
