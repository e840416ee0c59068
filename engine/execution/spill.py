"""Spilling blocks to local disk as Arrow IPC files, in folders that never outlive their run.

Each execution that spills gets one folder (``shardflow-spill-<pid>-...`` under the system's
temporary directory). The executor removes it when the execution ends, whether it finished,
failed or was interrupted; folders still registered at interpreter exit are removed then, and
folders left by a process that no longer exists (killed with SIGKILL) are removed the next
time any shardflow process makes one.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tempfile
import threading
import uuid

import pyarrow as pa
import pyarrow.ipc as ipc

from shardflow.engine.execution.refs import SpilledRef

_PREFIX = "shardflow-spill-"
_live: set = set()
_lock = threading.Lock()
_swept = False


def make_spill_dir() -> str:
    """A new, empty spill folder owned by this process."""
    global _swept
    with _lock:
        if not _swept:
            _swept = True
            _remove_orphans()
        path = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
        _live.add(path)
    return path


def forget_spill_dir(path: str) -> None:
    with _lock:
        _live.discard(path)


#: Spilled blocks are written as record batches of about this size, the unit of reading back.
BATCH_BYTES = 256 * 1024


def spill_block(block: pa.Table, folder: str) -> SpilledRef:
    """Write ``block`` to a new IPC file in ``folder`` and return its reference."""
    path = os.path.join(folder, f"{uuid.uuid4().hex}.arrow")
    row_bytes = max(1, block.nbytes // max(1, block.num_rows))
    batches = block.to_batches(max_chunksize=max(1024, BATCH_BYTES // row_bytes))
    with ipc.new_file(path, block.schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return SpilledRef(path, tuple(len(b) for b in batches))


def _remove_orphans() -> None:
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{_PREFIX}*")):
        try:
            pid = int(os.path.basename(path)[len(_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def _remove_live_dirs() -> None:
    with _lock:
        paths = list(_live)
        _live.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
