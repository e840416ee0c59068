"""Reading files into XShards of pandas DataFrames: ``read_csv``, ``read_json``,
``read_parquet`` (Orca's ``orca.data.pandas`` readers).

Files are listed when the reader is called (a missing path fails at once); reading is lazy.
Files are spread over as many partitions as the backend has CPUs (at most one partition per
file), in order, and each partition reads its files with pandas (CSV, JSON) or pyarrow
(Parquet) and concatenates them into one DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.xshards.encoding import encode, encode_arrow_frame
from shardflow.engine.xshards.execution import TaskListSource, default_num_shards, source_dataset
from shardflow.engine.xshards.stages import KeepStage, MapShards
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import ReadTask
from shardflow.sdk.filesystems import display_path, resolve_filesystem
from shardflow.sdk.paths import expand_paths, normalize_paths_arg

PathArg = str | Sequence[str]


def read_csv(file_path: PathArg, **kwargs: Any) -> Any:
    """Read CSV files into an XShards of pandas DataFrames.

    Args:
        file_path: A file, a folder of files, a glob, a comma-separated string of paths, or
            a list of them; local, ``s3://``, ``gs://`` or any fsspec path.
        kwargs: Options of ``pandas.read_csv`` (``sep``, ``usecols``, ``dtype``, ...), applied
            to every file. ``storage_options`` (or ``filesystem``) chooses how the files are
            reached.

    Returns:
        An XShards with one DataFrame per partition.

    Examples:
        >>> import os, tempfile
        >>> import pandas as pd
        >>> from shardflow.xshards import read_csv
        >>> folder = tempfile.mkdtemp()
        >>> pd.DataFrame({"a": [1, 2]}).to_csv(os.path.join(folder, "x.csv"), index=False)
        >>> read_csv(folder).collect()[0]["a"].tolist()
        [1, 2]
    """
    return _read("csv", file_path, kwargs)


def read_json(file_path: PathArg, **kwargs: Any) -> Any:
    """Read JSON files into an XShards of pandas DataFrames.

    Args:
        file_path: A file, a folder of files, a glob, a comma-separated string of paths, or
            a list of them; local, ``s3://``, ``gs://`` or any fsspec path.
        kwargs: Options of ``pandas.read_json`` (``orient``, ``lines``, ...), applied to every
            file; ``storage_options`` (or ``filesystem``) as for :func:`read_csv`.

    Returns:
        An XShards with one DataFrame per partition.
    """
    return _read("json", file_path, kwargs)


def read_parquet(
    file_path: PathArg,
    columns: list[str] | None = None,
    schema: pa.Schema | None = None,
    **options: Any,
) -> Any:
    """Read Parquet files into an XShards of pandas DataFrames.

    Data stays in Arrow until a shard is used as a DataFrame, so ``to_dataset()`` of the
    result copies nothing.

    Args:
        file_path: A file, a folder of files, a glob, or a list of them.
        columns: Read only these columns.
        schema: A ``pyarrow.Schema`` to read the files with (Orca takes a Spark schema here).
        options: Options of ``pyarrow.parquet.read_table``; ``storage_options`` (or
            ``filesystem``) as for :func:`read_csv`.

    Returns:
        An XShards with one DataFrame per partition.
    """
    if columns is not None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise TypeError(f"columns must be a list of column names, got {columns!r}.")
        options["columns"] = list(columns)
    if schema is not None:
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}.")
        options["schema"] = schema
    return _read("parquet", file_path, options)


def _read(fmt: str, file_path: PathArg, kwargs: dict[str, Any]) -> Any:
    from shardflow.engine.xshards.shards import XShards

    if fmt != "parquet" and (kwargs.get("chunksize") or kwargs.get("iterator")):
        raise ValueError(
            f"read_{fmt}: chunksize and iterator are not supported; a shard is a whole DataFrame."
        )
    storage_options = kwargs.pop("storage_options", None)
    filesystem = kwargs.pop("filesystem", None)
    fs, files = _list_files(file_path, filesystem, storage_options, fmt)
    count = max(1, min(len(files), default_num_shards()))
    groups = [list(g) for g in np.array_split(np.array(files, dtype=object), count)]
    reader = _READERS[fmt]
    tasks = [
        ReadTask(
            _GroupRead(fmt, reader, fs, group, kwargs),
            BlockMetadata(None, None, input_files=group),
        )
        for group in groups
    ]
    name = f"Read{fmt.upper() if fmt != 'parquet' else 'Parquet'}"
    dataset = source_dataset(TaskListSource(name, tasks))._with(MapShards(KeepStage(name)))
    return XShards(dataset, len(tasks), _name=name)


def _list_files(file_path: PathArg, filesystem: Any, storage_options: Any, fmt: str) -> tuple:
    if isinstance(file_path, str) and "," in file_path:
        paths = [p.strip() for p in file_path.split(",") if p.strip()]
    else:
        paths = normalize_paths_arg(file_path)
    fs, stripped = resolve_filesystem(paths, filesystem, storage_options)
    try:
        infos = expand_paths(fs, stripped)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"read_{fmt}: {exc}") from exc
    if not infos:
        raise FileNotFoundError(f"read_{fmt}: no files found under {file_path!r}.")
    return fs, [info.path for info in infos]


class _GroupRead:
    """Reads one partition's files and joins them into one DataFrame block."""

    def __init__(
        self, fmt: str, reader: Callable, fs: Any, files: list[str], kwargs: dict[str, Any]
    ):
        self.fmt, self.reader, self.fs, self.files, self.kwargs = fmt, reader, fs, files, kwargs

    def __call__(self) -> list[pa.Table]:
        parts = []
        for path in self.files:
            try:
                parts.append(self.reader(self.fs, path, self.kwargs))
            except Exception as exc:
                raise _file_error(self.fmt, display_path(self.fs, path), exc) from exc
        if self.fmt == "parquet":
            return [encode_arrow_frame(_concat_tables(parts, self.files, self.fs))]
        return [encode([_concat_frames(parts)])]


