"""FileDatasink: all-or-nothing writes of files, the shared half of every file writer.

Write tasks write into a staging folder inside the destination,
``<path>/.shardflow-staging-<id>/``, hidden from readers by its ``.`` prefix. Nothing is
visible until every task succeeded; then ``on_write_complete`` (on the driver) moves the
staged files into place. When any task fails, ``on_write_failed`` deletes the staging folder
and the destination is left as it was.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block, block_to_rows
from shardflow.sdk.datasink import Datasink, TaskCancelled, TaskContext, WriteResult
from shardflow.sdk.file_writing import (
    BlockFileWriter,
    WholeFileWriter,
    make_open_file,
    stream_into_files,
)
from shardflow.sdk.filename_provider import FilenameProvider, TaskFileNamer
from shardflow.sdk.filesystems import (
    basename,
    display_path,
    is_local,
    join,
    parent,
    resolve_paths,
    supports_rename,
)
from shardflow.sdk.native_filesystems import stream_compression
from shardflow.sdk.partitioning import format_value
from shardflow.sdk.retry import RetryConfig, call_with_retry
from shardflow.sdk.save_mode import SaveMode, to_save_mode
from shardflow.sdk.write_journal import WriteJournal, resumable_staging_name

logger = logging.getLogger(__name__)

_FILE_MODES = (
    SaveMode.ERROR,
    SaveMode.CREATE,
    SaveMode.APPEND,
    SaveMode.OVERWRITE,
    SaveMode.IGNORE,
)
STAGING_PREFIX = ".shardflow-staging-"
_TRASH_PREFIX = ".shardflow-trash-"


class WriteCommitError(OSError):
    """Making a write visible failed; the message names the step, and whether the destination
    is back to its previous content (it is, unless restoring failed as well)."""


class DestinationExistsError(ValueError, FileExistsError):
    """A write with ``mode="error"`` found data at its destination.

    A ``ValueError`` as in Ray Data, and a ``FileExistsError`` as the cause suggests.
    """


class FileDatasink(Datasink):
    """Base class of sinks that write files, all or nothing.

    Subclass :class:`BlockBasedFileDatasink` (one file per write task) or
    :class:`RowBasedFileDatasink` (one file per row) rather than this class.

    How the commit works, per filesystem:

    * Local disk (plain paths, ``file://``) and ``memory://``: tasks write into
      ``<path>/.shardflow-staging-<id>/``; the commit renames each staged file into place
      (a rename is atomic on one disk). With ``mode="overwrite"`` the old contents are first
      renamed into a hidden trash folder and deleted only after every new file is in place;
      if the commit fails half-way, moved files are taken out and the old ones put back.
    * S3 and GCS (and other object stores): tasks upload under the staging prefix; the commit
      copies each object to its final key server-side (no data passes through this machine),
      then, for ``mode="overwrite"``, deletes the old objects, then deletes the staging prefix.
      Object stores have no atomic multi-object rename: readers listing the destination during
      the commit may see old and new files side by side, but never a half-written file, and a
      failed write leaves no new object behind.

    Args:
        path: The destination folder: a string, a ``pathlib.Path``, or a list holding one.
            ``local://`` paths are written by the driver process, as in Ray Data.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred when None.
        try_create_dir: Create the destination folder when it does not exist (local disk).
        open_stream_args: Keyword arguments for ``filesystem.open`` of each file.
        filename_provider: Names the files (see :class:`FilenameProvider`); by default
            ``[{dataset_uuid}_]{write_uuid}_{task_index:06}.{file_format}``.
        dataset_uuid: A prefix of the default file names.
        file_format: The format's file extension, e.g. ``"parquet"``; None for none.
        mode: A :class:`SaveMode` or its name. ``"error"`` (the default) raises ValueError
            when the destination already holds data, so no write mixes with earlier output
            by accident; ``"overwrite"`` replaces the destination's contents at commit;
            ``"append"`` adds files (Ray Data's default); ``"ignore"`` writes nothing when
            the destination holds data. A destination folder that exists but holds no
            visible file counts as empty.
        min_rows_per_file: Write files of at least this many rows (the last file may be
            smaller). The engine gives each write task at least this many rows (see
            ``min_rows_per_write``) and the task joins its blocks into one file.
        partition_cols: Write hive folders ``col=value/`` per distinct value of these columns
            (the columns are stored in the folder names, not in the files).
        storage_options: Options for the inferred fsspec filesystem; never shown in messages.
        retry: Retry policy for transient storage faults (a RetryConfig or the engine's
            RetryPolicy); defaults apply when None.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | list[Any],
        *,
        filesystem: Any = None,
        try_create_dir: bool = True,
        open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        dataset_uuid: str | None = None,
        file_format: str | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        min_rows_per_file: int | None = None,
        partition_cols: list[str] | None = None,
        storage_options: dict[str, Any] | None = None,
        retry: Any = None,
    ):
        path = _single_path(path)
        mode = to_save_mode(mode, _FILE_MODES)
        if min_rows_per_file is not None and (
            isinstance(min_rows_per_file, bool)
            or not isinstance(min_rows_per_file, int)
            or min_rows_per_file < 1
        ):
            raise ValueError(
                f"min_rows_per_file must be a positive int or None, got {min_rows_per_file!r}."
            )
        if partition_cols is not None:
            if isinstance(partition_cols, str):
                partition_cols = [partition_cols]
            if not partition_cols or not all(isinstance(c, str) for c in partition_cols):
                raise TypeError("partition_cols must be a non-empty list of column names.")
        if filename_provider is not None and not (
            hasattr(filename_provider, "get_filename_for_task")
            or hasattr(filename_provider, "get_filename_for_block")
        ):
            raise TypeError(
                "filename_provider must be a FilenameProvider (override get_filename_for_task); "
                f"got {type(filename_provider).__name__}."
            )
        if open_stream_args is not None and not isinstance(open_stream_args, dict):
            raise TypeError("open_stream_args must be a dict of arguments for filesystem.open.")
        self.unresolved_path = path
        resolved = resolve_paths([path], filesystem, storage_options)
        self._fs, (self._path,), self._native = resolved.fs, resolved.paths, resolved.native
        self._path = self._path.rstrip("/") or "/"
        self.try_create_dir = bool(try_create_dir)
        self._open_stream_args = dict(open_stream_args or {})
        self.dataset_uuid = dataset_uuid
        self.file_format = file_format
        self.filename_provider = filename_provider or FilenameProvider(dataset_uuid, file_format)
        self.min_rows_per_file = min_rows_per_file
        self.partition_cols = list(partition_cols) if partition_cols else None
        self.mode = mode
        self._skip_write = False
        self._retry = RetryConfig.from_policy(retry)
        self._retry_given = retry is not None
        self._write_id = ""
        self._staging = ""
        self._created_dest = False
        self._journal: WriteJournal | None = None
        self._resumed: dict[int, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(path={self.path!r}, mode={self.mode.value!r})"

    @property
    def supports_distributed_writes(self) -> bool:
        """False for ``local://`` paths: the driver's disk is written by the driver."""
        return not self.unresolved_path.lower().startswith("local://")

    @property
    def min_rows_per_write(self) -> int | None:
        """Rows each write task should get: ``min_rows_per_file``, so files reach that size."""
        return self.min_rows_per_file

    @property
    def path(self) -> str:
        """The destination, as users write it."""
        return display_path(self._fs, self._path)

    # -- driver: start ------------------------------------------------------------------

    def use_context_retry(self, config: RetryConfig) -> None:
        """Called by the engine before ``on_write_start``: the retry policy of the current
        DataContext (its ``retry`` and ``retried_io_errors``), unless one was given."""
        if not self._retry_given:
            self._retry = config

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        fs, dest = self._fs, self._path
        _quiet(lambda: fs.invalidate_cache(dest))
        if schema is not None and self.partition_cols:
            missing = [c for c in self.partition_cols if c not in schema.names]
            if missing:
                raise ValueError(
                    f"partition_cols {missing} are not columns of the dataset {schema.names}."
                )
        exists = call_with_retry(
            lambda: fs.exists(dest), description=f"check {self.path}", config=self._retry
        )
        if exists and not fs.isdir(dest):
            raise FileExistsError(f"Cannot write to {self.path}: it is a file, not a folder.")
        if exists and self.mode != SaveMode.OVERWRITE and self._visible_entries():
            if self.mode in (SaveMode.ERROR, SaveMode.CREATE):
                raise DestinationExistsError(
                    f"Path {self.path} already exists and already holds data; pass "
                    "mode='overwrite' to replace it, mode='append' to add files, or "
                    "mode='ignore' to skip the write."
                )
            if self.mode == SaveMode.IGNORE:
                logger.info("%s already holds data; mode='ignore' skips the write.", self.path)
                self._skip_write = True
                return
        if not exists and is_local(fs) and not self.try_create_dir:
            raise FileNotFoundError(
                f"{self.path} does not exist; pass try_create_dir=True to create it."
            )
        self._write_id = uuid.uuid4().hex
        self._staging = join(fs, dest, STAGING_PREFIX + self._write_id)
        self._created_dest = not exists
        self._created_root = self._first_missing_ancestor() if not exists else None
        if self._journal is not None:  # resume=True: a staging folder kept across runs
            self._staging = join(fs, dest, STAGING_PREFIX + resumable_staging_name(self._path))
        if supports_rename(fs):
            fs.makedirs(self._staging, exist_ok=True)
        if self._journal is not None:
            self._journal.staging = self._staging
            self._write_id = self._journal.start()
            self._resumed = self._journal.done_tasks()

    # -- resumable writes ---------------------------------------------------------------

    supports_resume = True

    def enable_resume(self) -> None:
        """Keep the staging folder across runs and record finished tasks (see write_journal)."""
        self._journal = WriteJournal(self._fs, "")

    @property
    def write_id(self) -> str:
        """The id of this write (the same on every resumed run)."""
        return self._write_id

    def resumed_tasks(self) -> dict[int, dict[str, Any]]:
        """Tasks a previous run already staged: {task index: {"files", "rows", "bytes"}}."""
        return dict(self._resumed)

    def _visible_entries(self) -> list[str]:
        """Top-level entries of the destination, without hidden ones (staging, ``_SUCCESS``)."""
        try:
            listing = self._fs.ls(self._path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return [
            p
            for p in listing
            if not basename(p).startswith((".", "_")) and p.rstrip("/") != self._path
        ]

    # -- worker: write ------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> list[str]:
        """Write the task's blocks under the staging folder; returns the staged relative paths.

        Blocks are written as they arrive (see :mod:`shardflow.sdk.file_writing`): a task
        never holds all of its blocks at once.
        """
        if self._skip_write:
            return []
        if not self._staging:
            raise RuntimeError("FileDatasink.write called before on_write_start.")
        namer = self._namer(ctx.write_uuid or self._write_id, ctx.task_idx)
        self._task_cancelled = ctx.cancelled
        counts = [0, 0]  # rows and bytes, for the journal of a resumable write

        def counted() -> Iterator[Block]:
            from shardflow.sdk.pandas_batches import strip_frame_dtypes

            for block in blocks:
                if block.num_rows:
                    counts[0] += block.num_rows
                    counts[1] += block.nbytes
                # Files hold Arrow's types only, not the pandas dtypes from_pandas recorded.
                yield strip_frame_dtypes(block)

        staged = self._write_task(counted(), namer)
        if self._journal is not None:
            self._journal.record(ctx.task_idx, staged, counts[0], counts[1])
        return staged

    def _write_task(self, blocks: Iterable[Block], namer: TaskFileNamer) -> list[str]:
        raise NotImplementedError

    def _namer(self, write_uuid: str, task_index: int) -> TaskFileNamer:
        return TaskFileNamer(self.filename_provider, write_uuid, task_index)

    def _split_partitions(self, block: Block) -> Iterator[tuple[str, Block]]:
        if not self.partition_cols:
            yield "", block
            return
        missing = [c for c in self.partition_cols if c not in block.column_names]
        if missing:
            raise ValueError(
                f"partition_cols {missing} are not columns of the data {block.column_names}."
            )
        import pyarrow.compute as pc

        keys = (
            block.select(self.partition_cols)
            .group_by(self.partition_cols, use_threads=False)
            .aggregate([])
        )
        data = block.drop_columns(self.partition_cols)
        for values in keys.to_pylist():
            mask = None
            for col in self.partition_cols:
                column = block.column(col)
                value = values[col]
                cond = (
                    pc.is_null(column)
                    if value is None
                    else pc.equal(column, pa.scalar(value, column.type))
                )
                cond = pc.fill_null(cond, False)
                mask = cond if mask is None else pc.and_(mask, cond)
            folder = "/".join(f"{col}={format_value(values[col])}" for col in self.partition_cols)
            yield folder, data.filter(mask)

    def _write_part(
        self, block: Block, folder: str, namer: TaskFileNamer, block_index: int
    ) -> list[str]:
        raise NotImplementedError

    def _write_file(self, relative: str, write_fn: Any) -> str:
        """Write one staged file with retries; ``write_fn(f)`` writes its content.

        Nothing is written once the task is cancelled, and the staging folder is never
        created here: after a failed write has removed it, a late task cannot bring it back.
        """
        target = self._staged_target(relative)

        def attempt() -> None:
            with self._open_output(target) as f:
                write_fn(f)

        call_with_retry(
            attempt, description=f"write {display_path(self._fs, target)}", config=self._retry
        )
        return relative

    def _open_staged(self, relative: str) -> Any:
        """Open the staged file ``relative`` for streaming writes (opening is retried; what
        is written afterwards is not: a fault in the middle of a file fails the task)."""
        target = self._staged_target(relative)
        return call_with_retry(
            lambda: self._open_output(target),
            description=f"create {display_path(self._fs, target)}",
            config=self._retry,
        )

    def _staged_target(self, relative: str) -> str:
        target = join(self._fs, self._staging, relative)
        if getattr(self, "_task_cancelled", _not_cancelled)():
            raise TaskCancelled(f"writing {self.path} was cancelled")
        if supports_rename(self._fs):
            if not self._fs.exists(self._staging):
                raise TaskCancelled(
                    f"writing {self.path} was cancelled (its staging folder is gone)"
                )
            self._fs.makedirs(parent(target), exist_ok=True)
        return target

    def _open_output(self, target: str) -> Any:
        """A binary output stream for ``target``: Arrow's own when the destination has a
        native filesystem (see :mod:`shardflow.sdk.native_filesystems`), else fsspec's."""
        native = getattr(self, "_native", None)
        if native is not None:
            ok, codec = stream_compression(target, self._open_stream_args, infer=False)
            if ok:
                fs = native.filesystem()
                return fs.open_output_stream(target, compression=codec)
        return self._fs.open(target, "wb", **self._open_stream_args)

    # -- driver: commit or abort --------------------------------------------------------

    def on_write_complete(self, write_result: WriteResult) -> None:
        if self._skip_write:
            return
        staged = [rel for returned in write_result.write_returns for rel in (returned or [])]
        try:
            if not staged:
                return  # an empty dataset writes nothing (and creates no folder, below)
            if supports_rename(self._fs):
                self._commit_by_rename(staged)
            else:
                self._commit_by_copy(staged)
        finally:
            self._remove_staging()
            if not staged:
                self._remove_created_dest()

    def on_write_failed(self, error: Exception) -> None:
        if self._journal is not None:
            logger.info(
                "The write to %s failed; its staged files are kept for a rerun with resume=True.",
                self.path,
            )
            return
        self._remove_staging()
        self._remove_created_dest()

    def _first_missing_ancestor(self) -> str | None:
        """The outermost folder this write creates (the destination or one of its parents)."""
        if not supports_rename(self._fs):
            return None
        created = self._path
        while True:
            up = parent(created)
            if not up or up == created or _quiet(lambda up=up: self._fs.exists(up), default=True):
                return created
            created = up

    def _remove_created_dest(self) -> None:
        """Remove the folders this write created, if they hold no file."""
        root = getattr(self, "_created_root", None) or (self._path if self._created_dest else None)
        if not root or not supports_rename(self._fs):
            return
        try:
            if any(self._fs.isfile(p) for p in self._fs.find(root)):
                return
            self._fs.rm(root, recursive=True)
        except (FileNotFoundError, OSError):
            pass

    def _remove_staging(self) -> None:
        if not self._staging:
            return
        try:
            call_with_retry(
                lambda: self._fs.rm(self._staging, recursive=True),
                description=f"delete {display_path(self._fs, self._staging)}",
                config=self._retry,
            )
        except FileNotFoundError:
            pass
        except Exception as exc:  # the data is safe either way; say what is left behind
            logger.warning(
                "Could not delete staging folder %s: %s", display_path(self._fs, self._staging), exc
            )

    def _targets(self, staged: list[str]) -> list[tuple[str, str]]:
        return [
            (join(self._fs, self._staging, rel), join(self._fs, self._path, rel)) for rel in staged
        ]

    def _check_clashes(self, pairs: list[tuple[str, str]]) -> None:
        if self.mode == SaveMode.OVERWRITE:
            return
        clashes = [dst for _, dst in pairs if self._fs.exists(dst)]
        if clashes:
            shown = ", ".join(display_path(self._fs, p) for p in clashes[:3])
            raise FileExistsError(
                f"Files already exist at {shown}; the filename_provider must give new names, or "
                "use mode='overwrite'. Nothing was written."
            )

    def _commit_by_rename(self, staged: list[str]) -> None:
        fs = self._fs
        pairs = self._targets(staged)
        self._check_clashes(pairs)
        trash = join(fs, self._path, _TRASH_PREFIX + self._write_id)
        trashed: list[tuple[str, str]] = []
        moved: list[str] = []
        step = "move the files it replaces aside"
        try:
            if self.mode == SaveMode.OVERWRITE:
                old = self._visible_entries()
                if old:
                    fs.makedirs(trash, exist_ok=True)
                for entry in old:
                    target = join(fs, trash, basename(entry))
                    fs.mv(entry, target, recursive=True)
                    trashed.append((entry, target))
            step = "move the new files into place"
            for src, dst in pairs:
                fs.makedirs(parent(dst), exist_ok=True)
                fs.mv(src, dst)
                moved.append(dst)
        except BaseException as exc:
            for dst in moved:
                _quiet(lambda dst=dst: fs.rm(dst))
            for entry, target in reversed(trashed):
                _quiet(lambda entry=entry, target=target: fs.mv(target, entry, recursive=True))
            _quiet(lambda: fs.rm(trash, recursive=True))
            if not isinstance(exc, Exception):
                raise
            raise WriteCommitError(
                f"Committing the write to {self.path} failed while trying to {step}: "
                f"{type(exc).__name__}: {exc}. The destination was restored to its previous content."
            ) from exc
        if trashed or fs.exists(trash):
            _quiet(lambda: fs.rm(trash, recursive=True))

    def _commit_by_copy(self, staged: list[str]) -> None:
        """Commit on an object store (no rename): back up what an overwrite replaces, copy the
        new objects into place, delete the old ones. If any step fails, the destination is
        put back to exactly its old content and the error names the step."""
        fs = self._fs
        pairs = self._targets(staged)
        if type(self.filename_provider) is not FilenameProvider:
            self._check_clashes(pairs)
        old: list[str] = []
        if self.mode == SaveMode.OVERWRITE:
            found = _quiet(lambda: fs.find(self._path), default=[]) or []
            prefix = self._path.rstrip("/") + "/"
            old = [
                p
                for p in found
                if not any(part.startswith((".", "_")) for part in p[len(prefix) :].split("/"))
            ]
        backup_root = join(fs, self._path, _TRASH_PREFIX + self._write_id)
        backups: list[tuple[str, str]] = []
        copied: list[str] = []
        step = "back up the files it replaces"
        try:
            for path in old:
                backup = join(fs, backup_root, path[len(self._path.rstrip("/")) + 1 :])
                self._retried(
                    lambda path=path, backup=backup: fs.copy(path, backup), f"back up {path}"
                )
                backups.append((path, backup))
            step = "copy the new files into place"
            for src, dst in pairs:
                self._retried(
                    lambda src=src, dst=dst: fs.copy(src, dst), f"copy to {display_path(fs, dst)}"
                )
                copied.append(dst)
            step = "delete the files it replaces"
            new = {dst for _, dst in pairs}
            stale = [p for p in old if p not in new]
            if stale:
                self._retried(lambda: fs.rm(stale), f"delete old files in {self.path}")
        except BaseException as exc:
            restored = self._roll_back_copy(copied, backups, backup_root)
            outcome = (
                "The destination was restored to its previous content."
                if restored
                else f"Restoring it failed too: its previous content is kept under "
                f"{display_path(fs, backup_root)}."
            )
            raise WriteCommitError(
                f"Committing the write to {self.path} failed while trying to {step}: "
                f"{type(exc).__name__}: {exc}. {outcome}"
            ) from exc
        if backups:
            _quiet(lambda: fs.rm(backup_root, recursive=True))
        _quiet(lambda: fs.invalidate_cache(self._path))

    def _retried(self, fn: Any, description: str) -> Any:
        return call_with_retry(fn, description=description, config=self._retry)

    def _roll_back_copy(
        self, copied: list[str], backups: list[tuple[str, str]], backup_root: str
    ) -> bool:
        """Undo a partial copy commit; True when the old content is back."""
        fs = self._fs
        originals = {path for path, _ in backups}
        try:
            added = [p for p in copied if p not in originals]
            if added:
                self._retried(lambda: fs.rm(added), f"remove new files from {self.path}")
            for path, backup in backups:
                self._retried(
                    lambda path=path, backup=backup: fs.copy(backup, path), f"restore {path}"
                )
        except Exception as exc:
            logger.error("Could not roll back the failed commit to %s: %s", self.path, exc)
            return False
        if backups:
            _quiet(lambda: fs.rm(backup_root, recursive=True))
        _quiet(lambda: fs.invalidate_cache(self._path))
        return True


class BlockBasedFileDatasink(FileDatasink):
    """A file sink writing one file per write task (per group of blocks with ``min_rows_per_file``).

    Subclasses implement ``write_block_to_file(self, block, f)``, writing ``block`` into the
    open binary file ``f``; ``block`` is a :class:`~shardflow.sdk.block_accessor.BlockAccessor`
    as in Ray Data (``block.to_arrow()`` gives the ``pyarrow.Table``), so sinks written for
    Ray Data run unchanged. It runs in a worker and may be retried on a fresh file. A
    subclass that can write a file block by block also implements ``open_block_writer``:
    its write tasks then stream, holding one block (a ``pyarrow.Table``) at a time instead
    of a whole file's.
    """

    def write_block_to_file(self, block: Any, f: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement write_block_to_file(block, f)."
        )

    def _write_table_to_file(self, block: Block, f: Any) -> None:
        from shardflow.sdk.block_accessor import BlockAccessor

        self.write_block_to_file(BlockAccessor.for_block(block), f)

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter | None:
        """A :class:`~shardflow.sdk.file_writing.BlockFileWriter` for a new file ``f`` whose
        first block is ``block`` (not yet written), or None (the default) to gather each
        file's blocks and write them with one ``write_block_to_file`` call."""
        return None

    def _prepare_block(self, block: Block) -> Block:
        """A block's part as it goes into a file, after partition columns were taken out (a
        subclass may cast it to a schema)."""
        return block

    def _max_rows_per_file(self) -> int | None:
        return None

    def _file_name(self, namer: TaskFileNamer, block: Block, folder: str, index: int) -> str:
        """The staged relative path of the next file of ``folder``."""
        return namer.block_file(block, index, folder)

    def _write_task(self, blocks: Iterable[Block], namer: TaskFileNamer) -> list[str]:
        def split(block: Block) -> Iterator[tuple[str, Block]]:
            for folder, part in self._split_partitions(block):
                yield folder, self._prepare_block(part)

        def open_file(folder: str, block: Block, index: int) -> Any:
            relative = self._file_name(namer, block, folder, index)
            stream = self._open_staged(relative)
            try:
                writer = self.open_block_writer(stream, block)
                if writer is None:
                    writer = WholeFileWriter(self._write_table_to_file, stream)
            except BaseException:
                stream.close()
                raise
            return make_open_file(relative, stream, writer)

        return stream_into_files(
            blocks,
            split=split,
            open_file=open_file,
            min_rows=self.min_rows_per_file,
            max_rows=self._max_rows_per_file(),
        )

    def _write_part(
        self, block: Block, folder: str, namer: TaskFileNamer, block_index: int
    ) -> list[str]:
        """Write ``block`` as one whole file (with retries)."""
        relative = namer.block_file(block, block_index, folder)
        return [self._write_file(relative, lambda f: self._write_table_to_file(block, f))]


class RowBasedFileDatasink(FileDatasink):
    """A file sink writing one file per row (images, one document per file).

    Subclasses implement ``write_row_to_file(self, row, f)``, writing ``row`` (a dict) into the
    open binary file ``f``. It runs in a worker and may be retried on a fresh file.
    """

    def write_row_to_file(self, row: dict[str, Any], f: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement write_row_to_file(row, f)."
        )

    def _write_task(self, blocks: Iterable[Block], namer: TaskFileNamer) -> list[str]:
        # Files are named by group (all of a task's rows, or groups of min_rows_per_file
        # rows) and row number within the group and folder, block by block.
        written: list[str] = []
        group = group_rows = 0
        numbers: dict[str, int] = {}
        for block in blocks:
            if block.num_rows == 0:
                continue
            for folder, part in self._split_partitions(block):
                for row in block_to_rows(part):
                    number = numbers.get(folder, 0)
                    numbers[folder] = number + 1
                    relative = namer.row_file(row, group, number, folder)
                    written.append(
                        self._write_file(
                            relative, lambda f, row=row: self.write_row_to_file(row, f)
                        )
                    )
            group_rows += block.num_rows
            if self.min_rows_per_file and group_rows >= self.min_rows_per_file:
                group, group_rows, numbers = group + 1, 0, {}
        return written


def _single_path(path: Any) -> str:
    """The one destination of a write: a string, a ``pathlib.Path``, or a list of one."""
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            raise ValueError(f"A write takes one destination folder, got {len(path)}: {path!r}.")
        path = path[0]
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise TypeError(
            f"path must be a non-empty string or pathlib.Path naming a folder, got {path!r}."
        )
    return path


def _not_cancelled() -> bool:
    return False


def _quiet(fn: Any, default: Any = None) -> Any:
    try:
        return fn()
    except Exception as exc:
        logger.debug("ignored during cleanup: %s", exc)
        return default
