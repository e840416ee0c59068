"""File reads: the ``read_<format>`` functions over the file connectors.

Each builds a FileBasedDatasource (shardflow.connectors) and lists its paths at once, so a
missing path fails at the call, then returns a lazy Dataset. ``shardflow.engine.api.file_writes``
re-exports them next to the ``write_<format>`` methods.
"""

from __future__ import annotations

from typing import Any

from shardflow.connectors.binary import BinaryDatasource
from shardflow.connectors.csv import CSVDatasource
from shardflow.connectors.images import ImageDatasource
from shardflow.connectors.json import JSONDatasource
from shardflow.connectors.numpy import NumpyDatasource
from shardflow.connectors.parquet import ParquetDatasource
from shardflow.connectors.text import TextDatasource
from shardflow.engine.api.error_boundary import drop_shardflow_frames
from shardflow.sdk.file_datasource import FileShuffleConfig
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter

PathsArg = str | list[str]
ShuffleArg = str | FileShuffleConfig | None
_HIVE = Partitioning("hive")


def _read(datasource: Any, parallelism: int, override_num_blocks: int | None) -> Any:
    from shardflow.engine.api.context import DataContext
    from shardflow.engine.api.create import read_datasource
    from shardflow.sdk.retry import RetryConfig

    retry = RetryConfig.from_data_context(DataContext.get_current())
    try:  # list now, so a missing path fails here and not at execution
        datasource._file_units(retry)
    except Exception as exc:
        drop_shardflow_frames(exc)
        raise
    return read_datasource(
        datasource, parallelism=parallelism, override_num_blocks=override_num_blocks
    )


_COMMON_ARGS = (
    "filesystem",
    "partition_filter",
    "partitioning",
    "include_paths",
    "ignore_missing_paths",
    "shuffle",
    "file_extensions",
    "storage_options",
    "on_bad_file",
)


def _common(args: dict[str, Any]) -> dict[str, Any]:
    """The file-layer arguments every ``read_<format>`` shares, taken from its ``locals()``."""
    common = {name: args[name] for name in _COMMON_ARGS}
    common["open_stream_args"] = args["arrow_open_stream_args"]
    return common


