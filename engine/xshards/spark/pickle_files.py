"""``save_pickle`` and ``load_pickle`` of XShards on Spark: the same files as on the engine
backends (engine/xshards/pickle_io.py), written and read by Spark tasks.

Every task writes its partition to a hidden staging file beside the final one; the driver
renames them only after the job succeeded, so a failed save leaves no ``part-*`` file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from shardflow.engine.xshards.encoding import decode
from shardflow.engine.xshards.spark.errors import guarded_with_index
from shardflow.sdk.filesystems import display_path, join, resolve_filesystem


def save_pickle_from_spark(
    xshards: Any, path: str, batch_size: int, storage_options: Any, filesystem: Any
) -> None:
    """Write each partition of ``xshards`` to ``path/part-NNNNN`` from its Spark task."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batchSize must be a positive int, got {batch_size!r}.")
    fs, (folder,) = resolve_filesystem([path], filesystem, storage_options)
    if fs.exists(folder) and fs.ls(folder):
        raise FileExistsError(
            f"save_pickle: {display_path(fs, folder)} exists and is not empty; choose a new "
            "folder or remove it first."
        )
    fs.makedirs(folder, exist_ok=True)
    writer = _WritePartition(fs, folder, batch_size)
    staged = xshards._run(
        xshards.rdd.mapPartitionsWithIndex(guarded_with_index(writer, "save_pickle")).collect
    )
    for index, name in sorted(staged):
        fs.mv(name, join(fs, folder, f"part-{index:05d}"))


class _WritePartition:
    def __init__(self, fs: Any, folder: str, batch_size: int):
        self.fs, self.folder, self.batch_size = fs, folder, batch_size

    def __call__(self, index: int, shards: Iterable[Any]) -> Iterator[tuple[int, str]]:
        from shardflow.engine.xshards.pickle_io import write_partition

        staging = join(self.fs, self.folder, f".part-{index:05d}.staging")
        with self.fs.open(staging, "wb") as f:
            write_partition(list(shards), f, self.batch_size)
        yield index, staging


class PickleUnit:
    """Reads one partition's shards (a whole file or some of its batches) in a Spark task."""

    def __init__(self, read: Any):
        self.read = read

    def __call__(self) -> list[Any]:
        return [element for block in self.read() for element in decode(block)]
