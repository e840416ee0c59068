"""FileDatasink: all-or-nothing writes of files, the shared half of every file writer.

Write tasks write into a staging folder (see :mod:`shardflow.sdk.staging`): inside the
destination when it exists or is on an object store, beside it when a new local folder is
made. Nothing is visible until every task succeeded; then ``on_write_complete`` (on the
driver) commits (see :mod:`shardflow.sdk.file_commit`): a new local folder appears in one
rename, other commits run under a marker that lets a rerun finish them after a kill. When
any task fails, ``on_write_failed`` deletes the staging folder and the destination is left as
it was. Every write first finishes the interrupted commits of its destination and removes
the staging folders whose writers are gone.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block, block_to_rows
from shardflow.sdk.datasink import Datasink, TaskCancelled, TaskContext, WriteResult
from shardflow.sdk.file_commit import (
    Commit,
    WriteCommitError,
    finish_interrupted_commits,
    remove_abandoned,
)
from shardflow.sdk.file_writing import (
    BlockFileWriter,
    WholeFileWriter,
    make_open_file,
    no_space_error,
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
from shardflow.sdk.input_identity import InputItem
from shardflow.sdk.native_filesystems import stream_compression
from shardflow.sdk.partitioning import format_value
from shardflow.sdk.retry import RetryConfig, call_with_retry
from shardflow.sdk.save_mode import SaveMode, to_save_mode
from shardflow.sdk.staging import (
    DATA_FOLDER,
    OWNER_FILE,
    RESUMABLE_ID,
    claim,
    describe_owner,
    marker_path,
    owner_alive,
    owner_record,
    read_json,
    release,
    staging_name,
    write_json,
)
from shardflow.sdk.write_journal import ResumeState, WriteIdentity, WriteJournal

logger = logging.getLogger(__name__)

_FILE_MODES = (
    SaveMode.ERROR,
    SaveMode.CREATE,
    SaveMode.APPEND,
    SaveMode.OVERWRITE,
    SaveMode.IGNORE,
)

__all__ = [
    "BlockBasedFileDatasink",
    "DestinationExistsError",
    "FileDatasink",
    "RowBasedFileDatasink",
    "WriteCommitError",
]


class DestinationExistsError(ValueError, FileExistsError):
    """A write with ``mode="error"`` found data at its destination.

    A ``ValueError`` as in Ray Data, and a ``FileExistsError`` as the cause suggests.
    """


class FileDatasink(Datasink):
    """Base class of sinks that write files, all or nothing.

    Subclass :class:`BlockBasedFileDatasink` (one file per write task) or
    :class:`RowBasedFileDatasink` (one file per row) rather than this class.

    How the commit works, per filesystem (see :mod:`shardflow.sdk.file_commit`):

    * Local disk (plain paths, ``file://``) and ``memory://``: a new destination is staged in
      a hidden folder beside it and appears in one rename of that folder. Into an existing
      folder, each staged file is renamed into place (a rename is atomic on one disk), under
      a commit marker that shardflow's readers refuse and a rerun rolls forward; with
      ``mode="overwrite"`` the old contents are first renamed into a hidden trash folder and
      deleted only after every new file is in place; if the commit fails half-way, moved
      files go back to the staging folder and the old ones are put back.
    * S3 and GCS (and other object stores): tasks upload under a staging prefix of the
      destination; the commit writes the marker, deletes ``_SUCCESS``, copies each object
      to its final key server-side (no data passes through this machine), for
      ``mode="overwrite"`` deletes the old objects, then writes ``_SUCCESS`` and removes the
      staging prefix and the marker. Object stores have no atomic multi-object rename:
      other readers listing the destination during the commit may see old and new files side
      by side, but never a half-written file; ``_SUCCESS`` appears when every file is in
      place. A failed write leaves no new object behind.

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

    # Attributes that are state or connections rather than options: left out of the
    # fingerprint that tells whether two runs are the same write.
    _FINGERPRINT_SKIPS = frozenset(
        {
            "unresolved_path",
            "_path",
            "_fs",
            "_native",
            "_retry",
            "mode",
            "_skip_write",
            "_write_id",
            "_staging",
            "_created_root",
            "_journal",
            "_identity",
            "_listing",
            "_resume",
            "_resume_state",
            "_resumed_names",
            "already_committed",
            "_task_cancelled",
        }
    )

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
        self._write_id = ""
        self._staging = ""
        self._created_root: str | None = None
        self._journal: WriteJournal | None = None
        self._identity: WriteIdentity | None = None
        self._listing: list[InputItem] | None = None
        self._resume = False
        self._resume_state = ResumeState()
        self._resumed_names: frozenset[str] = frozenset()
        self.already_committed = False

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

    # -- what the write is (set by the engine) ------------------------------------------

    supports_resume = True

    def bind_write(
        self, identity: WriteIdentity | None, listing: list[InputItem] | None, resume: bool
    ) -> None:
        """Tell the sink what the write computes, before ``on_write_start``.

        Called by the engine on the driver. ``identity`` (None when the plan cannot be
        fingerprinted) lets a rerun of the same write recognise a commit it finishes for an
        interrupted run as its own; with ``resume=True`` the staging folder outlives failed
        runs, tasks record what they read in its journal (``listing`` holds every input),
        and a rerun skips what is recorded (see :mod:`shardflow.sdk.write_journal`).
        """
        if resume and (identity is None or listing is None):
            raise ValueError("resume=True needs the write's identity and its input listing.")
        self._identity, self._listing, self._resume = identity, listing, bool(resume)

    @property
    def write_id(self) -> str:
        """The id of this run of the write (set by ``on_write_start``; names its files)."""
        return self._write_id

    def resume_state(self) -> ResumeState:
        """What earlier runs of a resumable write finished (after ``on_write_start``)."""
        return self._resume_state

    def _command(self) -> dict[str, Any] | None:
        """What identifies this write among the commits of its destination, or None when
        no other run can be known to be the same write."""
        if self._identity is None or self._identity.inputs is None:
            return None
        return {"identity": self._identity.to_json(), "mode": self.mode.value, "dest": self.path}

    # -- driver: start ------------------------------------------------------------------

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        fs, dest = self._fs, self._path
        _quiet(lambda: fs.invalidate_cache(dest))
        if schema is not None and self.partition_cols:
            missing = [c for c in self.partition_cols if c not in schema.names]
            if missing:
                raise ValueError(
                    f"partition_cols {missing} are not columns of the dataset {schema.names}."
                )
        exists = self._exists(dest)
        if exists and not fs.isdir(dest):
            raise FileExistsError(f"Cannot write to {self.path}: it is a file, not a folder.")
        finished = finish_interrupted_commits(fs, dest, self._retry, beside=supports_rename(fs))
        command = self._command()
        if command is not None and command in finished:
            logger.info(
                "%s: finished the interrupted commit of an earlier run of this same write; "
                "nothing is left to write.",
                self.path,
            )
            self.already_committed = self._skip_write = True
            return
        if finished:
            exists = self._exists(dest)
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
        # A new local folder is staged beside the destination, to appear in one rename.
        home = dest if exists or not supports_rename(fs) else parent(dest)
        self._created_root = None if exists else self._first_missing_ancestor()
        if self._resume:
            self._staging = self._resumable_staging(home)
        else:
            self._staging = join(fs, home, staging_name(dest, self._write_id))
        self._claim_staging()
        try:
            if self._journal is not None:
                self._open_journal()
            remove_abandoned(fs, dest, keep=self._staging, beside=supports_rename(fs))
        except BaseException:
            release(self._staging)
            raise

    def _claim_staging(self) -> None:
        """Make the staging folder with this process's owner record as its first entry."""
        fs = self._fs
        if supports_rename(fs):
            fs.makedirs(join(fs, self._staging, DATA_FOLDER), exist_ok=True)
        claim(self._staging)
        owner = owner_record(fs, self._path, self._resume)
        write_json(fs, join(fs, self._staging, OWNER_FILE), owner)

    def _exists(self, path: str) -> bool:
        return bool(
            call_with_retry(
                lambda: self._fs.exists(path), description=f"check {self.path}", config=self._retry
            )
        )

    def _resumable_staging(self, home: str) -> str:
        """The resumable staging folder of the destination (found inside or beside it, else
        made in ``home``), checked against this write's plan and inputs."""
        fs, dest = self._fs, self._path
        name = staging_name(dest, RESUMABLE_ID)
        places = [dest] + ([parent(dest)] if supports_rename(fs) else [])
        found = [
            join(fs, p, name) for p in places if _quiet(lambda p=p: fs.exists(join(fs, p, name)))
        ]
        staging = found[0] if found else join(fs, home, name)
        owner = read_json(fs, join(fs, staging, OWNER_FILE))
        if found and owner_alive(owner, staging):
            raise RuntimeError(
                f"Another resumable write to {self.path} is running ({describe_owner(owner)}); "
                "wait for it to end."
            )
        self._journal = WriteJournal(fs, dest, staging)
        return staging

    def _open_journal(self) -> None:
        """Check the journal against this write (or start it) and load what is done."""
        assert self._journal is not None
        assert self._identity is not None and self._listing is not None
        if self._journal.open(self._identity, self._listing):
            self._resume_state = self._journal.state()
            self._resumed_names = frozenset(self._resume_state.staged)
            logger.info(
                "Resuming the write to %s: %d rows in %d files are staged already.",
                self.path,
                self._resume_state.rows,
                len(self._resumed_names),
            )

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
        never holds all of its blocks at once. In a resumable write, the task then records
        its files and the input pieces it read (``ctx.input_pieces``) in the journal.
        """
        if self._skip_write:
            return []
        if not self._staging:
            raise RuntimeError("FileDatasink.write called before on_write_start.")
        run = ctx.write_uuid or self._write_id
        namer = self._namer(run, ctx.task_idx)
        self._task_cancelled = ctx.cancelled
        counts = [0, 0]  # rows and bytes, for the journal of a resumable write

        def counted() -> Iterator[Block]:
            for block in blocks:
                if block.num_rows:
                    counts[0] += block.num_rows
                    counts[1] += block.nbytes
                yield block

        staged = self._write_task(counted(), namer)
        if self._journal is not None:
            if ctx.input_pieces is None:
                raise RuntimeError(
                    f"{ctx.op_name}: a resumable write task was not told what it read."
                )
            self._journal.record(run, ctx.task_idx, staged, counts[0], counts[1], ctx.input_pieces)
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
                try:
                    write_fn(f)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        raise no_space_error(exc, self._fs, target, f, None) from exc
                    raise

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
        if relative in self._resumed_names:
            raise FileExistsError(
                f"{relative} was staged by an earlier run of this resumed write to {self.path}; "
                "the filename_provider must put write_uuid in file names so that the runs of "
                "a write never give two files one name."
            )
        target = join(self._fs, self._staging, DATA_FOLDER, relative)
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
        committed = False
        try:
            if staged:  # an empty dataset writes nothing (and creates no folder, below)
                self._commit(staged)
            committed = True
        finally:
            release(self._staging)
            if not committed and self._resume:
                logger.info("The staged files of %s are kept for a rerun.", self.path)
            elif not _quiet(
                lambda: self._fs.exists(marker_path(self._fs, self._path, self._write_id))
            ):
                self._remove_staging()  # a commit that could not be undone keeps its files
                if not staged or not committed:
                    self._remove_created_dest()

    def _commit(self, staged: list[str]) -> None:
        fs, dest = self._fs, self._path
        overwrite = self.mode == SaveMode.OVERWRITE
        commit = Commit(
            fs, dest, self._staging, self._write_id, overwrite, self._command(), self._retry
        )
        if not supports_rename(fs):
            if type(self.filename_provider) is not FilenameProvider:
                self._check_clashes(staged)
            commit.copy_objects(staged, self._old_objects() if overwrite else [])
            return
        if parent(self._staging) != dest and not self._exists(dest):
            self._prune_unrecorded(staged)
            commit.rename_folder()
            return
        self._check_clashes(staged)
        old = [basename(p) for p in self._visible_entries()] if overwrite else []
        commit.move_files(staged, old)

    def _old_objects(self) -> list[str]:
        """The visible objects under the destination, relative to it (what an overwrite
        replaces on an object store)."""
        found = _quiet(lambda: self._fs.find(self._path), default=[]) or []
        prefix = self._path.rstrip("/") + "/"
        relative = [p[len(prefix) :] for p in found if p.startswith(prefix)]
        return [
            r for r in relative if not any(part.startswith((".", "_")) for part in r.split("/"))
        ]

    def _prune_unrecorded(self, staged: list[str]) -> None:
        """Remove staged files no finished task recorded (those of killed tasks of earlier
        runs) before the staged folder becomes the destination."""
        fs, data = self._fs, join(self._fs, self._staging, DATA_FOLDER)
        keep = {join(fs, data, rel) for rel in staged}
        for path in fs.find(data):
            if path.rstrip("/") not in keep:
                fs.rm(path)
        if is_local(fs):
            for root, _folders, files in os.walk(data, topdown=False):
                if root != data and not files and not os.listdir(root):
                    os.rmdir(root)

    def on_write_failed(self, error: Exception) -> None:
        release(self._staging)
        if self._resume:
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
        root = self._created_root
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

    def _check_clashes(self, staged: list[str]) -> None:
        if self.mode == SaveMode.OVERWRITE:
            return
        clashes = [rel for rel in staged if self._fs.exists(join(self._fs, self._path, rel))]
        if clashes:
            shown = ", ".join(
                display_path(self._fs, join(self._fs, self._path, p)) for p in clashes[:3]
            )
            raise FileExistsError(
                f"Files already exist at {shown}; the filename_provider must give new names, or "
                "use mode='overwrite'. Nothing was written."
            )


class BlockBasedFileDatasink(FileDatasink):
    """A file sink writing one file per write task (per group of blocks with ``min_rows_per_file``).

    Subclasses implement ``write_block_to_file(self, block, f)``, writing ``block`` into the
    open binary file ``f``. It runs in a worker and may be retried on a fresh file. A
    subclass that can write a file block by block also implements ``open_block_writer``:
    its write tasks then stream, holding one block at a time instead of a whole file's.
    """

    def write_block_to_file(self, block: Block, f: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must implement write_block_to_file(block, f)."
        )

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
                    writer = WholeFileWriter(self.write_block_to_file, stream)
            except BaseException:
                stream.close()
                raise
            target = join(self._fs, self._staging, DATA_FOLDER, relative)
            return make_open_file(relative, stream, writer, self._fs, target)

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
        return [self._write_file(relative, lambda f: self.write_block_to_file(block, f))]


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
