"""Blocks handed between the driver and its worker processes through shared memory.

Pickling a large block through a pipe costs several copies and many small writes; an actor
fed batches of preprocessed images spent most of its time there. Instead, a block of at least
``MIN_BYTES`` is written once as an Arrow IPC file in shared memory (``/dev/shm``), and the
other process maps it: the columns it reads are views of the mapping, with no copy. The
receiver unlinks the file as soon as it is mapped; the memory lives until the block is
garbage collected.

The files hold the user's data, so they are private (engine/execution/private_dirs.py): the
driver makes one folder per run (``shardflow-shm-<pid>-...``, mode 0700) when it starts its
worker processes and hands its path to them (``SHM_DIR_ENV``); every file in it is created
with ``O_EXCL`` and mode 0600. The folder is removed when the driver exits, and a folder whose
driver was killed is removed by the next shardflow process that starts worker processes.

Blocks with Python object columns are pickled instead: Arrow IPC drops their unregistered
extension type.
"""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from shardflow.engine.execution.private_dirs import create_private_file, make_private_dir
from shardflow.engine.execution.refs import BlockRef

#: Smaller blocks are pickled: the file costs more than the copies.
MIN_BYTES = 1 << 20
_PREFIX = "shardflow-shm-"
#: The driver's folder for shared blocks, in the environment of its worker processes.
SHM_DIR_ENV = "SHARDFLOW_SHM_DIR"

_folder: str | None = None
_folder_lock = threading.Lock()


def _parent() -> str:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        return shm
    return tempfile.gettempdir()


def private_folder() -> str:
    """This run's folder for shared blocks: the driver's (a worker is told it), made on
    first use; folders of drivers that were killed are removed then. Raises OSError when
    there is none (a worker whose driver could not make one)."""
    global _folder
    given = os.environ.get(SHM_DIR_ENV)
    if given is not None:
        if not given:
            raise OSError("no folder for shared-memory blocks: they are pickled instead")
        return given
    with _folder_lock:
        if _folder is None or not os.path.isdir(_folder):
            _folder = make_private_dir(_PREFIX, _parent())
        return _folder


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
    try:
        folder = private_folder()
        stats = os.statvfs(folder)
        if stats.f_bavail * stats.f_frsize < 2 * block.nbytes + MIN_BYTES:
            return None
    except OSError:
        return None
    # Named by the writer's pid, so that a worker killed before its block was read leaves
    # nothing behind (``remove_files_of``).
    path = os.path.join(folder, f"{os.getpid()}-{uuid.uuid4().hex}.arrow")
    try:
        create_private_file(path)
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


def remove_files_of(pid: int) -> None:
    """Remove the blocks a process (a worker that was killed or died) wrote and no one read."""
    try:
        folder = private_folder()
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(f"{pid}-"):
            unlink(os.path.join(folder, name))
