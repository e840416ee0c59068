"""``save_pickle`` and ``load_pickle``: XShards as files of pickled shards.

One file per partition, named ``part-00000``, ``part-00001``, ... in partition order, written
all or nothing through the engine's file sink. A file holds the partition's shards in batches
of ``batchSize``, each batch one pickle, then a footer listing the batches, so a reader can
split a file between batches without reading it whole:

``MAGIC | batch pickles ... | footer pickle | footer length (8 bytes, little-endian) | MAGIC``

Spark writes SequenceFiles instead; these files are shardflow's own.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from shardflow.engine.xshards.encoding import decode, encode
from shardflow.engine.xshards.execution import TaskListSource, source_dataset
from shardflow.engine.xshards.stages import KeepStage, MapShards
from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.datasink import TaskContext
from shardflow.sdk.datasource import ReadTask
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.filesystems import display_path, resolve_filesystem
from shardflow.sdk.paths import expand_paths, normalize_paths_arg

MAGIC = b"SFXSHRD1"
_TRAILER = struct.Struct("<Q")
Batch = tuple[int, int, int]  # offset, bytes, shards


# -- writing ------------------------------------------------------------------------------


def save_pickle(
    xshards: Any, path: str, batch_size: int, storage_options: Any = None, filesystem: Any = None
) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batchSize must be a positive int, got {batch_size!r}.")
    sink = PickleShardsDatasink(
        path, batch_size, storage_options=storage_options, filesystem=filesystem
    )
    xshards._ds.write_datasink(sink)


class _PartNames(FilenameProvider):
    def get_filename_for_task(self, write_uuid: str, task_index: int) -> str:
        return f"part-{task_index:05d}"


class PickleShardsDatasink(BlockBasedFileDatasink):
    """Writes each partition to its own file (empty partitions too, as Spark does)."""

    def __init__(self, path: str, batch_size: int, **kwargs: Any):
        super().__init__(path, filename_provider=_PartNames(), **kwargs)
        self.batch_size = batch_size

    def get_name(self) -> str:
        return "PickleShards"

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> list[str]:
        if self._skip_write:
            return []
        if not self._staging:
            raise RuntimeError("PickleShardsDatasink.write called before on_write_start.")
        namer = self._namer(ctx.write_uuid or self._write_id, ctx.task_idx)
        staged: list[str] = []
        for index, block in enumerate(blocks):
            staged += self._write_part(block, "", namer, index)
        return staged

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        write_partition(decode(block), f, self.batch_size)


def write_partition(elements: list[Any], f: Any, batch_size: int) -> None:
    import cloudpickle

    f.write(MAGIC)
    position = len(MAGIC)
    batches: list[Batch] = []
    for start in range(0, len(elements), batch_size):
        batch = elements[start : start + batch_size]
        data = cloudpickle.dumps(batch, protocol=5)
        f.write(data)
        batches.append((position, len(data), len(batch)))
        position += len(data)
    footer = pickle.dumps({"version": 1, "batches": batches})
    f.write(footer)
    f.write(_TRAILER.pack(len(footer)))
    f.write(MAGIC)


# -- reading ------------------------------------------------------------------------------


def load_pickle(
    path: Any, min_partitions: int | None, storage_options: Any = None, filesystem: Any = None
) -> Any:
    from shardflow.engine.xshards.shards import XShards

    if min_partitions is not None and (
        isinstance(min_partitions, bool)
        or not isinstance(min_partitions, int)
        or min_partitions < 1
    ):
        raise ValueError(f"minPartitions must be a positive int or None, got {min_partitions!r}.")
    paths = normalize_paths_arg(path)
    fs, stripped = resolve_filesystem(paths, filesystem, storage_options)
    try:
        files = [info.path for info in expand_paths(fs, stripped)]
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"load_pickle: {exc}") from exc
    if not files:
        raise FileNotFoundError(f"load_pickle: no files found under {path!r}.")
    units: list[tuple[str, list[Batch] | None]] = [(f, None) for f in files]
    if min_partitions is not None and min_partitions > len(files):
        units = _split_units([(f, read_footer(fs, f)) for f in files], min_partitions)
    from shardflow.engine.xshards.spark.session import spark_session_or_none

    if spark_session_or_none() is not None:
        from shardflow.engine.xshards.spark.pickle_files import PickleUnit
        from shardflow.engine.xshards.spark.shards import from_calls

        calls = [PickleUnit(_PickleRead(fs, file, batches)) for file, batches in units]
        return from_calls(calls, "LoadPickle")
    tasks = [
        ReadTask(_PickleRead(fs, file, batches), BlockMetadata(None, None, input_files=[file]))
        for file, batches in units
    ]
    source = source_dataset(TaskListSource("LoadPickle", tasks))
    dataset = source._with(MapShards(KeepStage("LoadPickle")))
    return XShards(dataset, len(tasks), _name="LoadPickle")


def _split_units(
    units: list[tuple[str, list[Batch]]], wanted: int
) -> list[tuple[str, list[Batch]]]:
    """Halve the unit with the most batches until there are ``wanted`` units (or none has
    two batches left), keeping files and batches in order."""
    units = list(units)
    while len(units) < wanted:
        index = max(range(len(units)), key=lambda i: len(units[i][1]))
        file, batches = units[index]
        if len(batches) < 2:
            break
        half = len(batches) // 2
        units[index : index + 1] = [(file, batches[:half]), (file, batches[half:])]
    return units


def read_footer(fs: Any, path: str) -> list[Batch]:
    """The batches of a file, read from its footer alone."""
    shown = display_path(fs, path)
    with fs.open(path, "rb") as f:
        size = f.seek(0, 2)
        if size < 2 * len(MAGIC) + _TRAILER.size:
            raise ValueError(_not_ours(shown))
        f.seek(size - _TRAILER.size - len(MAGIC))
        tail = f.read(_TRAILER.size + len(MAGIC))
        if tail[-len(MAGIC) :] != MAGIC:
            raise ValueError(_not_ours(shown))
        (length,) = _TRAILER.unpack(tail[: _TRAILER.size])
        f.seek(size - _TRAILER.size - len(MAGIC) - length)
        return _parse_footer(f.read(length), shown)


def _parse_footer(data: bytes, shown: str) -> list[Batch]:
    try:
        footer = pickle.loads(data)
        return [tuple(b) for b in footer["batches"]]
    except Exception as exc:
        raise ValueError(f"load_pickle: the footer of {shown} is damaged ({exc}).") from exc


def _not_ours(shown: str) -> str:
    return (
        f"load_pickle: {shown} is not a file written by XShards.save_pickle (no shardflow "
        "pickle footer); it may be truncated or written by another tool."
    )


class _PickleRead:
    """Reads one partition: a whole file, or some of its batches."""

    def __init__(self, fs: Any, path: str, batches: Sequence[Batch] | None):
        self.fs, self.path, self.batches = fs, path, batches

    def __call__(self) -> list[pa.Table]:
        shown = display_path(self.fs, self.path)
        elements: list[Any] = []
        with self.fs.open(self.path, "rb") as f:
            if self.batches is None:
                data = memoryview(f.read())
                if (
                    len(data) < 2 * len(MAGIC) + _TRAILER.size
                    or bytes(data[-len(MAGIC) :]) != MAGIC
                ):
                    raise ValueError(_not_ours(shown))
                end = len(data) - len(MAGIC) - _TRAILER.size
                (length,) = _TRAILER.unpack(data[end : end + _TRAILER.size])
                batches = _parse_footer(bytes(data[end - length : end]), shown)
                for offset, size, _ in batches:
                    elements.extend(_load_batch(data[offset : offset + size], shown))
            else:
                for offset, size, _ in self.batches:
                    f.seek(offset)
                    elements.extend(_load_batch(f.read(size), shown))
        return [encode(elements)]


def _load_batch(data: Any, shown: str) -> list[Any]:
    try:
        return pickle.loads(data)
    except Exception as exc:
        raise ValueError(
            f"load_pickle: cannot unpickle a batch of {shown}: {type(exc).__name__}: {exc}"
        ) from exc
