"""Blocks handed between the driver and its worker processes through shared memory.

Pickling a large block through a pipe costs several copies and many small writes; an actor
fed batches of preprocessed images spent most of its time there. Instead, a block of at least
``MIN_BYTES`` is written once as an Arrow IPC file in shared memory (``/dev/shm``), and the
other process maps it: the columns it reads are views of the mapping, with no copy. The
receiver unlinks the file as soon as it is mapped; the memory lives until the block is
garbage collected. Files of processes that died before their reader mapped them are removed
by the next shardflow process that starts worker processes.

Blocks with Python object columns are pickled instead: Arrow IPC drops their unregistered
extension type.
"""

from __future__ import annotations

import glob
import os
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from shardflow.engine.execution.refs import BlockRef

#: Smaller blocks are pickled: the file costs more than the copies.
MIN_BYTES = 1 << 20
_PREFIX = "shardflow-shm-"


def _folder() -> str:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


@dataclass(frozen=True)
class ShmRef(BlockRef):
    """A block in a shared-memory file, to be mapped (once) by the process it was sent to."""

    path: str

    def load(self) -> pa.Table:
        source = pa.memory_map(self.path, "r")
        try:
            return ipc.open_file(source).read_all()
        finally:
            unlink(self.path)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def can_share(block: pa.Table) -> bool:
    from shardflow.sdk.object_column import is_object_type

    return block.nbytes >= MIN_BYTES and not any(is_object_type(t) for t in block.schema.types)


def share(block: pa.Table) -> ShmRef | None:
    """Write ``block`` to a new shared-memory file; None when shared memory is short (a
    container's /dev/shm may hold only 64 MiB), and the block is then pickled."""
    folder = _folder()
    try:
        stats = os.statvfs(folder)
        if stats.f_bavail * stats.f_frsize < 2 * block.nbytes + MIN_BYTES:
            return None
    except OSError:
        return None
    path = os.path.join(folder, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex}.arrow")
    try:
        with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, block.schema) as writer:
            writer.write_table(block)
    except (OSError, pa.ArrowException):
        unlink(path)
        return None
    return ShmRef(path)


def for_transfer(item: Any) -> Any:
    """What to send another process for a task input or output: a large in-memory block
    goes through shared memory, anything else as it is."""
    from shardflow.engine.execution.refs import MemoryRef, SliceRef

    block = None
    if isinstance(item, pa.Table):
        block = item
    elif isinstance(item, MemoryRef):
        block = item.block
    elif isinstance(item, SliceRef) and isinstance(item.parent, MemoryRef):
        block = item.parent.block.slice(item.offset, item.length)
    if block is None or not can_share(block):
        return item
    shared = share(block)
    return item if shared is None else shared


def received(item: Any) -> Any:
    """The block behind what another process sent (``for_transfer``'s counterpart)."""
    return item.load() if isinstance(item, ShmRef) else item


def remove_orphans() -> None:
    """Remove files left by processes that no longer exist."""
    for path in glob.glob(os.path.join(_folder(), f"{_PREFIX}*")):
        try:
            pid = int(os.path.basename(path)[len(_PREFIX) :].split("-", 1)[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            if not os.path.isdir(path):  # folders of this prefix are not ours to remove
                unlink(path)
        except (ValueError, PermissionError):
            continue
