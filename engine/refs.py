"""Block references: where a block lives, resolved by the backend that made it.

The executor and operators never hold blocks, only references with metadata (``RefBundle``):

- ``MemoryRef``: a block in this process's memory (local backend);
- ``SpilledRef``: a block written to an Arrow IPC file on local disk (an exchange spilled it);
- ``RayRef``: a block in Ray's object store;
- ``SliceRef``: a row range of another reference (limits, splits, repartitions), cut lazily
  where the block is used, so no block is copied to cut it.

Inside a task, ``resolve`` turns any of them (and a plain table, which is what Ray hands a task
for a top-level object reference) into a ``pyarrow.Table``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata


class BlockRef:
    """Where a block lives. Subclasses are small, immutable and picklable."""

    __slots__ = ()

    #: Whether the block occupies this process's memory (and so counts in the budget).
    in_memory: bool = True


@dataclass(frozen=True)
class MemoryRef(BlockRef):
    """A block held in this process's memory."""

    block: pa.Table


@dataclass(frozen=True)
class SpilledRef(BlockRef):
    """A block stored as the Arrow IPC file at ``path`` (one block per file)."""

    path: str

    in_memory = False

    def load(self) -> pa.Table:
        """Memory-map the file and return the block (zero-copy; pages are read on access)."""
        import pyarrow.ipc as ipc

        with pa.memory_map(self.path, "r") as source:
            return ipc.open_file(source).read_all()


@dataclass(frozen=True)
class RayRef(BlockRef):
    """A block in Ray's object store."""

    object_ref: Any


@dataclass(frozen=True)
class SliceRef(BlockRef):
    """Rows ``offset .. offset + length`` of the block behind ``parent``."""

    parent: Any
    offset: int
    length: int

    @property
    def in_memory(self) -> bool:  # type: ignore[override]
        return getattr(self.parent, "in_memory", True)


def resolve(item: Any) -> pa.Table:
    """The block behind a reference, inside a task or on the driver."""
    if isinstance(item, pa.Table):
        return item
    if isinstance(item, MemoryRef):
        return item.block
    if isinstance(item, SliceRef):
        return resolve(item.parent).slice(item.offset, item.length)
    if isinstance(item, SpilledRef):
        return item.load()
    if isinstance(item, RayRef):
        import ray

        return ray.get(item.object_ref)
    if type(item).__name__ == "ObjectRef":
        import ray

        return ray.get(item)
    raise TypeError(f"Not a block reference: {type(item).__name__}.")


def slice_ref(ref: Any, offset: int, length: int) -> Any:
    """A reference to ``length`` rows of ``ref`` from ``offset`` (slices of slices collapse)."""
    if isinstance(ref, SliceRef):
        return SliceRef(ref.parent, ref.offset + offset, length)
    return SliceRef(ref, offset, length)


def slice_metadata(meta: BlockMetadata, offset: int, length: int) -> BlockMetadata:
    """Metadata of a row range, with bytes estimated in proportion to rows."""
    rows = meta.num_rows or 0
    size: Optional[int] = None
    if meta.size_bytes is not None:
        size = meta.size_bytes if rows == 0 else int(meta.size_bytes * length / rows)
    return BlockMetadata(length, size, input_files=meta.input_files)


@dataclass
class RefBundle:
    """A block reference with its metadata, as it moves between operators.

    ``charge`` is the bytes it counts in the memory budget until released; ``index`` is its
    position in its producer's output stream (ordered delivery, deterministic seeds).
    """

    ref: Any
    meta: BlockMetadata
    charge: int = 0

    @property
    def num_rows(self) -> int:
        return self.meta.num_rows or 0

    @property
    def is_lazy(self) -> bool:
        """True for a source item that is not a block yet (a read task)."""
        return not isinstance(self.ref, (BlockRef, pa.Table)) and type(self.ref).__name__ != "ObjectRef"
