"""FileBasedDatasource: the shared half of every file reader.

A connector for a file format subclasses :class:`FileBasedDatasource` and implements one
method, ``_read_stream(f, path)``, that turns an open binary file into blocks. Everything else
is done here: path expansion (files, folders, globs, lists) with listing calls only, extension
filters, hidden files, hive partitioning and partition filters, ``include_paths``, file order
shuffling, grouping files into read tasks balanced by size, retries of transient storage
faults, bad-file handling, projection and schema conformance.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.file_reading import FileReadTask, FileUnit
from shardflow.sdk.filesystems import display_path, redact, resolve_filesystem, resolve_paths
from shardflow.sdk.input_identity import InputItem
from shardflow.sdk.native_filesystems import is_arrow_file, stream_compression
from shardflow.sdk.partitioning import (
    Partitioning,
    PathPartitionFilter,
    as_filter_fn,
    convert_value,
    partition_schema,
)
from shardflow.sdk.paths import FileInfo, expand_paths, filter_extensions, normalize_paths_arg
from shardflow.sdk.retry import RetryConfig
from shardflow.sdk.schema_conflicts import ReferenceSchema, reference_from

logger = logging.getLogger(__name__)

PATH_COLUMN = "path"
_ON_BAD_FILE = ("raise", "skip")
_DEFAULT_MIN_BLOCK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FileShuffleConfig:
    """Shuffle the order of input files, reproducibly when ``seed`` is given.

    Args:
        seed: The base seed, or None for a different order on every execution.
        reseed_after_execution: With a seed: True (the default, as in Ray Data) gives each
            execution of the dataset a different order derived from ``seed`` and the
            execution's number; False the same order every time.

    Raises:
        ValueError: if ``seed`` is neither an int nor None.

    Examples:
        >>> from shardflow.sdk.file_datasource import FileShuffleConfig
        >>> FileShuffleConfig(seed=42, reseed_after_execution=False)
        FileShuffleConfig(seed=42, reseed_after_execution=False)
    """

    seed: int | None = None
    reseed_after_execution: bool = True

    def __post_init__(self) -> None:
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError("Seed must be an integer or None.")

    def get_seed(self, execution_idx: int = 0) -> int | None:
        """The seed of the file order of execution number ``execution_idx``."""
        from shardflow.sdk.random_seeds import derived_seed

        return derived_seed(self.seed, self.reseed_after_execution, execution_idx)


_HIVE = object()  # marks the default partitioning argument
_CLASS_EXTENSIONS = object()  # marks the default file_extensions argument: the class's own


class FileBasedDatasource(Datasource):
    """Base class of datasources that read files.

    Subclass it and implement ``_read_stream``; optionally set ``_FILE_EXTENSIONS``.

    Extension points (class attributes and methods a subclass may override):

    * ``_read_stream(self, f, path) -> Iterator[Block]`` (required): read the open binary
      file ``f`` (``path`` names it, for messages) and yield blocks (pyarrow Tables, pandas
      DataFrames or dicts of arrays). Runs in a worker. Raise on bad content; the base class
      names the file in the error, or skips the file when ``on_bad_file="skip"``.
    * ``_FILE_EXTENSIONS``: the default ``file_extensions`` filter (e.g. ``["csv"]``), or None.
    * ``_ROWS_PER_FILE``: rows each file holds when known without reading (1 for one row
      per file), so ``count()`` is free.
    * ``_ENCODING_RATIO``: in-memory bytes per byte on disk, for size estimates.
    * ``_INFER_COMPRESSION``: open ``.gz``, ``.bz2``, ``.zst`` ... files decompressed.
    * ``_RANDOM_ACCESS``: the format seeks in its files (Parquet footers, zip archives), so
      they must be opened seekable.
    * ``_PROBE_BYTES`` and ``_schema_of_start(head)``: formats that infer column types from
      content (CSV, JSON) infer the first file's schema from its first ``_PROBE_BYTES``
      when a read has several files; blocks of other files whose column types conflict with
      it raise ``ArrowConversionError`` naming both files (see
      :mod:`shardflow.sdk.schema_conflicts`).

    Files are opened through Arrow's own filesystem (``pyarrow.fs``) where one stands in for
    the paths' filesystem, so ``f`` may be a ``pyarrow.NativeFile`` rather than a Python file
    object; both read like binary files. Compressed files arrive as forward-only streams
    (``f.seekable()`` is False) unless ``_RANDOM_ACCESS`` is set.
    * ``_static_schema(self)``: the schema of what ``_read_stream`` yields when known
      without reading, or None.
    * ``_schema_of_file(self, path)``: the schema a file's metadata (a Parquet footer)
      declares, read on the driver for the first file only, so that ``schema()`` and
      ``repr`` know the columns without running the read.
    * ``_split_file(self, unit, target_bytes)`` and ``_read_file(self, f, unit)``: for formats
      that can read part of a file (Parquet row groups), split large files into several
      units at planning time and read one unit.

    Args:
        paths: A file, a folder (read recursively), a glob, or a list of them. Local paths,
            ``file://``, ``s3://``, ``gs://``/``gcs://`` and ``memory://`` are understood.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred when None.
        schema: The schema of the output; columns are cast to it and missing ones filled
            with nulls.
        open_stream_args: Keyword arguments for ``filesystem.open`` (e.g.
            ``{"compression": "gzip"}``).
        partitioning: How partition values are encoded in paths; hive by default; None to
            read none.
        partition_filter: A :class:`PathPartitionFilter`, or a function of the dict of
            partition values returning True for files to read.
        include_paths: Add a ``path`` column naming each row's file.
        file_extensions: Read only files with these extensions; None reads every file; left
            out, the format's own list (``_FILE_EXTENSIONS``).
        ignore_missing_paths: Skip paths that do not exist instead of raising.
        shuffle: ``"files"`` or a :class:`FileShuffleConfig` to shuffle the order of files.
        on_bad_file: ``"raise"`` (default): an unreadable file raises an error naming it;
            ``"skip"``: it is logged, skipped, and counted in ``Dataset.stats()``.
        storage_options: Options for the inferred fsspec filesystem (credentials, endpoint);
            never shown in messages.
        file_args: Format-specific arguments, kept in ``self._file_args``.

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.sdk.file_datasource import FileBasedDatasource
        >>> class LineCount(FileBasedDatasource):
        ...     def _read_stream(self, f, path):
        ...         yield pa.table({"lines": [len(f.read().splitlines())]})
    """

    _FILE_EXTENSIONS: list[str] | None = None
    _ROWS_PER_FILE: int | None = None
    _ENCODING_RATIO: float = 1.0
    _INFER_COMPRESSION: bool = False
    _RANDOM_ACCESS: bool = False
    _PROBE_BYTES: int = 0

    def __init__(
        self,
        paths: str | list[str],
        *,
        filesystem: Any = None,
        schema: pa.Schema | None = None,
        open_stream_args: dict[str, Any] | None = None,
        partitioning: Partitioning | None = _HIVE,  # type: ignore[assignment]
        partition_filter: PathPartitionFilter | Callable[[dict[str, Any]], bool] | None = None,
        include_paths: bool = False,
        file_extensions: Any = _CLASS_EXTENSIONS,
        ignore_missing_paths: bool = False,
        shuffle: str | FileShuffleConfig | None = None,
        on_bad_file: str = "raise",
        storage_options: dict[str, Any] | None = None,
        **file_args: Any,
    ):
        path_list = normalize_paths_arg(paths)
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}.")
        if open_stream_args is not None and not isinstance(open_stream_args, dict):
            raise TypeError("open_stream_args must be a dict of arguments for filesystem.open.")
        if partitioning is _HIVE:
            partitioning = Partitioning("hive")
        if partitioning is not None and not isinstance(partitioning, Partitioning):
            raise TypeError(
                f"partitioning must be a Partitioning or None, got {type(partitioning).__name__}."
            )
        if on_bad_file not in _ON_BAD_FILE:
            raise ValueError(f"on_bad_file must be one of {_ON_BAD_FILE}, got {on_bad_file!r}.")
        if (
            shuffle is not None
            and shuffle != "files"
            and not isinstance(shuffle, FileShuffleConfig)
        ):
            raise ValueError(
                f"shuffle must be None, 'files' or a FileShuffleConfig, got {shuffle!r}."
            )
        if file_extensions is _CLASS_EXTENSIONS:
            file_extensions = self._FILE_EXTENSIONS
        if file_extensions is not None:
            if isinstance(file_extensions, str) or not all(
                isinstance(e, str) for e in file_extensions
            ):
                raise TypeError(
                    "file_extensions must be a list of strings such as ['csv', 'csv.gz']."
                )
        resolved = resolve_paths(path_list, filesystem, storage_options)
        self._fs, self._paths, self._native = resolved.fs, resolved.paths, resolved.native
        self._schema = schema
        self._open_stream_args = dict(open_stream_args or {})
        self._partitioning = partitioning
        self._partition_filter = partition_filter
        as_filter_fn(partition_filter)  # validates the type
        self._include_paths = bool(include_paths)
        # None reads every file, as in Ray Data; left out, the format's own extensions.
        self._file_extensions = list(file_extensions) if file_extensions is not None else None
        self._ignore_missing_paths = bool(ignore_missing_paths)
        self._shuffle = shuffle
        self._shuffle_executions = 0
        self._on_bad_file = on_bad_file
        self._file_args = file_args
        self._units: list[FileUnit] | None = None
        self._partition_schema: pa.Schema | None = None
        self._conflict_reference: ReferenceSchema | None = None

    # -- pickling: tasks carry their own files, not the whole listing ---------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_units"] = None
        return state

    def __repr__(self) -> str:
        shown = [self._display(p) for p in self._paths[:3]]
        more = f", ... ({len(self._paths)} paths)" if len(self._paths) > 3 else ""
        return f"{type(self).__name__}(paths={shown}{more})"

    def _display(self, path: str) -> str:
        return display_path(self._fs, path)

    def _reads_local_disk(self) -> bool:
        """Whether the files are on this machine's disk (no per-request latency: readers may
        read in small pieces)."""
        native = getattr(self, "_native", None)
        if native is not None:
            return native.kind == "local"
        from shardflow.sdk.filesystems import is_local

        return is_local(self._fs)

    # -- listing (driver) -----------------------------------------------------------------

    def _file_units(self, retry: RetryConfig | None = None) -> list[FileUnit]:
        """The files to read, expanded, filtered and with partition values (cached); the
        listing retries transient errors under ``retry`` (the defaults when None)."""
        if self._units is None:
            self._units = self._expand(retry)
        return self._units

    def _expand(self, retry: RetryConfig | None = None) -> list[FileUnit]:
        files = expand_paths(
            self._fs, self._paths, ignore_missing_paths=self._ignore_missing_paths, retry=retry
        )
        listed = len(files)
        files = filter_extensions(files, self._file_extensions)
        if listed and not files:
            raise ValueError(
                f"None of the {listed} files under {self._shown_paths()} has one of the extensions "
                f"{self._file_extensions}. Pass file_extensions=None to read them all."
            )
        if not files:
            logger.warning("No files to read under %s; the dataset is empty.", self._shown_paths())
            return []
        return self._apply_partitions(files)

    def _shown_paths(self) -> str:
        shown = ", ".join(repr(self._display(p)) for p in self._paths[:3])
        return shown + (f" and {len(self._paths) - 3} more" if len(self._paths) > 3 else "")

    def _parser(self) -> Partitioning | None:
        if self._partitioning is not None:
            return self._partitioning
        if isinstance(self._partition_filter, PathPartitionFilter):
            return self._partition_filter.partitioning
        return None

    def _raw_partition(self, parser: Partitioning, info: FileInfo) -> dict[str, str | None]:
        if parser.base_dir:
            base = resolve_filesystem([parser.base_dir], self._fs)[1][0].rstrip("/")
            relative = info.path[len(base) + 1 :] if info.path.startswith(base + "/") else info.path
        elif parser.style == "hive":
            relative = info.path
        else:
            relative = info.relative_path
        return parser.parse(relative)

    def _apply_partitions(self, files: list[FileInfo]) -> list[FileUnit]:
        parser = self._parser()
        if parser is None:
            return [FileUnit(f.path, f.size, version=f.version) for f in files]
        raw = [self._raw_partition(parser, f) for f in files]
        keep = as_filter_fn(self._partition_filter)
        if keep is not None:
            kept = [(f, r) for f, r in zip(files, raw) if keep(r, self._display(f.path))]
            files, raw = [f for f, _ in kept], [r for _, r in kept]
        if self._partitioning is None:
            return [FileUnit(f.path, f.size, version=f.version) for f in files]
        schema = partition_schema(self._partitioning, raw)
        self._partition_schema = schema
        units = []
        for info, values in zip(files, raw):
            typed = tuple(
                (
                    field.name,
                    convert_value(values.get(field.name), field.type, self._display(info.path)),
                )
                for field in schema
            )
            units.append(FileUnit(info.path, info.size, typed, version=info.version))
        return units

    # -- planning (driver) ----------------------------------------------------------------

    def estimate_inmemory_data_size(self) -> int | None:
        sizes = [u.size for u in self._file_units()]
        if any(s is None for s in sizes):
            return None
        return int(sum(sizes) * self._ENCODING_RATIO)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
    ) -> list[ReadTask]:
        units = self._units_to_read(list(self._file_units()))
        if not units:
            return []
        found = self._first_file_schema(units[0].path)
        if self._shuffle is not None:
            seed = None
            if isinstance(self._shuffle, FileShuffleConfig):
                # Read tasks are planned once per execution: count the executions.
                seed = self._shuffle.get_seed(self._shuffle_executions)
                self._shuffle_executions += 1
            random.Random(seed).shuffle(units)
        parallelism = max(1, int(parallelism))
        known = [u.size for u in units if u.size is not None]
        target = (sum(known) / parallelism) if known else 0
        if target:
            units = [piece for unit in units for piece in self._split_file(unit, int(target))]
        retry = RetryConfig.from_data_context(data_context)
        min_block_bytes = int(
            getattr(data_context, "target_min_block_size", _DEFAULT_MIN_BLOCK_BYTES)
        )
        schema = self._output_schema(found)
        self._conflict_reference = self._infer_conflict_reference(units)
        tasks = []
        for group in group_by_size(units, parallelism):
            size = sum(u.size or 0 for u in group)
            files = sorted({u.path for u in group})
            rows = None
            if self._ROWS_PER_FILE is not None and all(u.split is None for u in group):
                rows = self._ROWS_PER_FILE * len(group)
            metadata = BlockMetadata(
                num_rows=rows,
                size_bytes=int(size * self._ENCODING_RATIO),
                input_files=[self._display(p) for p in files],
            )
            tasks.append(
                ReadTask(
                    FileReadTask(self, group, retry, min_block_bytes),
                    metadata,
                    schema,
                    per_task_row_limit,
                )
            )
        slots = _task_slots(data_context)
        self._decode_threads = slots is None or len(tasks) < slots
        return tasks

    def arrow_threads_help(self) -> bool:
        """Whether Arrow's thread pool adds parallelism to this read's tasks: only when the
        read has fewer tasks than the engine has slots. Otherwise the tasks already keep
        every core busy and Arrow's threads only contend with them (paired runs without
        them: B8 0.95x the time, B11-CSV 0.96x, B7 0.96x; B4, B12 and JSON Lines unchanged)."""
        return getattr(self, "_decode_threads", True)

    def decode_threads(self, f: Any) -> bool:
        """Whether a reader of the open file ``f`` may decode on Arrow's thread pool: when
        :meth:`arrow_threads_help`, and only for a file Arrow owns (Arrow threads calling
        into a Python file object could outlive the interpreter)."""
        return is_arrow_file(f) and self.arrow_threads_help()

    def _infer_conflict_reference(self, units: list[FileUnit]) -> ReferenceSchema | None:
        """The schema inferred from the start of the first file, which every file's blocks
        are checked against (see :mod:`shardflow.sdk.schema_conflicts`); None when there is
        one file, a schema was given, or the format infers no types."""
        if not self._PROBE_BYTES or self._schema is not None:
            return None
        first = units[0].path
        if all(u.path == first for u in units):
            return None
        known = getattr(self, "_conflict_reference", None)
        if known is not None and known.path == self._display(first):
            return known
        try:
            with self._open_file(first) as f:
                head = f.read(self._PROBE_BYTES)
            inferred = self._schema_of_start(head)
        except Exception:  # the read itself reports what is wrong with the file
            return None
        return reference_from(self._display(first), inferred)

    def _schema_of_start(self, head: bytes) -> pa.Schema | None:
        """The column types that the first ``_PROBE_BYTES`` of a file (``head``) give, for
        formats that infer types from content (set ``_PROBE_BYTES`` to use it)."""
        return None

    def _units_to_read(self, units: list[FileUnit]) -> list[FileUnit]:
        """The units of this execution; subclasses may prune (e.g. by a pushed predicate)."""
        return units

    def _split_file(self, unit: FileUnit, target_bytes: int) -> list[FileUnit]:
        """Split a large file into parts read by different tasks; default: never."""
        return [unit]

    def _reads_ranges(self) -> bool:
        """Whether this format reads part of a file (it overrides ``_split_file``)."""
        return type(self)._split_file is not FileBasedDatasource._split_file

    # -- resumable writes -----------------------------------------------------------------

    def input_items(self) -> list[InputItem]:
        """Every file this read consumes, by identity (path, size, version), for resumable
        writes (see :mod:`shardflow.sdk.input_identity`). Lists the files on first use."""
        items = [InputItem(self._display(u.path), u.size, u.version) for u in self._file_units()]
        seen: set[str] = set()
        for item in items:
            if item.name in seen:
                raise ValueError(
                    f"{item.name} is named twice in the paths of this read; a resumable write "
                    "cannot tell its two readings apart. Name each file once."
                )
            seen.add(item.name)
        return items

    # Attributes that are caches or connections, not what the read produces: left out of the
    # fingerprint that tells whether a resumed write runs the same plan.
    _FINGERPRINT_SKIPS = frozenset(
        {
            "_fs",
            "_native",
            "_units",
            "_partition_schema",
            "_conflict_reference",
            "_decode_threads",
            "_reference_path",
            "_reference_schema",
        }
    )

    # -- reading (worker) -----------------------------------------------------------------

    def _open_file(self, path: str) -> Any:
        """Open ``path`` for binary reading with ``open_stream_args``.

        Through Arrow's own filesystem when there is one for the paths (a
        ``pyarrow.NativeFile``: seekable, or a decompressing stream for compressed files),
        else through fsspec. Formats that set ``_RANDOM_ACCESS`` get a seekable file on every
        filesystem (fsspec's where Arrow's only streams).
        """
        args = dict(self._open_stream_args)
        native = getattr(self, "_native", None)
        if self._is_snappy(path, args):  # Arrow cannot stream Snappy: decoded here
            from shardflow.sdk.snappy_frames import open_snappy_frames

            args.pop("compression", None)
            raw = native.open_input(path, None) if native is not None and not args else None
            return open_snappy_frames(raw or self._fs.open(path, "rb", **args), path)
        if native is not None and (native.random_access or not self._RANDOM_ACCESS):
            ok, codec = stream_compression(path, args, self._INFER_COMPRESSION)
            if ok:
                return native.open_input(path, codec)
        if self._INFER_COMPRESSION:
            args.setdefault("compression", "infer")
        return self._fs.open(path, "rb", **args)

    def _is_snappy(self, path: str, args: dict[str, Any]) -> bool:
        """Whether ``path`` is read as a Snappy-framed stream (``compression="snappy"``, or
        a ``.snappy`` name where compression is inferred, as Ray Data does)."""
        compression = args.get("compression", "infer" if self._INFER_COMPRESSION else None)
        if compression == "snappy":
            return True
        return compression == "infer" and path.lower().endswith(".snappy")

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        """Read one unit (a file or a split); by default ``_read_stream(f, unit.path)``."""
        return self._read_stream(f, self._display(unit.path))

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        """Yield the blocks of the open binary file ``f`` (named ``path``). Required."""
        raise NotImplementedError(f"{type(self).__name__} must implement _read_stream(f, path).")

    def _static_schema(self) -> pa.Schema | None:
        """Schema of what ``_read_stream`` yields when known without reading."""
        return None

    def _finalize_block(self, block: Block, unit: FileUnit) -> Block:
        """Add partition and path columns, conform to ``schema``, apply the projection."""
        reference = getattr(self, "_conflict_reference", None)
        if reference is not None:
            reference.check(block.schema, self._display(unit.path))
        n = block.num_rows
        partition_names = []
        for name, value in unit.partition:
            partition_names.append(name)
            if name not in block.column_names:
                arrow_type = (
                    self._partition_schema.field(name).type if self._partition_schema else None
                )
                block = block.append_column(
                    pa.field(name, arrow_type), pa.repeat(pa.scalar(value, arrow_type), n)
                )
        if self._schema is not None:
            block = conform_to_schema(
                block, self._schema, keep=partition_names, where=self._display(unit.path)
            )
        if self._include_paths and PATH_COLUMN not in block.column_names:
            block = block.append_column(
                PATH_COLUMN, pa.repeat(pa.scalar(self._display(unit.path)), n)
            )
        columns = self.pushdowns.columns
        if columns is not None:
            missing = [c for c in columns if c not in block.column_names]
            if missing:
                raise ValueError(
                    f"Column(s) {missing} not found in {self._display(unit.path)}; it has "
                    f"{block.column_names}."
                )
            block = block.select(list(columns)).rename_columns(list(self.pushdowns.output_names))
        return block

    def _schema_of_file(self, path: str) -> pa.Schema | None:
        """The schema of the file ``path`` from its metadata (a footer or a header), read on
        the driver without reading its data, for formats that store one; None by default.

        Runs at planning time, on the first file of the read only, and only when neither
        ``schema=`` nor ``_static_schema()`` tells the schema. The schema of the whole read
        is then this schema (with partition and path columns, after the projection), so it
        must be the schema of the blocks ``_read_stream`` yields for that file.
        """
        return None

    def _first_file_schema(self, path: str) -> pa.Schema | None:
        """``_schema_of_file`` of the read's first file, once per first file."""
        if self._schema is not None or self._static_schema() is not None:
            return None
        known = getattr(self, "_first_schema", None)
        if known is not None and known[0] == path:
            return known[1]
        try:
            schema = self._schema_of_file(path)
        except Exception:  # the read itself reports what is wrong with the file
            schema = None
        self._first_schema = (path, schema)
        return schema

    def _output_schema(self, first_file: pa.Schema | None = None) -> pa.Schema | None:
        """The schema of the read tasks' blocks when known without reading their data:
        ``schema=``, the format's static schema, or the first file's (``first_file``)."""
        base = self._schema or self._static_schema() or first_file
        if base is None:
            return None
        fields = list(base)
        names = set(base.names)
        if self._partition_schema is not None:
            fields += [f for f in self._partition_schema if f.name not in names]
        if self._include_paths and PATH_COLUMN not in names:
            fields.append(pa.field(PATH_COLUMN, pa.string()))
        schema = pa.schema(fields)
        projection = self.pushdowns.projection
        if projection is not None:
            if any(src not in schema.names for src, _ in projection):
                return None
            schema = pa.schema([schema.field(src).with_name(out) for src, out in projection])
        return schema

    # -- projection pushdown --------------------------------------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True