def read_parquet(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    columns: list[str] | None = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = _HIVE,
    shuffle: ShuffleArg = None,
    include_paths: bool = False,
    include_row_hash: bool = False,
    file_extensions: list[str] | None = ParquetDatasource._FILE_EXTENSIONS,
    ignore_missing_paths: bool = False,
    override_num_blocks: int | None = None,
    schema: Any = None,
    filter: Any = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
    tensor_column_schema: dict[str, tuple[Any, tuple[int, ...]]] | None = None,
    catalog: Any = None,
    **arrow_parquet_args: Any,
) -> Any:
    """Read Parquet files into a Dataset.

    Args:
        paths: A file, a folder (read recursively), a glob, or a list of them; local,
            ``file://``, ``s3://``, ``gs://`` or ``memory://``.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred when None.
        columns: Read only these columns (only their bytes are fetched).
        parallelism: Requested number of read tasks; -1 chooses automatically.
        arrow_open_stream_args: Arguments for opening each file.
        partition_filter: Keeps files by their partition values (a ``PathPartitionFilter``
            or a function of the partition dict).
        partitioning: How partition values are encoded in paths (hive by default).
        shuffle: ``"files"`` or ``FileShuffleConfig(seed=...)`` to shuffle file order.
        include_paths: Add a ``path`` column (kept when ``columns`` is given).
        include_row_hash: Add a ``row_hash`` column: a uint64 hash of each row's file and
            position in it, the same on every read of the same files. The values differ
            from Ray Data's.
        file_extensions: Read only files with these extensions.
        ignore_missing_paths: Skip missing paths instead of raising FileNotFoundError.
        override_num_blocks: Same as ``parallelism``.
        schema: Read every file with this schema (cast; missing columns become nulls).
        filter: A ``pyarrow.dataset`` expression; row groups that cannot match are skipped.
        storage_options: fsspec options such as credentials or ``client_kwargs``.
        on_bad_file: ``"raise"`` or ``"skip"`` (log, skip and count unreadable files).
        tensor_column_schema: A dict of column name to ``(numpy dtype, shape)``: those
            binary columns hold tensors as raw C-ordered bytes (``ndarray.tobytes()``) and
            are read as tensor columns.
        catalog: A :class:`~shardflow.Catalog`: ``paths`` is then a table's name, which
            the catalog resolves to a path and a filesystem (the filesystem replaces
            ``filesystem``).
        arrow_parquet_args: ``batch_size`` (rows per batch read), and ``dataset_kwargs``
            (deprecated, as in Ray Data: ``pyarrow.dataset.ParquetFileFormat`` options;
            ValueError for ``partitioning`` or ``filters`` in it).

    Returns:
        A lazy Dataset.

    Examples:
        >>> import shardflow as sf, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> sf.range(5).write_parquet(folder)
        >>> sf.read_parquet(folder, columns=["id"]).sum("id")
        10
    """
    if catalog is not None:
        from shardflow.sdk.catalog import ReaderFormat, resolve_for

        resolved = resolve_for(catalog, paths, ReaderFormat.PARQUET, "read_parquet")
        if resolved.path is None:
            raise ValueError(
                f"read_parquet: the catalog resolved {paths!r} to no path; its resolve() "
                "must set ResolvedSource.path for Parquet tables."
            )
        paths = resolved.path
        if resolved.filesystem is not None:
            filesystem = resolved.filesystem
    datasource = ParquetDatasource(
        paths,
        columns=columns,
        schema=schema,
        filter=filter,
        include_row_hash=include_row_hash,
        tensor_column_schema=tensor_column_schema,
        **arrow_parquet_args,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_csv(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = _HIVE,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = CSVDatasource._FILE_EXTENSIONS,
    override_num_blocks: int | None = None,
    schema: Any = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
    **arrow_csv_args: Any,
) -> Any:
    """Read CSV files into a Dataset, streaming each file through ``pyarrow.csv``.

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        arrow_csv_args: ``read_options``, ``parse_options`` and ``convert_options``
            (``pyarrow.csv`` classes).
        schema: Column types to parse with (passed as ``convert_options.column_types``).
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ArrowConversionError: (``shardflow.sdk.schema_conflicts``) when reading, if a
            column's inferred types conflict between files (``int64`` in one, ``string`` in
            another); the message names both files and the column. Unlike Ray Data, which
            raises it only when such blocks are combined (``take_all`` returns the mixed
            rows), shardflow raises it for any consumption. Columns missing from some files,
            or ``int64`` in one and ``double`` in another, combine as in Ray Data.

    Examples:
        >>> import shardflow as sf, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> sf.from_items([{"a": 1}, {"a": 2}]).write_csv(folder)
        >>> sf.read_csv(folder).sum("a")
        3
    """
    datasource = CSVDatasource(
        paths,
        schema=schema,
        **arrow_csv_args,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_json(
    paths: PathsArg,
    *,
    lines: bool | None = None,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = _HIVE,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = JSONDatasource._FILE_EXTENSIONS,
    override_num_blocks: int | None = None,
    schema: Any = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
    **arrow_json_args: Any,
) -> Any:
    """Read JSON Lines files, or files holding a JSON array of objects, into a Dataset.

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        lines: True for JSON Lines (one object per line), False for one JSON document per
            file (an array of objects, or one object), None to detect per file.
        arrow_json_args: ``read_options`` and ``parse_options`` (``pyarrow.json`` classes).
        schema: Column types to parse with (``parse_options.explicit_schema``).
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ArrowConversionError: (``shardflow.sdk.schema_conflicts``) when reading JSON Lines, if
            a field's inferred types conflict between files; the message names both files
            and the field (see :func:`read_csv`; Ray Data turns such fields into Python
            objects or fails when the blocks are combined).

    Examples:
        >>> import shardflow as sf, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> sf.from_items([{"a": 1}, {"a": 2}]).write_json(folder)
        >>> sf.read_json(folder).sum("a")
        3
    """
    datasource = JSONDatasource(
        paths,
        lines=lines,
        schema=schema,
        **arrow_json_args,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_text(
    paths: PathsArg,
    *,
    encoding: str = "utf-8",
    drop_empty_lines: bool = True,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Any:
    """Read text files into a Dataset with one row per line, in column ``text``.

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        encoding: The files' text encoding.
        drop_empty_lines: Leave out empty lines (True by default, as in Ray Data).
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Examples:
        >>> import shardflow as sf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "poem.txt")
        >>> _ = open(path, "w").write("roses\\n\\nviolets\\n")
        >>> sf.read_text(path).take_all()
        [{'text': 'roses'}, {'text': 'violets'}]
    """
    datasource = TextDatasource(
        paths,
        encoding=encoding,
        drop_empty_lines=drop_empty_lines,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_binary_files(
    paths: PathsArg,
    *,
    include_paths: bool = False,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Any:
    """Read whole files into a Dataset with one row per file: its content in ``bytes``.

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        include_paths: Add a ``path`` column naming each file.
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Examples:
        >>> import shardflow as sf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "blob.bin")
        >>> _ = open(path, "wb").write(b"\\x00\\x01")
        >>> sf.read_binary_files(path).take_all()
        [{'bytes': b'\\x00\\x01'}]
    """
    datasource = BinaryDatasource(
        paths,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_numpy(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = NumpyDatasource._FILE_EXTENSIONS,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
    **numpy_load_args: Any,
) -> Any:
    """Read ``.npy`` and ``.npz`` files into a Dataset.

    A ``.npy`` file's array is split along its first axis into rows of column ``data``; each
    member of a ``.npz`` archive becomes a column. Arrays of two or more dimensions become
    tensor columns. Pickled object arrays are refused (loading them could run code).

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        numpy_load_args: ``max_header_size`` (as for ``numpy.load``).
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Examples:
        >>> import numpy as np, shardflow as sf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
        >>> np.save(path, np.arange(6).reshape(3, 2))
        >>> sf.read_numpy(path).take_batch(3)["data"].shape
        (3, 2)
    """
    datasource = NumpyDatasource(
        paths,
        **numpy_load_args,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


def read_images(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_file_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    size: tuple[int, int] | None = None,
    mode: str | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = ImageDatasource._FILE_EXTENSIONS,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Any:
    """Read image files into a Dataset, one row per image in column ``image``.

    Images are decoded with Pillow in the read tasks into ``(H, W, C)`` arrays (``(H, W)``
    for one-band modes such as ``"L"``). Images of different sizes make a variable-shape
    tensor column; pass ``size`` to resize them to one shape. Pass ``mode`` when files mix
    modes (grayscale and RGB, say), so that every image has the same number of bands.

    Args:
        paths: Files, folders or globs (see :func:`read_parquet`).
        arrow_open_file_args: Arguments for opening each file.
        size: Resize every image to ``(height, width)``.
        mode: Convert every image to this Pillow mode, e.g. ``"RGB"`` or ``"L"``.
        include_paths: Add a ``path`` column naming each image's file.
        Other arguments: as for :func:`read_parquet`.

    Returns:
        A lazy Dataset.

    Examples:
        >>> import numpy as np, shardflow as sf, tempfile, os
        >>> from PIL import Image
        >>> folder = tempfile.mkdtemp()
        >>> Image.new("RGB", (8, 4)).save(os.path.join(folder, "black.png"))
        >>> sf.read_images(folder, size=(2, 3)).take(1)[0]["image"].shape
        (2, 3, 3)
    """
    datasource = ImageDatasource(
        paths,
        size=size,
        mode=mode,
        **_common({**locals(), "arrow_open_stream_args": arrow_open_file_args}),
    )
    return _read(datasource, parallelism, override_num_blocks)
