"""File reads and writes: ``read_<format>`` functions and ``Dataset.write_<format>`` methods.

The Dataset class mixes in :class:`FileWriteMixin`; file connectors live in
shardflow.connectors and are reached through the SDK's FileBasedDatasource/FileDatasink.
The ``read_<format>`` functions live in :mod:`shardflow.engine.api.file_reads` and are
re-exported here. The built-in connectors are also known by name (``"parquet"``, ``"csv"``,
...) to ``read_datasource`` and ``write_datasink``: see ``BUILTIN_CONNECTORS`` in
:mod:`shardflow.sdk.registry`, which imports them only when a name is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardflow.connectors.csv import CSVDatasink
from shardflow.connectors.images import ImageDatasink
from shardflow.connectors.json import JSONDatasink
from shardflow.connectors.numpy import NumpyDatasink
from shardflow.connectors.parquet import ParquetDatasink
from shardflow.engine.api.file_reads import (  # noqa: F401  (re-exported)
    read_binary_files,
    read_csv,
    read_images,
    read_json,
    read_numpy,
    read_parquet,
    read_text,
)
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.save_mode import SaveMode


def _retry_policy() -> Any:
    """The current DataContext's retry policy, with its ``retried_io_errors``."""
    from shardflow.engine.api.context import DataContext
    from shardflow.sdk.retry import RetryConfig

    return RetryConfig.from_data_context(DataContext.get_current())


_SINK_ARGS = (
    "partition_cols",
    "filesystem",
    "try_create_dir",
    "filename_provider",
    "min_rows_per_file",
    "storage_options",
)


def _sink_args(args: dict[str, Any]) -> dict[str, Any]:
    """The file-layer arguments every ``write_<format>`` shares, taken from its ``locals()``."""
    common = {name: args[name] for name in _SINK_ARGS if name in args}
    common["open_stream_args"] = args["arrow_open_stream_args"]
    common["mode"] = args["mode"]
    if args.get("num_rows_per_file") is not None:  # Ray Data's older name
        if common.get("min_rows_per_file") is not None:
            raise ValueError("Pass min_rows_per_file or num_rows_per_file, not both.")
        common["min_rows_per_file"] = args["num_rows_per_file"]
    common["retry"] = _retry_policy()
    return common


