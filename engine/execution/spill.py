"""Spilling blocks to local disk as Arrow IPC files, in folders that never outlive their run.

Each execution that spills gets one private folder (``shardflow-spill-<pid>-...`` under the
system's temporary directory, mode 0700, files 0600: engine/execution/private_dirs.py). The
executor removes it when the execution ends, whether it finished, failed or was interrupted;
folders still registered at interpreter exit are removed then, and folders left by a process
that no longer exists (killed with SIGKILL) are removed the next time any shardflow process
makes one.
"""

from __future__ import annotations

import errno
import os
import uuid

import pyarrow as pa
import pyarrow.ipc as ipc

from shardflow.engine.execution.private_dirs import (
    create_private_file,
    forget_private_dir,
    make_private_dir,
)
from shardflow.engine.execution.refs import SpilledRef

_PREFIX = "shardflow-spill-"


def make_spill_dir() -> str:
    """A new, empty spill folder owned by this process."""
    return make_private_dir(_PREFIX)


def forget_spill_dir(path: str) -> None:
    forget_private_dir(path)


#: Spilled blocks are written as record batches of about this size, the unit of reading back.
BATCH_BYTES = 256 * 1024


class SpillError(OSError):
    """Spilling a block to local disk failed (the disk is full, or the folder is gone)."""


def spill_block(block: pa.Table, folder: str) -> SpilledRef:
    """Write ``block`` to a new IPC file in ``folder`` and return its reference.

    Raises:
        SpillError: the write failed; the message names the file, the bytes the block needs
            and, for a full disk, the space left there.
    """
    path = os.path.join(folder, f"{uuid.uuid4().hex}.arrow")
    row_bytes = max(1, block.nbytes // max(1, block.num_rows))
    batches = block.to_batches(max_chunksize=max(1024, BATCH_BYTES // row_bytes))
    try:
        create_private_file(path)
        with ipc.new_file(path, block.schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    except (OSError, pa.ArrowException) as exc:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise _spill_error(exc, path, block.nbytes) from exc
    return SpilledRef(path, tuple(len(b) for b in batches))


def _spill_error(exc: BaseException, path: str, nbytes: int) -> SpillError:
    full = getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc)
    reason = "the disk is full" if full else str(exc)
    free = ""
    try:
        stats = os.statvfs(os.path.dirname(path))
        free = f", {stats.f_bavail * stats.f_frsize} bytes free there"
    except OSError:
        pass
    return SpillError(
        errno.ENOSPC if full else getattr(exc, "errno", None) or errno.EIO,
        f"Could not spill a block of {nbytes} bytes to {path} ({reason}{free}). Free space "
        "there, point TMPDIR at a larger disk, or raise DataContext.memory_budget_bytes so "
        "that less is spilled.",
    )
