"""Block references: where a block lives, resolved by the backend that made it.

The executor and operators never hold blocks, only references with metadata (``RefBundle``):

- ``MemoryRef``: a block in this process's memory (local backend);
- ``SpilledRef``: a block written to an Arrow IPC file on local disk (an exchange spilled it);
- ``RayRef``: a block in Ray's object store;
- ``SliceRef``: a row range of another reference (limits, splits, repartitions), cut lazily
  where the block is used, so no block is copied to cut it;
- ``ShmRef`` (engine/execution/shm.py): a block on its way to or from a local worker process.

Inside a task, ``resolve`` turns any of them (and a plain table, which is what Ray hands a task
for a top-level object reference) into a ``pyarrow.Table``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.optional import require


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
    """A block stored in the Arrow IPC file at ``path`` as record batches of ``batch_rows``
    rows each, so that a row range reads only the batches it overlaps (plain reads, not a
    memory map: what is read is exactly what is held)."""

    path: str
    batch_rows: tuple[int, ...] = ()

    in_memory = False

    @property
    def num_rows(self) -> int:
        return sum(self.batch_rows)

    def load(self, columns: list[str] | None = None) -> pa.Table:
        """The whole block (or only ``columns``)."""
        return self.load_rows(0, self.num_rows, columns)

    def load_rows(self, offset: int, length: int, columns: list[str] | None = None) -> pa.Table:
        """Rows ``offset .. offset + length``, reading only the batches that hold them."""
        with self.reader(columns) as reader:
            batches, first, start = [], None, 0
            for index, rows in enumerate(self.batch_rows):
                if start >= offset + length and batches:
                    break
                if start + rows > offset or (rows == 0 and start == offset):
                    first = start if first is None else first
                    batches.append(reader.get_batch(index))
                start += rows
            table = pa.Table.from_batches(batches, schema=reader.schema)
        return table.slice(offset - (first or 0), length)

    def reader(self, columns: list[str] | None = None) -> _SpillReader:
        """A reader of the file's batches (only ``columns`` when given); use it in a with."""
        return _SpillReader(self.path, columns)


class _SpillReader:
    def __init__(self, path: str, columns: list[str] | None):
        self.path, self.columns = path, columns

    def __enter__(self) -> Any:
        import pyarrow.ipc as ipc

        self._source = pa.OSFile(self.path, "rb")
        return ipc.open_file(
            self._source, options=_read_options(self._source, self.columns, self.path)
        )

    def __exit__(self, *exc: Any) -> None:
        self._source.close()


def _read_options(source: Any, columns: list[str] | None, path: str) -> Any:
    import pyarrow.ipc as ipc

    if columns is None:
        return None
    schema = ipc.open_file(source).schema
    source.seek(0)
    return ipc.IpcReadOptions(included_fields=[schema.get_field_index(c) for c in columns])


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


class PicklingBlock:
    """A block with columns of Python objects, as it is stored in Ray's object store.

    Ray writes the schemas of Arrow tables through Arrow IPC, which turns extension types
    Arrow does not know (the Python object column, deliberately unregistered so that files
    are never unpickled) into their storage. Such blocks are pickled whole instead.
    """

    __slots__ = ("table",)

    def __init__(self, table: pa.Table):
        self.table = table

    def __reduce__(self) -> tuple:
        import pickle

        return _unpickle_block, (pickle.dumps(self.table, protocol=5),)


def _unpickle_block(payload: bytes) -> PicklingBlock:
    import pickle

    return PicklingBlock(pickle.loads(payload))


def for_ray(block: pa.Table) -> Any:
    """What to hand Ray for ``block`` (see PicklingBlock)."""
    from shardflow.sdk.object_column import is_object_type

    if any(is_object_type(t) for t in block.schema.types):
        return PicklingBlock(block)
    return block


def _from_ray(value: Any) -> pa.Table:
    return value.table if isinstance(value, PicklingBlock) else value


def resolve(item: Any) -> pa.Table:
    """The block behind a reference, inside a task or on the driver."""
    if isinstance(item, pa.Table):
        return item
    if isinstance(item, PicklingBlock):
        return item.table
    if isinstance(item, MemoryRef):
        return item.block
    if isinstance(item, SliceRef):
        if isinstance(item.parent, SpilledRef):
            return item.parent.load_rows(item.offset, item.length)
        return resolve(item.parent).slice(item.offset, item.length)
    if isinstance(item, SpilledRef):
        return item.load()
    if isinstance(item, RayRef):
        ray = require("ray", "ray", "Blocks in Ray's object store")

        return _from_ray(ray.get(item.object_ref))
    if type(item).__name__ == "ObjectRef":
        ray = require("ray", "ray", "Blocks in Ray's object store")

        return _from_ray(ray.get(item))
    from shardflow.engine.execution.shm import ShmRef

    if isinstance(item, ShmRef):
        return item.load()
    raise TypeError(f"Not a block reference: {type(item).__name__}.")


def slice_ref(ref: Any, offset: int, length: int) -> Any:
    """A reference to ``length`` rows of ``ref`` from ``offset`` (slices of slices collapse)."""
    if isinstance(ref, SliceRef):
        return SliceRef(ref.parent, ref.offset + offset, length)
    return SliceRef(ref, offset, length)


def slice_metadata(meta: BlockMetadata, offset: int, length: int) -> BlockMetadata:
    """Metadata of a row range, with bytes estimated in proportion to rows."""
    rows = meta.num_rows or 0
    size: int | None = None
    if meta.size_bytes is not None:
        size = meta.size_bytes if rows == 0 else int(meta.size_bytes * length / rows)
    return BlockMetadata(length, size, input_files=meta.input_files)


@dataclass
class RefBundle:
    """A block reference with its metadata, as it moves between operators.

    ``charge`` is the bytes it counts in the memory budget until released; ``source_index``
    is a source item's position among its plan's source items (a task over one source item
    is known by it: file names of writes, seeds, resumed writes).
    """

    ref: Any
    meta: BlockMetadata
    charge: int = 0
    source_index: int | None = None

    @property
    def num_rows(self) -> int:
        return self.meta.num_rows or 0

    @property
    def is_lazy(self) -> bool:
        """True for a source item that is not a block yet (a read task)."""
        return (
            not isinstance(self.ref, (BlockRef, pa.Table))
            and type(self.ref).__name__ != "ObjectRef"
        )
