"""Reading files into XShards of pandas DataFrames: ``read_csv``, ``read_json``,
``read_parquet`` (Orca's ``orca.data.pandas`` readers, with the defaults of Orca's default
reader: JSON Lines, ``header=None`` columns named ``"0"``, ``"1"``, ...; see reader_options).

When a reader is called, the files are listed and every one is opened and its header read
(in parallel), so a missing or unreadable file, or options that do not fit the columns, fail
at once and name the file; parsing is lazy. Empty files are skipped, as Spark skips them.
Files are spread over as many partitions as the backend has CPUs (at most one partition per
file), in order, and each partition parses its files with pandas (CSV, JSON) or pyarrow
(Parquet) and concatenates them into one DataFrame. On Spark the same partitions are Spark
tasks (engine/xshards/spark/).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.xshards.encoding import encode, encode_arrow_frame
from shardflow.engine.xshards.errors import XShardsTypeError
from shardflow.engine.xshards.execution import TaskListSource, default_num_shards, source_dataset
from shardflow.engine.xshards.reader_options import FramePlan, header_row, make_plan, split_options
from shardflow.engine.xshards.stages import KeepStage, MapShards
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import ReadTask
from shardflow.sdk.filesystems import display_path, resolve_filesystem
from shardflow.sdk.paths import expand_paths, normalize_paths_arg

PathArg = str | Sequence[str]
_PROBE_THREADS = 8


def read_csv(file_path: PathArg, **kwargs: Any) -> Any:
    """Read CSV files into an XShards of pandas DataFrames.

    Args:
        file_path: A file, a folder of files, a glob, a comma-separated string of paths, or
            a list of them; local, ``s3://``, ``gs://`` or any fsspec path.
        kwargs: Options of ``pandas.read_csv`` (``sep``, ``nrows`` and ``skiprows`` per
            file, ...), with Orca's meaning of ``header`` (``None`` names the columns
            ``"0"``, ``"1"``, ...), ``names``, ``usecols``, ``dtype``, ``squeeze`` and
            ``index_col``. ``storage_options`` (or ``filesystem``) chooses how the files are
            reached.

    Returns:
        An XShards with one DataFrame per partition.

    Raises:
        FileNotFoundError: "Path does not exist", naming the path, when nothing is there.
        XShardsError: When an option does not fit the files' columns (Orca's messages).

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

    Files are JSON Lines (one object per line) unless ``lines=False`` is given, as Orca's
    default reader reads them.

    Args:
        file_path: A file, a folder of files, a glob, a comma-separated string of paths, or
            a list of them; local, ``s3://``, ``gs://`` or any fsspec path.
        kwargs: Options of ``pandas.read_json`` (``orient``, ``lines``, ...), and Orca's
            ``names``, ``usecols``, ``dtype``, ``squeeze`` and ``index_col`` as for
            :func:`read_csv`; ``storage_options`` (or ``filesystem``) too.

    Returns:
        An XShards with one DataFrame per partition.

    Examples:
        >>> import os, tempfile
        >>> from shardflow.xshards import read_json
        >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
        >>> _ = open(path, "w").write('{"a": 1}\\n{"a": 2}\\n')
        >>> read_json(path).collect()[0]["a"].tolist()
        [1, 2]
    """
    return _read("json", file_path, kwargs)


def read_parquet(
    file_path: PathArg,
    columns: list[str] | None = None,
    schema: Any = None,
    **options: Any,
) -> Any:
    """Read Parquet files into an XShards of pandas DataFrames.

    Data stays in Arrow until a shard is used as a DataFrame, so ``to_dataset()`` of the
    result copies nothing.

    Args:
        file_path: A file, a folder of files, a glob, or a list of them.
        columns: Read only these columns.
        schema: A ``pyarrow.Schema``, or a Spark ``StructType`` (as Orca takes), to read the
            files with.
        options: Options of ``pyarrow.parquet.read_table``; ``storage_options`` (or
            ``filesystem``) as for :func:`read_csv`.

    Returns:
        An XShards with one DataFrame per partition.
    """
    if columns is not None:
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise XShardsTypeError(f"columns must be a list of column names, got {columns!r}.")
        options["columns"] = list(columns)
    if schema is not None:
        options["schema"] = _arrow_schema(schema)
    return _read("parquet", file_path, options)


def _arrow_schema(schema: Any) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema
    if type(schema).__name__ == "StructType" and type(schema).__module__.startswith("pyspark"):
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(schema)
    raise XShardsTypeError(
        f"schema must be a pyarrow.Schema or a Spark StructType, got {type(schema).__name__}."
    )


def _read(fmt: str, file_path: PathArg, kwargs: dict[str, Any]) -> Any:
    storage_options = kwargs.pop("storage_options", None)
    filesystem = kwargs.pop("filesystem", None)
    fs, files = list_files(file_path, filesystem, storage_options, fmt)
    if fmt == "parquet":
        options: dict[str, Any] = kwargs
        plan = None
    else:
        orca, options = split_options(fmt, kwargs)
        plan = _plan_from_headers(fmt, fs, files, orca, options)
    count = max(1, min(len(files), default_num_shards()))
    groups = [list(g) for g in np.array_split(np.array(files, dtype=object), count)]
    reader = GroupReader(fmt, fs, options, plan)
    from shardflow.engine.xshards.spark.session import spark_session_or_none

    if spark_session_or_none() is not None:
        from shardflow.engine.xshards.spark.shards import read_groups

        return read_groups(reader, groups)
    tasks = [
        ReadTask(_EncodedGroup(reader, group), BlockMetadata(None, None, input_files=group))
        for group in groups
    ]
    name = f"Read{fmt.upper() if fmt != 'parquet' else 'Parquet'}"
    dataset = source_dataset(TaskListSource(name, tasks))._with(MapShards(KeepStage(name)))
    from shardflow.engine.xshards.shards import XShards

    return XShards(dataset, len(tasks), _name=name)


def list_files(file_path: PathArg, filesystem: Any, storage_options: Any, fmt: str) -> tuple:
    """(filesystem, files) for ``file_path``, without empty files (unless all are empty)."""
    if isinstance(file_path, str) and "," in file_path:
        paths = [p.strip() for p in file_path.split(",") if p.strip()]
    else:
        paths = normalize_paths_arg(file_path)
    fs, stripped = resolve_filesystem(paths, filesystem, storage_options)
    try:
        infos = expand_paths(fs, stripped)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"read_{fmt}: Path does not exist: {exc}") from exc
    if not infos:
        raise FileNotFoundError(
            f"read_{fmt}: Path does not exist: no files found under {file_path!r}."
        )
    full = [info for info in infos if info.size != 0]
    return fs, [info.path for info in (full or infos)]


def _plan_from_headers(
    fmt: str, fs: Any, files: list[str], orca: dict[str, Any], options: dict[str, Any]
) -> FramePlan:
    """Open every file and read its columns; plan from the first file's, and check that the
    others have the same."""
    header = header_row(fmt, orca)
    probe = _probe_csv if fmt == "csv" else _probe_json

    def columns_of(path: str) -> list[Any]:
        try:
            return probe(fs, path, header, options)
        except Exception as exc:
            raise file_error(fmt, display_path(fs, path), exc) from exc

    with ThreadPoolExecutor(min(_PROBE_THREADS, len(files))) as pool:
        headers = list(pool.map(columns_of, files))
    first = display_path(fs, files[0])
    for path, columns in zip(files[1:], headers[1:]):
        if header is not None and list(columns) != list(headers[0]):
            raise ValueError(
                f"read_{fmt}: {display_path(fs, path)} has columns {list(columns)} but {first} "
                f"has {list(headers[0])}; files read into one XShards need the same header."
            )
    return make_plan(fmt, headers[0], orca, first)


def _probe_csv(fs: Any, path: str, header: int | None, options: dict[str, Any]) -> list[Any]:
    import pandas as pd

    probe_options = {k: v for k, v in options.items() if k != "nrows"}
    f, probe_options = _open(fs, path, probe_options)
    with f:
        return list(pd.read_csv(f, header=header, nrows=1, **probe_options).columns)


def _probe_json(fs: Any, path: str, header: int | None, options: dict[str, Any]) -> list[Any]:
    import pandas as pd

    f, probe_options = _open(fs, path, dict(options))
    with f:
        if not probe_options.get("lines"):
            return list(pd.read_json(f, **probe_options).columns)
        for line in f:
            if line.strip():
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("a JSON Lines record is not an object")
                return list(record)
    return []


class GroupReader:
    """Reads one partition's files into one DataFrame (an Arrow table for Parquet); runs
    where the partition is made, on any backend."""

    def __init__(self, fmt: str, fs: Any, options: dict[str, Any], plan: FramePlan | None):
        self.fmt, self.fs, self.options, self.plan = fmt, fs, options, plan

    def __call__(self, files: list[str]) -> Any:
        parts = []
        for path in files:
            shown = display_path(self.fs, path)
            try:
                parts.append(self._read_file(path, shown))
            except Exception as exc:
                raise file_error(self.fmt, shown, exc) from exc
        if self.fmt == "parquet":
            return _concat_tables(parts, files, self.fs)
        return _concat_frames(parts)

    def _read_file(self, path: str, shown: str) -> Any:
        import pandas as pd

        if self.fmt == "parquet":
            import pyarrow.parquet as pq

            with self.fs.open(path, "rb") as f:
                return pq.read_table(f, **self.options)
        assert self.plan is not None
        f, options = _open(self.fs, path, self.options)
        with f:
            if self.fmt == "csv":
                df = pd.read_csv(f, header=self.plan.parse_header, **options)
            else:
                df = pd.read_json(f, **options)
        return self.plan.apply(df, shown)


class _EncodedGroup:
    """A read task's function: one partition block."""

    def __init__(self, reader: GroupReader, files: list[str]):
        self.reader, self.files = reader, files

    def __call__(self) -> list[pa.Table]:
        out = self.reader(self.files)
        if isinstance(out, pa.Table):
            return [encode_arrow_frame(out)]
        return [encode([out])]


def file_error(fmt: str, shown: str, exc: Exception) -> Exception:
    """``exc`` with the reader and the file named: of the same type where it can be made
    from a message, else of its nearest base type that can (a JSONDecodeError's ValueError)."""
    message = f"read_{fmt}: cannot read {shown}: {type(exc).__name__}: {exc}"
    for cls in type(exc).__mro__:
        if not issubclass(cls, Exception):
            break
        try:
            return cls(message)
        except Exception:
            continue
    return OSError(message)


def _open(fs: Any, path: str, kwargs: dict[str, Any]) -> tuple:
    """The open file, decompressed by its extension unless a ``compression`` is given (then
    pandas decompresses), and the options for pandas."""
    options = dict(kwargs)
    if options.get("compression", "infer") == "infer":
        options.pop("compression", None)
        return fs.open(path, "rb", compression="infer"), options
    return fs.open(path, "rb"), options


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
