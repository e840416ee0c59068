"""ORC files: :func:`read_orc` and :meth:`Dataset.write_orc`.

The connector lives in :mod:`shardflow.connectors.orc`; it reads and writes through
``pyarrow.orc``, part of pyarrow, so it needs no extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common, _read
from shardflow.engine.api.file_writes import _sink_args
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.save_mode import SaveMode

if TYPE_CHECKING:  # engine.dataset mixes in ORCWriteMixin, so it is imported lazily
    from shardflow.engine.api.dataset import Dataset


def read_orc(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = ["orc"],  # noqa: B006  (Ray Data's default, unchanged)
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read ORC files into a Dataset, one row per record.

    Files are read with ``pyarrow.orc`` one stripe at a time; the column types are those
    the files declare (the first file's footer gives the schema before anything is read).
    A ``select_columns`` right after the read reads only those columns' data.

    Examples:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.orc
        >>> import shardflow as sf
        >>> path = os.path.join(tempfile.mkdtemp(), "users.orc")
        >>> pyarrow.orc.write_table(pa.table({"name": ["ada", "bo"], "age": [36, 41]}), path)
        >>> sf.read_orc(path).take_all()
        [{'name': 'ada', 'age': 36}, {'name': 'bo', 'age': 41}]

    Args:
        paths: Files, folders or globs; local, ``s3://``, ``gs://`` or ``memory://``.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred when None.
        parallelism: Requested number of read tasks; -1 chooses automatically.
        partition_filter: Keeps files by their partition values.
        partitioning: How partition values are encoded in paths (None by default, as in
            Ray Data: pass ``Partitioning("hive")`` to read ``col=value`` folders).
        include_paths: Add a ``path`` column naming each row's file.
        ignore_missing_paths: Skip missing paths instead of raising FileNotFoundError.
        shuffle: ``"files"`` or ``FileShuffleConfig(seed=...)`` to shuffle file order.
        file_extensions: Read only files with these extensions (``["orc"]``); None reads
            every file.
        override_num_blocks: Same as ``parallelism``.
        storage_options: fsspec options such as credentials or ``client_kwargs``.
        on_bad_file: ``"raise"`` or ``"skip"`` (log, skip and count unreadable files).

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: when reading, if a file is not a valid ORC file; the message names it.
    """
    from shardflow.connectors.orc import ORCDatasource

    # Ray Data's read_orc takes no arrow_open_stream_args: ORC files are opened seekable.
    datasource = ORCDatasource(paths, **_common({**locals(), "arrow_open_stream_args": None}))
    return _read(datasource, parallelism, override_num_blocks)


class ORCWriteMixin:
    """``Dataset.write_orc``."""

    if TYPE_CHECKING:  # Dataset provides it

        def write_datasink(self, datasink: Any, *, resume: bool = False) -> None: ...

    def write_orc(
        self,
        path: Any,
        *,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        arrow_orc_args_fn: Callable[[], dict[str, Any]] | None = None,
        min_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
        **arrow_orc_args: Any,
    ) -> None:
        """Write the dataset as ORC files under the folder ``path``.

        Each write task writes one file (``{write_uuid}_{task:06}.orc`` unless
        ``filename_provider`` says otherwise), streaming its blocks through
        ``pyarrow.orc.ORCWriter``. Files appear only when every task succeeded; a failed
        write leaves ``path`` as it was. An empty dataset writes nothing.

        Differences from Ray Data 2.60: ``mode`` defaults to ``"error"`` (Ray Data's
        default is ``"append"``), and writes are all-or-nothing.

        Examples:
            >>> import tempfile
            >>> import shardflow as sf
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(100).write_orc(folder, mode="overwrite")
            >>> sf.read_orc(folder).sum("id")
            4950

        Args:
            path: Destination folder (local, ``s3://``, ``gs://``, ``memory://``).
            filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``.
            try_create_dir: Create the folder when missing.
            arrow_open_stream_args: Arguments for opening each output file; not
                ``compression`` (pass it as an ORC argument: ``compression="zstd"``).
            filename_provider: A FilenameProvider choosing file names.
            arrow_orc_args_fn: Returns more ``pyarrow.orc.write_table`` arguments, called
                in each write task; they override ``arrow_orc_args``.
            min_rows_per_file: Join a write task's blocks into files of at least this many
                rows.
            mode: ``"error"`` (default), ``"overwrite"``, ``"append"`` or ``"ignore"``.
            resume: Make the write resumable (see ``Dataset.write_datasink``).
            storage_options: fsspec options such as credentials.
            arrow_orc_args: ``pyarrow.orc.write_table`` arguments (``compression``,
                ``stripe_size``, ``batch_size``, ...).

        Raises:
            ValueError: ``compression`` in ``arrow_open_stream_args``, or a dataset without
                columns.
        """
        from shardflow.connectors.orc import ORCDatasink

        sink = ORCDatasink(
            path,
            arrow_orc_args_fn=arrow_orc_args_fn,
            arrow_orc_args=arrow_orc_args,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)