def _file_error(fmt: str, shown: str, exc: Exception) -> Exception:
    message = f"read_{fmt}: cannot read {shown}: {type(exc).__name__}: {exc}"
    try:
        return type(exc)(message)
    except Exception:
        return OSError(message)


def _read_csv_file(fs: Any, path: str, kwargs: dict[str, Any]) -> Any:
    import pandas as pd

    f, options = _open(fs, path, kwargs)
    with f:
        return pd.read_csv(f, **options)


def _read_json_file(fs: Any, path: str, kwargs: dict[str, Any]) -> Any:
    import pandas as pd

    f, options = _open(fs, path, kwargs)
    with f:
        return pd.read_json(f, **options)


def _read_parquet_file(fs: Any, path: str, kwargs: dict[str, Any]) -> pa.Table:
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        return pq.read_table(f, **kwargs)


def _open(fs: Any, path: str, kwargs: dict[str, Any]) -> tuple:
    """The open file, decompressed by its extension unless a ``compression`` is given (then
    pandas decompresses), and the options for pandas."""
    options = dict(kwargs)
    if options.get("compression", "infer") == "infer":
        options.pop("compression", None)
        return fs.open(path, "rb", compression="infer"), options
    return fs.open(path, "rb"), options


_READERS = {"csv": _read_csv_file, "json": _read_json_file, "parquet": _read_parquet_file}


def _concat_frames(frames: list[Any]) -> Any:
    import pandas as pd

    if len(frames) == 1:
        return frames[0]
    fresh = all(
        isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.name is None
        for df in frames
    )
    return pd.concat(frames, ignore_index=fresh)


def _concat_tables(tables: list[pa.Table], files: list[str], fs: Any) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    first = tables[0].schema
    for table, path in zip(tables[1:], files[1:]):
        if not table.schema.equals(first, check_metadata=False):
            raise ValueError(
                f"read_parquet: {display_path(fs, path)} has schema {table.schema} but "
                f"{display_path(fs, files[0])} has {first}; files read into one XShards need one "
                "schema."
            )
    return pa.concat_tables(tables)
