"""Private data stays private: blocks handed to worker processes through shared memory,
spilled blocks and shared values are files of mode 0600 in a per-run folder of mode 0700
that another local user (``nobody``) cannot open; the folders are removed when the run ends,
and after a SIGKILL of the driver by the next shardflow process that starts workers.

Checks as another user need root (the test drops to ``nobody`` in a child process); they
are skipped elsewhere. Disk-full errors need a small tmpfs, mounted only where root may.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.engine.execution import private_dirs, shm, spill

pytestmark = pytest.mark.timeout(120)

NOBODY = 65534
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="checks as another user need root"
)
MiB = 1 << 20


def _block(nbytes: int = 2 * MiB) -> pa.Table:
    return pa.table({"x": np.arange(nbytes // 8, dtype=np.int64)})


def _as_nobody(paths: list[str]) -> dict[str, str]:
    """What ``nobody`` gets when it opens each file (or lists each folder): "ok" or the
    error's name. The child starts as root and drops to nobody before touching anything."""
    code = textwrap.dedent(
        f"""
        import json, os, sys
        os.setgroups([])
        os.setgid({NOBODY})
        os.setuid({NOBODY})
        out = {{}}
        for path in json.loads(sys.argv[1]):
            try:
                if os.path.isdir(path):
                    os.listdir(path)
                else:
                    open(path, "rb").close()
                out[path] = "ok"
            except OSError as exc:
                out[path] = type(exc).__name__
        print(json.dumps(out))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _assert_private(path: str) -> None:
    """``path`` is a 0600 file of ours inside a 0700 folder of ours."""
    info, folder = os.stat(path), os.stat(os.path.dirname(path))
    assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    assert stat.S_IMODE(folder.st_mode) == 0o700, oct(folder.st_mode)
    assert info.st_uid == folder.st_uid == os.getuid()


# -- the files themselves --------------------------------------------------------------


def test_shared_memory_blocks_are_private_files():
    block = _block()
    ref = shm.share(block)
    assert ref is not None
    try:
        _assert_private(ref.path)
        assert os.path.basename(os.path.dirname(ref.path)).startswith(
            f"shardflow-shm-{os.getpid()}-"
        )
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            assert ref.path.startswith("/dev/shm/")
    finally:
        assert ref.load().equals(block)  # the reader unlinks it
    assert not os.path.exists(ref.path)


def test_spill_files_are_private():
    folder = spill.make_spill_dir()
    try:
        ref = spill.spill_block(_block(), folder)
        _assert_private(ref.path)
        assert ref.load().equals(_block())
    finally:
        private_dirs.remove_private_dir(folder)


def test_shared_values_are_private_files():
    from shardflow.xshards import SharedValue

    value = SharedValue(np.arange(1000))
    kind, path = value._store()
    try:
        assert kind == "file"
        _assert_private(path)
    finally:
        value.unpersist()


def test_a_planted_file_is_never_written_through(tmp_path):
    target = tmp_path / "victim"
    target.write_text("keep")
    planted = tmp_path / "planted"
    planted.symlink_to(target)
    with pytest.raises(FileExistsError):
        private_dirs.create_private_file(str(planted))
    assert target.read_text() == "keep"


@as_root
def test_nobody_cannot_read_shared_blocks_spills_or_shared_values():
    from shardflow.xshards import SharedValue

    shared = shm.share(_block())
    folder = spill.make_spill_dir()
    spilled = spill.spill_block(_block(), folder)
    value = SharedValue(np.arange(1000))
    _, value_path = value._store()
    try:
        paths = [shared.path, spilled.path, value_path]
        folders = [os.path.dirname(p) for p in paths]
        seen = _as_nobody(paths + folders)
        assert all(seen[p] == "PermissionError" for p in paths + folders), seen
    finally:
        shared.load()
        private_dirs.remove_private_dir(folder)
        value.unpersist()


# -- a whole run: workers use the run's folder, which goes with the run ------------------


DRIVER = """
import json, os, sys, time
import numpy as np
import shardflow as sf
from shardflow.engine.execution import shm

import pyarrow as pa

ids = np.arange(400)
table = pa.table({"id": ids, "pad": [bytes(16_000)] * 400})

def mapped_from_folder(row):
    folder, hits = os.environ[shm.SHM_DIR_ENV], 0
    if row["id"] % 100 == 0:  # the first row of a block: is the block a mapped file?
        with open("/proc/self/maps") as maps:
            hits = sum(1 for line in maps if folder in line)
    return {"id": row["id"], "hits": hits, "folder": folder, "n": len(row["pad"])}

# Four in-memory blocks of 1.6 MB cross to the row workers through shared memory.
blocks = [table.slice(i, 100) for i in range(0, 400, 100)]
ds = sf.from_arrow(blocks).map(mapped_from_folder)
rows = ds.take_all()
folder = shm.private_folder()
print(json.dumps({
    "rows": len(rows),
    "ids": sum(r["id"] for r in rows),
    "pad": {r["n"] for r in rows} == {16_000},
    "folders": sorted({r["folder"] for r in rows}),
    "mapped": max(r["hits"] for r in rows),
    "folder": folder,
    "mode": oct(os.stat(folder).st_mode & 0o777),
    "left": os.listdir(folder),
}), flush=True)
if sys.argv[1] == "wait":
    sys.stdin.readline()
else:
    time.sleep(600)
"""


def _start_driver(mode: str) -> tuple[subprocess.Popen, dict]:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    line = driver.stdout.readline()
    if not line:
        driver.kill()
        raise AssertionError(driver.stderr.read()[-3000:])
    return driver, json.loads(line)


def test_workers_share_blocks_through_the_run_s_private_folder_which_ends_with_it():
    driver, seen = _start_driver("wait")
    try:
        assert seen["rows"] == 400 and seen["ids"] == 400 * 399 // 2 and seen["pad"]
        assert seen["folders"] == [seen["folder"]]  # every worker uses the driver's folder
        assert seen["mapped"] > 0  # and its input blocks were mapped from there
        assert seen["mode"] == "0o700"
        assert seen["left"] == []  # every file was unlinked by its reader
        if os.geteuid() == 0:
            assert _as_nobody([seen["folder"]]) == {seen["folder"]: "PermissionError"}
        driver.stdin.write("\n")
        driver.stdin.flush()
        assert driver.wait(timeout=60) == 0, driver.stderr.read()[-3000:]
    finally:
        driver.kill()
    assert not os.path.exists(seen["folder"])


def test_the_folder_of_a_killed_driver_is_swept_by_the_next_run():
    driver, seen = _start_driver("sleep")
    try:
        # What a driver killed while blocks are in flight leaves behind.
        stray = os.path.join(seen["folder"], "stray.arrow")
        private_dirs.create_private_file(stray)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        driver.kill()
    assert os.path.exists(stray)
    # The next shardflow process that starts worker processes removes it.
    nxt = subprocess.run(
        [sys.executable, "-c", "import shardflow as sf; sf.range(8).map(lambda r: r).take_all()"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    assert nxt.returncode == 0, nxt.stderr[-3000:]
    assert not os.path.exists(seen["folder"])


def test_a_killed_worker_leaves_no_block_behind():
    """A block a worker wrote for the driver, killed before the driver read it (a cancelled
    task), is removed with the worker rather than at the driver's exit."""
    from shardflow.engine.execution.backends.worker_pool import WorkerProcess

    worker = WorkerProcess()
    ours = shm.share(_block())  # the driver's own block in flight stays
    stray = os.path.join(shm.private_folder(), f"{worker.pid}-{'0' * 32}.arrow")
    private_dirs.create_private_file(stray)
    worker.kill()
    assert not os.path.exists(stray)
    assert os.path.exists(ours.path)
    ours.load()


def test_spill_and_shm_folders_of_dead_processes_are_swept():
    dead = int(
        subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
        ).stdout
    )
    parent = tempfile.mkdtemp()
    try:
        orphan = os.path.join(parent, f"shardflow-shm-{dead}-x")
        os.mkdir(orphan)
        open(os.path.join(orphan, "a.arrow"), "w").close()
        old_style = os.path.join(parent, f"shardflow-shm-{dead}-{'0' * 32}.arrow")
        open(old_style, "w").close()
        alive = os.path.join(parent, f"shardflow-shm-{os.getppid()}-y")
        os.mkdir(alive)
        private_dirs.sweep_dead_owners("shardflow-shm-", parent)
        assert os.listdir(parent) == [os.path.basename(alive)]
    finally:
        private_dirs.remove_private_dir(parent)


# -- a full disk while spilling ---------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs as the temporary folder (root only; skipped where mounting fails)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    previous = tempfile.tempdir
    tempfile.tempdir = str(mount)
    try:
        yield str(mount)
    finally:
        tempfile.tempdir = previous
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_while_spilling_names_the_file_and_the_bytes(small_tmpfs, fresh_context):
    fresh_context.memory_budget_bytes = 1 * MiB
    ds = sf.range(600_000, override_num_blocks=12).map_batches(
        lambda b: {"id": b["id"], "x": b["id"] * 0.5}
    )
    with pytest.raises(OSError) as caught:
        ds.random_shuffle(seed=1).take_all()
    message = str(caught.value)
    assert "disk is full" in message
    assert small_tmpfs in message and ".arrow" in message
    assert " bytes " in message
    # Nothing is left on the full disk.
    assert not glob.glob(os.path.join(small_tmpfs, "shardflow-spill-*"))


def test_spill_error_is_picklable():
    error = spill._spill_error(OSError(28, "No space left on device"), "/x/y.arrow", 1234)
    again = pickle.loads(pickle.dumps(error))
    assert "1234 bytes" in str(again) and "/x/y.arrow" in str(again)
