"""Inside a file write task: stream the task's blocks into staged files.

Used by :class:`~shardflow.sdk.file_datasink.BlockBasedFileDatasink`; connector authors
implement ``open_block_writer`` (or only ``write_block_to_file``) and do not call this
module directly.

A write task never holds all of its blocks: each block is handed to the open file's
:class:`BlockFileWriter` as it arrives, so a task's memory is one block plus what the format
buffers (a Parquet row group), whatever the size of its files. Sinks that only implement
``write_block_to_file`` (one call with a whole file's rows) get their blocks gathered per
file, as before streaming writers existed.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from typing import Any

from shardflow.sdk.block import Block, concat_blocks

logger = logging.getLogger(__name__)


class BlockFileWriter:
    """Writes the blocks of one file, one at a time.

    Made by ``BlockBasedFileDatasink.open_block_writer(f, block)`` for an open binary file
    ``f``; the sink closes ``f`` after :meth:`close`.
    """

    def write(self, block: Block) -> bool:
        """Append ``block`` to the file. Return False, writing nothing, when the file cannot
        take it (its schema cannot be cast to the file's): the sink then finishes this file
        and starts another one with the block."""
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file (buffered rows, footer)."""

    def abandon(self) -> None:
        """Release what the writer holds after a failure; the file is discarded."""
        try:
            self.close()
        except Exception as exc:
            logger.debug("ignored while abandoning a file: %s", exc)


class AppendingWriter(BlockFileWriter):
    """For formats whose files are the concatenation of their blocks' encodings (JSON Lines):
    calls ``write_block_to_file(block, f)`` for every block on the same file."""

    def __init__(self, write_block_to_file: Callable[[Block, Any], None], f: Any):
        self._write, self._f = write_block_to_file, f

    def write(self, block: Block) -> bool:
        self._write(block, self._f)
        return True


class WholeFileWriter(BlockFileWriter):
    """For sinks that write a whole file in one ``write_block_to_file(block, f)`` call: the
    file's blocks are gathered and written at the end."""

    def __init__(self, write_block_to_file: Callable[[Block, Any], None], f: Any):
        self._write, self._f = write_block_to_file, f
        self._blocks: list[Block] = []

    def write(self, block: Block) -> bool:
        self._blocks.append(block)
        return True

    def close(self) -> None:
        blocks, self._blocks = self._blocks, []
        self._write(blocks[0] if len(blocks) == 1 else concat_blocks(blocks), self._f)

    def abandon(self) -> None:
        self._blocks = []


class _OpenFile:
    """One staged file being written: its name, stream, writer and row count."""

    def __init__(
        self,
        relative: str,
        stream: Any,
        writer: BlockFileWriter,
        fs: Any = None,
        target: str | None = None,
    ):
        self.relative, self.stream, self.writer, self.rows = relative, stream, writer, 0
        self.fs, self.target, self.data_bytes = fs, target, 0

    def write(self, block: Block) -> bool:
        try:
            if not self.writer.write(block):
                return False
        except OSError as exc:
            self._reraise_no_space(exc, block.nbytes, "the block being written")
            raise
        self.rows += block.num_rows
        self.data_bytes += block.nbytes
        return True

    def finish(self) -> str:
        try:
            try:
                self.writer.close()
            finally:
                self.stream.close()
        except OSError as exc:
            self._reraise_no_space(exc, self.data_bytes, "the file's rows")
            raise
        return self.relative

    def _reraise_no_space(self, exc: OSError, needed: int, what: str) -> None:
        if exc.errno == errno.ENOSPC and self.target is not None:
            raise no_space_error(exc, self.fs, self.target, self.stream, needed, what) from exc

    def abandon(self) -> None:
        try:
            self.writer.abandon()
        finally:
            try:
                self.stream.close()
            except Exception as exc:  # the write already failed; its staging is removed
                logger.debug("ignored while abandoning %s: %s", self.relative, exc)


def stream_into_files(
    blocks: Iterable[Block],
    *,
    split: Callable[[Block], Iterable[Any]],
    open_file: Callable[[str, Block, int], _OpenFile],
    min_rows: int | None,
    max_rows: int | None,
) -> list[str]:
    """Write ``blocks`` into files, one open file per partition folder at a time.

    Args:
        blocks: The task's blocks, consumed one at a time.
        split: ``block -> [(folder, part), ...]`` (hive partitions; ``[("", block)]`` when
            the write is not partitioned).
        open_file: ``(folder, first_part, file_index) -> _OpenFile`` opens the next file of
            a folder; ``file_index`` counts the files opened so far in that folder.
        min_rows: Finish a file once it holds at least this many rows (None: one file per
            task and folder).
        max_rows: Never put more rows than this in one file.

    Returns:
        The staged relative paths, in the order the files were finished.
    """
    open_files: dict[str, _OpenFile] = {}
    opened: dict[str, int] = {}
    staged: list[str] = []

    def finish(folder: str) -> None:
        staged.append(open_files.pop(folder).finish())

    try:
        for block in blocks:
            if block.num_rows == 0:
                continue
            for folder, part in split(block):
                offset = 0
                while offset < part.num_rows:
                    current = open_files.get(folder)
                    piece = part.slice(offset) if offset else part
                    if max_rows is not None:
                        room = max_rows - (current.rows if current is not None else 0)
                        if piece.num_rows > room:
                            piece = piece.slice(0, room)
                    fresh = current is None
                    if current is None:
                        index = opened.get(folder, 0)
                        opened[folder] = index + 1
                        current = open_files[folder] = open_file(folder, piece, index)
                    if not current.write(piece):
                        if fresh:
                            raise RuntimeError(
                                f"the writer of {current.relative} refused its first block"
                            )
                        finish(folder)  # another schema: the piece starts a new file
                        continue
                    offset += piece.num_rows
                    if (max_rows is not None and current.rows >= max_rows) or (
                        min_rows is not None and current.rows >= min_rows
                    ):
                        finish(folder)
        for folder in list(open_files):
            finish(folder)
    except BaseException:
        for still_open in open_files.values():
            still_open.abandon()
        raise
    return staged


def make_open_file(
    relative: str,
    stream: Any,
    writer: BlockFileWriter,
    fs: Any = None,
    target: str | None = None,
) -> _OpenFile:
    """An open staged file for :func:`stream_into_files`; ``fs`` and ``target`` (the staged
    path) name the file when the device runs out of space."""
    return _OpenFile(relative, stream, writer, fs, target)


def no_space_error(
    exc: OSError,
    fs: Any,
    target: str,
    stream: Any,
    needed: int | None,
    what: str = "the data being written",
) -> OSError:
    """An OSError (errno ENOSPC) for ``exc``, raised while writing ``target`` through
    ``stream``, that names the file, the bytes written, the bytes ``what`` (the data being
    written) takes in memory, about what it needs on disk, and the space left where the
    device tells."""
    from shardflow.sdk.filesystems import display_path, is_local

    try:
        written: int | None = int(stream.tell())
    except Exception:
        written = None
    free = None
    if fs is not None and is_local(fs):
        folder = os.path.dirname(target)
        while folder and not os.path.isdir(folder):
            folder = os.path.dirname(folder)
        try:
            free = shutil.disk_usage(folder or "/").free
        except OSError:
            free = None
    facts = []
    if needed is not None:
        facts.append(f"{what} take {needed:,} bytes in memory, about what they need on disk")
    if written is not None:
        facts.append(f"{written:,} bytes of the file were written")
    if free is not None:
        facts.append(f"{free:,} bytes are free on that device")
    shown = display_path(fs, target) if fs is not None else target
    message = (
        f"No space left on device while writing {shown}"
        + (f" ({'; '.join(facts)})" if facts else "")
        + f": {exc.strerror or exc}. Free at least that much there (the rest of the write "
        "needs more), or write to another device."
    )
    return OSError(errno.ENOSPC, message)