def conform_to_schema(
    block: Block, schema: pa.Schema, keep: Sequence[str] = (), where: str = ""
) -> Block:
    """Cast ``block`` to ``schema``: missing columns become nulls, extra ones are dropped
    (except those named in ``keep``)."""
    arrays, fields = [], []
    for field in schema:
        if field.name in block.column_names:
            column = block.column(field.name)
            if column.type != field.type:
                try:
                    column = column.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise TypeError(
                        f"Column {field.name!r} of {where} has type {column.type}, which cannot be "
                        f"read as {field.type} (from schema=): {exc}"
                    ) from None
            arrays.append(column)
        else:
            arrays.append(pa.nulls(block.num_rows, field.type))
        fields.append(field)
    for name in keep:
        if name in block.column_names and name not in schema.names:
            arrays.append(block.column(name))
            fields.append(block.schema.field(name))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def group_by_size(units: list[FileUnit], num_groups: int) -> list[list[FileUnit]]:
    """Split ``units`` into at most ``num_groups`` contiguous groups of similar total size.

    Unknown sizes count as the mean of the known ones. Never makes more groups than units.
    """
    if not units:
        return []
    n = max(1, min(num_groups, len(units)))
    known = [u.size for u in units if u.size is not None]
    mean = (sum(known) / len(known)) if known else 1.0
    sizes = [float(u.size if u.size is not None else mean) for u in units]
    if not any(sizes):
        sizes = [1.0] * len(units)
    total = sum(sizes)
    groups: list[list[FileUnit]] = []
    current: list[FileUnit] = []
    cumulative = 0.0
    for i, unit in enumerate(units):
        current.append(unit)
        cumulative += sizes[i]
        groups_left = n - len(groups) - 1
        units_left = len(units) - i - 1
        if groups_left > 0 and (
            cumulative >= total * (len(groups) + 1) / n or units_left == groups_left
        ):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


__all__ = [
    "FileBasedDatasource",
    "FileShuffleConfig",
    "FileUnit",
    "PATH_COLUMN",
    "conform_to_schema",
    "group_by_size",
    "redact",
]


def _task_slots(data_context: Any) -> int | None:
    """How many tasks the engine runs at once, as far as the read's context tells."""
    slots = getattr(data_context, "effective_num_cpus", None)
    if slots is None:
        return None
    try:
        return max(1, int(slots()))
    except (TypeError, ValueError):
        return None