class FileWriteMixin:
    """``write_<format>`` methods of Dataset. Every write is all-or-nothing."""

    def write_parquet(
        self,
        path: Any,
        *,
        partition_cols: list[str] | None = None,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        arrow_parquet_args_fn: Callable[[], dict[str, Any]] | None = None,
        min_rows_per_file: int | None = None,
        max_rows_per_file: int | None = None,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        compression: str | dict[str, str] | None = "snappy",
        storage_options: dict[str, Any] | None = None,
        **arrow_parquet_args: Any,
    ) -> None:
        """Write the dataset as Parquet files under the folder ``path``.

        Files appear only when every write task succeeded; a failed write leaves ``path`` as
        it was (see :class:`~shardflow.sdk.file_datasink.FileDatasink`). Files are named
        ``{write_uuid}_{task:06}-{i}.parquet`` unless ``filename_provider`` says otherwise.
        An empty dataset writes nothing and creates no folder.

        Two deliberate differences from Ray Data: ``mode`` defaults to ``"error"`` (Ray
        Data's default is ``"append"``), and writes are all-or-nothing. Tables of flat
        columns of common types (integers, floats, dates, timestamps, strings, binary),
        written without options beyond ``compression``, ``use_dictionary`` and
        ``row_group_size``, go through shardflow's own Parquet writer (about twice as fast as
        pyarrow's, same schema and statistics); anything else through pyarrow's.

        Args:
            path: Destination folder (local, ``file://``, ``local://``, ``s3://``, ``gs://``,
                ``memory://``), as a string or ``pathlib.Path``.
            partition_cols: Write folders per distinct value of these columns: ``col=value/``
                by default, or as ``partitioning_flavor`` in ``arrow_parquet_args`` says.
            filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``.
            try_create_dir: Create the folder when missing.
            arrow_open_stream_args: Arguments for opening each output file.
            filename_provider: A FilenameProvider choosing file names.
            arrow_parquet_args_fn: Returns extra ``pyarrow.parquet.write_table`` arguments,
                called in each write task.
            min_rows_per_file: Join blocks of a write task into files of at least this many rows.
            max_rows_per_file: Split a write task's rows into files of at most this many rows.
            num_rows_per_file: Older name of ``min_rows_per_file``.
            mode: A :class:`~shardflow.SaveMode` or its name: ``"error"`` (default: raise
                ValueError when the destination already holds data), ``"overwrite"`` (replace
                its contents at commit), ``"append"`` (add files) or ``"ignore"`` (write
                nothing when it holds data).
            resume: Make the write resumable: a rerun after a failure or a killed driver
                skips the write tasks already done (see ``Dataset.write_datasink``).
            compression: Parquet compression codec, or a dict of codecs by column. With
                snappy, columns of plain numbers that snappy does not shrink by a tenth
                (random floats) are stored uncompressed.
            storage_options: fsspec options such as credentials.
            arrow_parquet_args: More ``pyarrow.parquet.write_table`` arguments
                (``row_group_size``, ...), plus ``schema`` (cast every file to it) and
                ``partitioning_flavor`` (``"hive"``, None or ``"filename"``).

        Examples:
            >>> import shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(10).write_parquet(folder, mode="overwrite")
            >>> sf.read_parquet(folder).count()
            10
        """
        sink = ParquetDatasink(
            path,
            compression=compression,
            arrow_parquet_args_fn=arrow_parquet_args_fn,
            arrow_parquet_args=arrow_parquet_args,
            max_rows_per_file=max_rows_per_file,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)

    def write_csv(
        self,
        path: str,
        *,
        partition_cols: list[str] | None = None,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        min_rows_per_file: int | None = None,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
        write_options: Any = None,
    ) -> None:
        """Write the dataset as CSV files (with a header line) under the folder ``path``.

        Args:
            write_options: A ``pyarrow.csv.WriteOptions``.
            Other arguments: as for :meth:`write_parquet`.

        Examples:
            >>> import shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(3).write_csv(folder)
            >>> sf.read_csv(folder).count()
            3
        """
        sink = CSVDatasink(
            path,
            write_options=write_options,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)

    def write_json(
        self,
        path: str,
        *,
        partition_cols: list[str] | None = None,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        pandas_json_args_fn: Callable[[], dict[str, Any]] | None = None,
        min_rows_per_file: int | None = None,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
        **pandas_json_args: Any,
    ) -> None:
        """Write the dataset as JSON Lines files under the folder ``path``.

        Args:
            pandas_json_args_fn: Returns extra ``pandas.DataFrame.to_json`` arguments.
            pandas_json_args: More ``pandas.DataFrame.to_json`` arguments.
            Other arguments: as for :meth:`write_parquet`.

        Examples:
            >>> import shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(3).write_json(folder)
            >>> sf.read_json(folder).count()
            3
        """
        sink = JSONDatasink(
            path,
            pandas_json_args_fn=pandas_json_args_fn,
            pandas_json_args=pandas_json_args,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)

    def write_numpy(
        self,
        path: str,
        *,
        column: str,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        min_rows_per_file: int | None = None,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Write one column as ``.npy`` files (one per write task) under the folder ``path``.

        Args:
            column: The column to write; its rows are stacked along the first axis.
            Other arguments: as for :meth:`write_parquet`.

        Examples:
            >>> import shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(4).write_numpy(folder, column="id")
            >>> sf.read_numpy(folder).sum("data")
            6
        """
        sink = NumpyDatasink(
            path,
            column=column,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)

    def write_images(
        self,
        path: str,
        column: str,
        file_format: str = "png",
        *,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Write one image file per row, from the arrays in ``column``, under the folder ``path``.

        Args:
            column: The column of ``(H, W)`` or ``(H, W, C)`` arrays (uint8 for most formats).
            file_format: An image format Pillow writes: ``"png"``, ``"jpeg"``, ``"bmp"``, ...
            Other arguments: as for :meth:`write_parquet`.

        Examples:
            >>> import numpy as np, shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> images = [{"image": np.zeros((4, 4, 3), np.uint8)} for _ in range(2)]
            >>> sf.from_items(images).write_images(folder, column="image")
            >>> sf.read_images(folder).count()
            2
        """
        sink = ImageDatasink(
            path,
            column=column,
            file_format=file_format,
            **_sink_args(locals()),
        )
        self.write_datasink(sink, resume=resume)
