"""Late materialization of Parquet reads: read the sort keys first, the other columns of the
winning rows only.

The engine plans ``read_parquet(...).sort(key).take(k)`` (a top-k) in two phases when
:meth:`ParquetDatasource.late_materialization` accepts it:

1. The read decodes only the key columns. Every other column of the file is present in its
   blocks as nulls of its own type (a shared, cached null array: no decoding, no copying), so
   blocks of files with different schemas unify exactly as in a plain read; two position
   columns (a hash of the file's path, the row's number in the file) name each row.
2. After the top-k keeps k rows, :class:`LateFetch` reads, from each file holding some of
   them, only the row groups holding them and only the columns still null, through the
   datasource's own reading code (schema unification, dictionary strings, retries, errors
   naming the file), and puts the values in place. The position columns are dropped.

The rows, their order and the schema are those of the plain read followed by the top-k.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.parquet.reading import (
    open_parquet_fragment,
    read_parquet_fragment,
    read_parquet_rows,
    row_groups_in_split,
)
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.file_reading import FileReadTask, FileUnit
from shardflow.sdk.retry import RetryConfig

FILE_COLUMN = "__shardflow_file"
ROW_COLUMN = "__shardflow_row"
POSITION_COLUMNS = (FILE_COLUMN, ROW_COLUMN)
_MAX_FETCH_THREADS = 16


def file_id(path: str) -> int:
    """The file identity stored in :data:`FILE_COLUMN`: 8 bytes of a digest of ``path``."""
    return int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little")


def plan_late_read(
    datasource: Any, keys: tuple[str, ...], data_context: Any, bound: Any = None
) -> Any:
    """``(narrow datasource, LateFetch)`` for a top-k on ``keys`` over ``datasource``, or
    None where late materialization might change the result or does not apply. ``bound``
    (a ``KeyBound``) lets the narrow read skip row groups (see :func:`read_keys`).

    Runs on the driver. Lists the files (on a copy: the user's dataset keeps its own
    listing), as the read would right after.
    """
    ds = datasource
    pushdowns = ds.pushdowns
    if (
        ds._late_keys is not None  # already planned so (an optimized plan optimized again)
        or ds._filter is not None
        or pushdowns.filter is not None
        or pushdowns.limit is not None
        or ds._include_paths
        or ds._include_row_hash
        or ds._tensor_column_schema
        or ds._format_kwargs
        or ds._shuffle is not None
        or ds._on_bad_file != "raise"
        or not keys
        or len(set(keys)) != len(keys)
        or any(k in POSITION_COLUMNS for k in keys)
    ):
        return None
    projection = pushdowns.projection
    if projection is not None:
        if any(src != out for src, out in projection):
            return None  # renames: keys and fetched columns would need mapping
        if not set(keys) <= {out for _, out in projection}:
            return None
    base = ds.with_pushdowns(pushdowns)
    try:
        units = base._file_units(RetryConfig.from_data_context(data_context))
    except Exception:  # the plain read reports it
        return None
    partitions = base._partition_schema
    if not units or (partitions is not None and len(partitions)) or any(u.partition for u in units):
        return None
    paths = sorted({u.path for u in units})
    ids = {file_id(p): p for p in paths}
    if len(ids) != len(paths):
        return None  # two paths share a digest: never guess which file a row came from
    base._units_to_read(list(units))  # the reference file of schema unification
    schema = base._output_schema(base._first_file_schema(units[0].path))
    if schema is None or not set(keys) <= set(schema.names):
        return None
    if any(c in schema.names for c in POSITION_COLUMNS):
        return None
    try:  # phase 1 holds every other column as nulls of its type
        for field in schema:
            pa.nulls(0, field.type)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    narrow = base.with_pushdowns(pushdowns)
    narrow._late_keys = tuple(keys)
    narrow._late_bound = bound
    fetch = LateFetch(
        base.with_pushdowns(pushdowns),
        tuple(keys),
        ids,
        RetryConfig.from_data_context(data_context),
    )
    return narrow, fetch


# -- phase 1: keys and positions --------------------------------------------------------------


_nulls: dict[pa.DataType, pa.Array] = {}
_nulls_lock = threading.Lock()


def _null_column(arrow_type: pa.DataType, length: int) -> pa.Array:
    """``length`` nulls of ``arrow_type``, sliced from one array kept per type."""
    with _nulls_lock:
        held = _nulls.get(arrow_type)
        if held is None or len(held) < length:
            held = pa.nulls(length, arrow_type)
            _nulls[arrow_type] = held
    return held.slice(0, length)


_counting: list[pa.Array] = []


def _row_numbers(first: int, n: int) -> pa.Array:
    """``first .. first + n - 1`` as int64; a slice of one array kept per process when
    ``first`` is 0 (one row group per file: no allocation)."""
    if first:
        return pa.array(np.arange(first, first + n, dtype=np.int64))
    with _nulls_lock:
        if not _counting or len(_counting[0]) < n:
            _counting[:] = [pa.array(np.arange(n, dtype=np.int64))]
        held = _counting[0]
    return held.slice(0, n)


def read_keys(ds: Any, f: Any, unit: FileUnit) -> Iterator[Block]:
    """The blocks of one unit as the plain read gives them, with only the key columns
    decoded (others null), plus the position columns. Called by ``_read_file``."""
    keys = ds._late_keys
    fragment = open_parquet_fragment(f)
    schema = ds._scan_schema(fragment.physical_schema, unit)
    names = list(schema.names)
    if ds.pushdowns.columns is not None:
        names = [c for c in ds.pushdowns.columns if c in schema.names]
    decoded = [c for c in names if c in keys]
    metadata = fragment.metadata
    starts = np.cumsum(
        [0] + [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    )
    ident = file_id(unit.path)
    threads = ds.decode_threads(f)
    bound = ds._late_bound
    leaf = _bounding_leaf(fragment, schema, keys[0], bound)
    indices = row_groups_in_split(metadata, unit.split)
    skipped = 0
    for index in indices or [None]:
        if index is not None and leaf is not None and _excluded(metadata, index, leaf, bound):
            skipped += 1
            if skipped < len(indices):
                continue
            index = None  # every row group skipped: one empty table, for the schema
        for table in read_parquet_fragment(
            fragment,
            columns=decoded,
            schema=schema,
            row_groups=[] if index is None else [index],
            batch_size=ds._batch_size,
            use_threads=threads,
        ):
            n = table.num_rows
            arrays, fields = [], []
            for name in names:
                if name in decoded:
                    arrays.append(table.column(name))
                    fields.append(table.schema.field(name))
                else:
                    field = schema.field(name)
                    arrays.append(_null_column(field.type, n))
                    fields.append(field)
            first = 0 if index is None else int(starts[index])
            arrays.append(pa.array(np.full(n, ident, dtype=np.uint64)))
            arrays.append(_row_numbers(first, n))
            fields += [pa.field(FILE_COLUMN, pa.uint64()), pa.field(ROW_COLUMN, pa.int64())]
            yield pa.Table.from_arrays(arrays, schema=pa.schema(fields, table.schema.metadata))


def _bounding_leaf(fragment: Any, schema: pa.Schema, key: str, bound: Any) -> int | None:
    """The leaf column of the first sort key, where its row group statistics may skip row
    groups: an integer column (or a float column sorted ascending, NaN coming last), read
    as the file stores it (no cast to the dataset's type could move a value onto the
    bound)."""
    if bound is None:
        return None
    physical = fragment.physical_schema
    if physical.names.count(key) != 1 or schema.field(key).type != physical.field(key).type:
        return None
    kind = physical.field(key).type
    if not (pa.types.is_integer(kind) or (pa.types.is_floating(kind) and not bound.descending)):
        return None
    leaves = fragment.metadata.schema
    found = [i for i in range(len(leaves)) if leaves.column(i).path == key]
    if len(found) != 1 or leaves.column(found[0]).max_repetition_level:
        return None
    return found[0]


def _excluded(metadata: Any, index: int, leaf: int, bound: Any) -> bool:
    """Whether row group ``index`` holds only rows whose first key comes after the k first
    rows: its statistics give a minimum and maximum and no nulls."""
    statistics = metadata.row_group(index).column(leaf).statistics
    if statistics is None or not statistics.has_min_max or statistics.null_count != 0:
        return False
    return bound.excludes(statistics.min, statistics.max)


def finalize_keys(ds: Any, block: Block, unit: FileUnit) -> Block:
    """``_finalize_block`` of the plain read on the data columns; positions kept last."""
    positions = [block.column(c) for c in POSITION_COLUMNS]
    done = FileBasedDatasource._finalize_block(ds, block.drop_columns(list(POSITION_COLUMNS)), unit)
    for name, column in zip(POSITION_COLUMNS, positions):
        done = done.append_column(name, column)
    return done


# -- phase 2: the other columns of the winning rows ------------------------------------------


class LateFetch:
    """Fills in the columns phase 1 left null, for the rows of a (small) block.

    Picklable: runs in a task after the top-k. A file that cannot be read raises an error
    naming it, as the read does (after the same retries).

    Args:
        datasource: The read's datasource (same pushdowns, reference file set).
        keys: The columns phase 1 decoded.
        paths: File identities (:func:`file_id`) to paths.
        retry: Retry policy for transient storage faults.
    """

    def __init__(
        self, datasource: Any, keys: tuple[str, ...], paths: dict[int, str], retry: RetryConfig
    ):
        self.datasource, self.keys, self.paths, self.retry = datasource, keys, paths, retry

    def __call__(self, block: Block) -> Block:
        if FILE_COLUMN not in block.column_names:
            return block
        data = [c for c in block.column_names if c not in POSITION_COLUMNS]
        wanted = [c for c in data if c not in self.keys]
        if not block.num_rows or not wanted:
            return block.select(data)
        files = block.column(FILE_COLUMN).to_numpy()
        rows = block.column(ROW_COLUMN).to_numpy()
        target = pa.schema([block.schema.field(c) for c in wanted])
        jobs = []
        for ident in np.unique(files):
            at = np.flatnonzero(files == ident)
            at = at[np.argsort(rows[at], kind="stable")]
            jobs.append((at, self.paths[int(ident)], rows[at]))
        pieces = self._read_all(jobs, wanted, target)
        order = np.concatenate([at for at, _, _ in jobs])
        fetched = pa.concat_tables(pieces).take(pa.array(np.argsort(order, kind="stable")))
        columns = [fetched.column(c) if c in wanted else block.column(c) for c in data]
        fields = [block.schema.field(c) for c in data]
        return pa.Table.from_arrays(columns, schema=pa.schema(fields, block.schema.metadata))

    def _read_all(self, jobs: list, wanted: list[str], target: pa.Schema) -> list[Block]:
        workers = min(len(jobs), os.cpu_count() or 1, _MAX_FETCH_THREADS)
        # Files in parallel; Arrow's threads only for a lone file (they would contend).
        threads = workers <= 1

        def one(job: Any) -> Block:
            _, path, rows = job
            task = _FetchRows(self.datasource, path, rows, wanted, target, self.retry, threads)
            return list(task())[0]

        if workers <= 1:
            return [one(job) for job in jobs]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(one, jobs))


class _FetchRows(FileReadTask):
    """Reads rows ``rows`` (ascending) of one file, columns ``wanted`` cast to ``target``;
    the base class retries transient faults and names the file in errors."""

    def __init__(
        self,
        ds: Any,
        path: str,
        rows: np.ndarray,
        wanted: list[str],
        target: pa.Schema,
        retry: RetryConfig,
        threads: bool,
    ):
        super().__init__(ds, [FileUnit(path, None)], retry, 0)
        self.rows, self.wanted, self.target = rows, wanted, target
        self.threads = threads

    def __call__(self) -> Iterator[Block]:
        return self._read_unit(self.units[0])

    def _blocks(self, unit: FileUnit) -> Iterator[Block]:
        ds = self.datasource
        with ds._open_file(unit.path) as f:
            fragment = open_parquet_fragment(f)
            schema = ds._scan_schema(fragment.physical_schema, unit)
            present = [c for c in self.wanted if c in schema.names]
            metadata = fragment.metadata
            sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
            starts = np.cumsum([0] + sizes)
            if len(self.rows) and self.rows[-1] >= starts[-1]:
                raise IndexError(
                    f"row {int(self.rows[-1])} is past the end of the file ({int(starts[-1])} "
                    "rows): it changed while it was read"
                )
            groups = np.searchsorted(starts, self.rows, side="right") - 1
            parts = []
            if present:
                threads = self.threads and ds.decode_threads(f)
                for index in np.unique(groups):
                    local = self.rows[groups == index] - starts[index]
                    parts.append(
                        read_parquet_rows(
                            fragment,
                            int(index),
                            local,
                            columns=present,
                            schema=schema,
                            use_threads=threads,
                        )
                    )
            found = pa.concat_tables(parts) if parts else None
        n = len(self.rows)
        columns = []
        for field in self.target:
            if found is not None and field.name in present:
                column = found.column(field.name)
                columns.append(column if column.type == field.type else column.cast(field.type))
            else:
                columns.append(pa.nulls(n, field.type))
        yield pa.Table.from_arrays(columns, schema=self.target)
