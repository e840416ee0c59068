"""Inside a file read task: open each file, retry transient faults, skip or report bad files.

Used by :class:`~shardflow.sdk.file_datasource.FileBasedDatasource`; connector authors do
not call it directly.

Retries never lose or duplicate rows: after a transient fault in the middle of a file, the
file is opened again from its start and the rows already handed downstream are skipped.
With ``on_bad_file="skip"`` a file's blocks are held until the file is fully read, so a
corrupt file contributes all of its rows or none.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.sdk import task_stats
from shardflow.sdk.block import Block, concat_blocks, to_block
from shardflow.sdk.input_identity import DoneInputs, InputItem, InputPiece, as_ranges
from shardflow.sdk.retry import RetryConfig
from shardflow.sdk.storage_errors import raise_explained

logger = logging.getLogger(__name__)

# Errors that say something about the program rather than the file: never skipped.
_PROGRAM_ERRORS = (
    TypeError,
    AttributeError,
    NameError,
    ImportError,
    NotImplementedError,
    AssertionError,
    RecursionError,
    MemoryError,
)


@dataclass(frozen=True)
class FileUnit:
    """What one read task reads from one file: the whole file, or a split of it.

    Args:
        path: The path as the filesystem names it.
        size: Bytes of the file (or of the split) from the listing; None when unknown.
        partition: Typed partition values parsed from the path, as ``(name, value)`` pairs.
        split: None for the whole file, else the byte ranges of the part: ``(start, end)``,
            or a tuple of such ranges (what a resumed write has left of a file). A format
            that splits files says which of its pieces a range holds (Parquet: the row
            groups whose first byte lies in it).
        version: The file's version from the listing (see ``FileInfo.version``).
        file_size: Bytes of the whole file when this unit is a split (``size`` otherwise).
    """

    path: str
    size: int | None
    partition: tuple[tuple[str, Any], ...] = ()
    split: Any = None
    version: str | None = None
    file_size: int | None = None

    def whole_size(self) -> int | None:
        """Bytes of the whole file."""
        return self.file_size if self.split is not None else self.size


def file_error(
    exc: BaseException, where: str, attempts: int = 1, file_format: str = ""
) -> BaseException:
    """An exception of the same kind as ``exc`` whose message names the file, the format it
    was read as, and the reason."""
    reason = f"{type(exc).__name__}: {exc}"
    suffix = f" (after {attempts} attempts)" if attempts > 1 else ""
    kind = f" as {file_format}" if file_format else ""
    message = f"Failed to read {where}{kind}{suffix}: {reason}"
    try:  # exceptions whose constructor takes more than a message (json.JSONDecodeError)
        same = copy.copy(exc)
        same.args = (message,)
        if type(same) is type(exc) and str(same) == message:
            return same
    except Exception:
        pass
    for cls in type(exc).__mro__:
        if not issubclass(cls, Exception):
            break
        try:  # a class may take other arguments, or fail to format itself (str raises)
            new = cls(message)
            if str(new) == message:
                return new
        except Exception:
            continue
    return RuntimeError(message)


def _format_name(datasource: Any) -> str:
    try:
        return str(datasource.get_name())
    except Exception:
        return ""


def coalesce(tables: Iterator[Block], min_bytes: int) -> Iterator[Block]:
    """Join consecutive small tables of one schema until each holds at least ``min_bytes``.

    A change of schema ends the current block, so tables of different files are joined only
    when their schemas agree. Empty tables are dropped, except that a source of only empty
    tables yields its first one, so an empty file still tells its schema.
    """
    pending: list[Block] = []
    size = 0
    produced = False
    first_empty: Block | None = None
    for table in tables:
        if table.num_rows == 0:
            if first_empty is None:
                first_empty = table
            continue
        if pending and not table.schema.equals(pending[0].schema):
            produced = True
            yield _concat(pending)
            pending, size = [], 0
        pending.append(table)
        size += table.nbytes
        if size >= min_bytes:
            produced = True
            yield _concat(pending)
            pending, size = [], 0
    if pending:
        yield _concat(pending)
    elif not produced and first_empty is not None:
        yield first_empty


def _concat(tables: list[Block]) -> Block:
    return tables[0] if len(tables) == 1 else concat_blocks(tables)


class FileReadTask:
    """The picklable body of one file read task: reads ``units`` in order.

    Args:
        datasource: The FileBasedDatasource (pickled without its cached listing).
        units: The files or splits to read.
        retry: Retry policy for transient faults.
        min_block_bytes: Small blocks are joined up to this size.
    """

    def __init__(
        self, datasource: Any, units: Sequence[FileUnit], retry: RetryConfig, min_block_bytes: int
    ):
        self.datasource = datasource
        self.units = list(units)
        self.retry = retry
        self.min_block_bytes = min_block_bytes

    def __call__(self) -> Iterator[Block]:
        blocks = (block for unit in self.units for block in self._read_unit(unit))
        yield from coalesce(blocks, self.min_block_bytes)

    # -- resumable writes (see shardflow.sdk.input_identity) -------------------------------

    def _item(self, unit: FileUnit) -> InputItem:
        return InputItem(self.datasource._display(unit.path), unit.whole_size(), unit.version)

    def input_pieces(self) -> list[InputPiece]:
        """What this task reads, by identity: each file with the byte ranges of its split."""
        return [InputPiece(self._item(unit), as_ranges(unit.split)) for unit in self.units]

    def remaining(self, done: DoneInputs) -> FileReadTask | None:
        """This task less what ``done`` records: None when nothing is left, else a task
        reading only the files, and the parts of files, that no finished task wrote."""
        kept: list[FileUnit] = []
        for unit in self.units:
            piece = InputPiece(self._item(unit), as_ranges(unit.split))
            left = done.remaining(piece)
            if left is None:
                continue
            if left == piece.positions():
                kept.append(unit)
                continue
            if not self.datasource._reads_ranges():
                raise ValueError(
                    f"{piece.item.name} was written in part by an earlier run, but "
                    f"{type(self.datasource).__name__} reads whole files only."
                )
            kept.append(
                FileUnit(
                    unit.path,
                    sum(hi - lo for lo, hi in left),
                    unit.partition,
                    left,
                    unit.version,
                    unit.whole_size(),
                )
            )
        if len(kept) == len(self.units) and all(a is b for a, b in zip(kept, self.units)):
            return self
        if not kept:
            return None
        return FileReadTask(self.datasource, kept, self.retry, self.min_block_bytes)

    def _read_unit(self, unit: FileUnit) -> Iterator[Block]:
        ds = self.datasource
        where = ds._display(unit.path)
        skip_bad = ds._on_bad_file == "skip"
        emitted = 0
        attempt = 1
        while True:
            buffered: list[Block] = []
            to_skip = emitted
            try:
                for block in self._blocks(unit):
                    if to_skip:
                        if block.num_rows <= to_skip:
                            to_skip -= block.num_rows
                            continue
                        block = block.slice(to_skip)
                        to_skip = 0
                    if skip_bad:
                        buffered.append(block)
                    else:
                        emitted += block.num_rows
                        yield block
                break
            except Exception as exc:
                if isinstance(exc, _PROGRAM_ERRORS) and not isinstance(exc, pa.ArrowException):
                    raise  # a bug, not a bad file (Arrow's type errors are about the data)
                if self.retry.is_retryable(exc) and attempt < self.retry.max_attempts:
                    wait = self.retry.backoff_s(attempt)
                    logger.warning(
                        "Transient error reading %s (attempt %d of %d), retrying in %.2fs: %s: %s",
                        where,
                        attempt,
                        self.retry.max_attempts,
                        wait,
                        type(exc).__name__,
                        exc,
                    )
                    time.sleep(wait)
                    attempt += 1
                    continue
                if skip_bad and not self.retry.is_retryable(exc):
                    logger.warning(
                        "Skipping unreadable file %s: %s: %s", where, type(exc).__name__, exc
                    )
                    task_stats.record_skipped_file()
                    return
                raise_explained(exc, where, attempt)
                raise file_error(exc, where, attempt, _format_name(ds)) from exc
        for block in buffered:
            yield block

    def _blocks(self, unit: FileUnit) -> Iterator[Block]:
        ds = self.datasource
        with ds._open_file(unit.path) as f:
            blocks = (to_block(b) for b in ds._read_file(f, unit))
            for block in coalesce(blocks, self.min_block_bytes):
                yield ds._finalize_block(block, unit)
