"""Reading one Parquet file, or a byte range of its row groups, for any connector.

The Parquet connector reads the files it lists through these functions; a table-format
connector (Iceberg data files) reads the files its scan plan names, choosing the columns
by their physical names and passing the rows its delete files remove. Reading goes one row
group at a time, so only the requested column chunks are fetched, row groups whose
statistics rule out the filter are skipped, and a consumer that stops early reads no more
row groups.

Examples:
    >>> import os, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> import pyarrow.compute as pc
    >>> from shardflow.connectors.parquet.reading import open_parquet_fragment, read_parquet_fragment
    >>> path = os.path.join(tempfile.mkdtemp(), "x.parquet")
    >>> pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=4)
    >>> fragment = open_parquet_fragment(path)
    >>> tables = read_parquet_fragment(fragment, filter=pc.field("x") >= 3, deleted_positions=[5])
    >>> [t.column("x").to_pylist() for t in tables]
    [[3], [4, 6, 7], [8, 9]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.parquet import dictionary_strings, page_decoding
from shardflow.sdk.block import Block
from shardflow.sdk.input_identity import as_ranges


def row_group_start(row_group: Any) -> int:
    """The byte offset where a row group's data starts (its first column chunk's first page)."""
    starts = []
    for i in range(row_group.num_columns):
        column = row_group.column(i)
        offset = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            offset = min(offset, column.dictionary_page_offset)
        starts.append(offset)
    return min(starts) if starts else 0


def row_groups_in_split(metadata: Any, split: Any) -> list[int]:
    """Indices of the row groups that start in the byte range ``split`` (all when None).

    ``split`` is ``(start, end)`` or a tuple of such ranges. Splitting a file into ranges
    ``[0, a), [a, b), ..., [z, size + 1)`` gives every row group to exactly one range,
    without reading the footer when the ranges are planned.
    """
    indices = list(range(metadata.num_row_groups))
    ranges = as_ranges(split)
    if ranges is None:
        return indices
    return [
        i
        for i in indices
        if any(lo <= row_group_start(metadata.row_group(i)) < hi for lo, hi in ranges)
    ]


class ParquetFragment:
    """One Parquet file opened for reading, from :func:`open_parquet_fragment`.

    Plain reads (no filter, no partition values, no format options, the file's own schema)
    go through ``pyarrow.parquet.ParquetFile``; anything else through a
    ``pyarrow.dataset.ParquetFileFragment``, made on first need. ``pyarrow.dataset`` imports
    pandas when first loaded (about 0.2 s), a cost a plain read never pays.

    Attributes:
        metadata: The file's ``pyarrow.parquet.FileMetaData``.
        physical_schema: The file's Arrow schema.
    """

    def __init__(
        self,
        source: Any,
        filesystem: Any = None,
        *,
        partition_expression: Any = None,
        pre_buffer: bool | None = None,
        format_kwargs: dict | None = None,
    ):
        if filesystem is None and isinstance(source, str):
            import pyarrow.fs as pafs

            filesystem = pafs.LocalFileSystem()
        self._source, self._filesystem = source, filesystem
        self._partition_expression = partition_expression
        self._pre_buffer = pre_buffer
        self._format_kwargs = dict(format_kwargs or {})
        self._file: Any = None
        self._opened: Any = None
        self._dictionary_file: tuple[tuple[str, ...], Any] | None = None
        self._fragment: Any = None
        if partition_expression is not None or self._format_kwargs:
            self.dataset_fragment()  # every read needs it: open the file once, through it

    @property
    def metadata(self) -> Any:
        if self._fragment is not None:
            return self._fragment.metadata
        return self.parquet_file().metadata

    @property
    def physical_schema(self) -> pa.Schema:
        if self._fragment is not None:
            return self._fragment.physical_schema
        return self.parquet_file().schema_arrow

    @property
    def plain(self) -> bool:
        """Whether reads without a filter may bypass ``pyarrow.dataset``."""
        return self._partition_expression is None and not self._format_kwargs

    def parquet_file(self, read_dictionary: Sequence[str] = ()) -> Any:
        """The file as a ``pyarrow.parquet.ParquetFile``, reading the columns named in
        ``read_dictionary`` as Arrow dictionaries."""
        if self._file is None:
            source = self._source
            if self._filesystem is not None and isinstance(source, str):
                source = self._filesystem.open_input_file(source)
            self._opened = source
            self._file = self._open(source)
        if not read_dictionary:
            return self._file
        key = tuple(read_dictionary)
        if self._dictionary_file is None or self._dictionary_file[0] != key:
            # The same open file and footer, another reader: read options are fixed at open.
            opened = self._open(self._opened, self._file.metadata, list(key))
            self._dictionary_file = (key, opened)
        return self._dictionary_file[1]

    @property
    def opened(self) -> Any:
        """The open file behind :meth:`parquet_file` (None before it is first called)."""
        return self._opened

    def _open(self, source: Any, metadata: Any = None, read_dictionary: Any = None) -> Any:
        import pyarrow.parquet as pq

        kwargs = {} if self._pre_buffer is None else {"pre_buffer": self._pre_buffer}
        return pq.ParquetFile(source, metadata=metadata, read_dictionary=read_dictionary, **kwargs)

    def dataset_fragment(self) -> Any:
        """The file as a ``pyarrow.dataset.ParquetFileFragment``."""
        if self._fragment is None:
            import pyarrow.dataset as pads

            format_kwargs = dict(self._format_kwargs)
            if (
                self._pre_buffer is not None
                and "default_fragment_scan_options" not in format_kwargs
            ):
                format_kwargs["default_fragment_scan_options"] = pads.ParquetFragmentScanOptions(
                    pre_buffer=self._pre_buffer
                )
            fmt = pads.ParquetFileFormat(**format_kwargs)
            kwargs: dict[str, Any] = {}
            if self._partition_expression is not None:
                kwargs["partition_expression"] = self._partition_expression
            if self._filesystem is not None:
                kwargs["filesystem"] = self._filesystem
            self._fragment = fmt.make_fragment(self._source, **kwargs)
        return self._fragment


def open_parquet_fragment(
    source: Any,
    filesystem: Any = None,
    *,
    partition_expression: Any = None,
    pre_buffer: bool | None = None,
    format_kwargs: dict | None = None,
) -> ParquetFragment:
    """A Parquet file opened for :func:`read_parquet_fragment`: an open file, or a path on
    ``filesystem``.

    Args:
        source: An open binary file, a ``pyarrow.NativeFile``, or a path.
        filesystem: A ``pyarrow.fs.FileSystem`` for a path (local disk when None and
            ``source`` is a path).
        partition_expression: Values the fragment's rows are known to have (hive folders).
        pre_buffer: Coalesce and prefetch the column chunks of a row group in one request
            (faster on object stores); pyarrow's default when None.
        format_kwargs: Arguments of ``pyarrow.dataset.ParquetFileFormat`` (read options).
    """
    return ParquetFragment(
        source,
        filesystem,
        partition_expression=partition_expression,
        pre_buffer=pre_buffer,
        format_kwargs=format_kwargs,
    )


def read_parquet_fragment(
    fragment: ParquetFragment,
    *,
    columns: Sequence[str] | None = None,
    filter: Any = None,
    schema: pa.Schema | None = None,
    split: Any = None,
    row_groups: Sequence[int] | None = None,
    batch_size: int | None = None,
    deleted_positions: Sequence[int] | None = None,
    use_threads: bool = False,
    encoded_columns: Sequence[str] = (),
) -> Iterator[Block]:
    """Yield one table per row group of ``fragment`` that may hold matching rows.

    Args:
        fragment: From :func:`open_parquet_fragment`.
        columns: Columns to read, by their names in ``schema`` (or the file); None for all.
        filter: A ``pyarrow.compute.Expression`` over those names; row groups whose
            statistics rule it out are skipped and the other rows are filtered exactly.
        schema: Read the file as this schema (a dataset's unified schema); the file's own
            schema when None.
        split: A byte range selecting row groups by where they start
            (see :func:`row_groups_in_split`).
        row_groups: Explicit row group indices (intersected with ``split``).
        batch_size: Rows per batch inside the scanner (memory bound of one read).
        deleted_positions: Row positions in the file (0-based, over all row groups) to drop
            before the filter is applied, e.g. from Iceberg position delete files.
        use_threads: Decode columns on Arrow's thread pool. Only for a fragment opened from a
            path on a pyarrow filesystem: Arrow threads reading a Python file object can
            outlive the interpreter, which aborts it.
        encoded_columns: String columns the caller takes as Arrow dictionaries: those read
            as dictionaries (see :func:`_dictionary_string_columns`) are left so, not
            expanded; any may still come plain (a filter, a schema to conform to, a
            column a writer did not dictionary-encode).

    Yields:
        Tables with the requested columns; a single empty table when no row group is read,
        so the schema is still known.
    """
    metadata = fragment.metadata
    indices = row_groups_in_split(metadata, split)
    if row_groups is not None:
        wanted = set(row_groups)
        indices = [i for i in indices if i in wanted]
    deletes = _positions(deleted_positions)
    if filter is None and _reads_plainly(fragment, columns, schema):
        tables = _plain_tables(fragment, indices, columns, use_threads, encoded_columns)
    else:
        # With deletes, rows are filtered after the deleted positions are dropped.
        row_filter = filter if deletes is None else None
        tables = _scanned_tables(
            fragment, indices, columns, filter, row_filter, schema, batch_size, use_threads
        )
    starts = _row_offsets(metadata) if deletes is not None else None
    for index, table in tables:
        if deletes is not None and index is not None:
            table = _drop_positions(table, deletes, starts[index])
            if filter is not None:
                table = table.filter(filter)
        yield table


def _reads_plainly(
    fragment: ParquetFragment, columns: Sequence[str] | None, schema: pa.Schema | None
) -> bool:
    if not fragment.plain:
        return False
    physical = fragment.physical_schema
    if schema is not None and not schema.equals(physical):
        return False
    if columns is not None:
        names = physical.names
        if len(set(columns)) != len(columns) or any(names.count(c) != 1 for c in columns):
            return False
    return True


def _plain_tables(
    fragment: ParquetFragment,
    indices: list[int],
    columns: Sequence[str] | None,
    use_threads: bool,
    encoded_columns: Sequence[str] = (),
) -> Iterator[tuple[int | None, Block]]:
    selected = None if columns is None else list(columns)
    if not indices:
        empty = fragment.physical_schema.empty_table()
        yield None, empty if selected is None else empty.select(selected)
        return
    parquet_file = fragment.parquet_file()
    expanded = _dictionary_string_columns(parquet_file, indices, selected)
    reader = fragment.parquet_file(expanded) if expanded else parquet_file
    to_expand = [name for name in expanded if name not in encoded_columns]
    schema = parquet_file.schema_arrow
    plain, dictionaries = {}, {}
    # The page decoder reads files Arrow reads by itself, one column after another: not
    # where Arrow may decode the columns in parallel.
    if not use_threads and isinstance(fragment.opened, pa.NativeFile) and page_decoding.enabled():
        plain = page_decoding.decodable_columns(parquet_file, selected)
        dictionaries = page_decoding.decodable_dictionaries(parquet_file, expanded)
    names = schema.names if selected is None else selected
    for index in indices:
        decoded = {}
        for name, leaf in [*plain.items(), *dictionaries.items()]:
            array = page_decoding.decode_column_chunk(
                fragment.opened,
                parquet_file.metadata,
                index,
                leaf,
                schema.field(name).type,
                dictionary=name in dictionaries,
            )
            if array is not None:
                decoded[name] = array
        if not decoded:
            table = reader.read_row_group(index, columns=selected, use_threads=use_threads)
        else:
            rest = [name for name in names if name not in decoded]
            table = reader.read_row_group(index, columns=rest, use_threads=use_threads)
            for i, name in enumerate(names):  # in order: each lands where it belongs
                if name in decoded:
                    field = reader.schema_arrow.field(name)  # a dictionary for those read so
                    table = table.add_column(i, field, decoded[name])
        yield index, _expand_dictionaries(table, to_expand, schema)


def _dictionary_string_columns(
    parquet_file: Any, indices: list[int], selected: Sequence[str] | None
) -> list[str]:
    """The top-level string and binary columns among ``selected`` that are dictionary-encoded
    in every row group read: read as Arrow dictionaries and expanded by
    :mod:`shardflow.connectors.parquet.dictionary_strings`, which is faster than Arrow's dense decoding."""
    if not dictionary_strings.available():
        return []
    schema = parquet_file.schema_arrow
    names = schema.names
    leaves = parquet_file.metadata.schema
    paths = {leaves.column(i).path: i for i in range(len(leaves))}
    chosen = []
    for field in schema:
        if selected is not None and field.name not in selected:
            continue
        if not dictionary_strings.expandable(field.type) or names.count(field.name) != 1:
            continue
        if "." in field.name:  # read_dictionary names column paths: "a.b" may be a's child
            continue
        column = paths.get(field.name)
        if column is not None and _dictionary_encoded(parquet_file.metadata, indices, column):
            chosen.append(field.name)
    return chosen


def _dictionary_encoded(metadata: Any, row_groups: list[int], column: int) -> bool:
    """Whether column ``column`` of a Parquet file is dictionary-encoded in all of
    ``row_groups`` (judged from ``metadata``, a ``FileMetaData``): its chunks have a
    dictionary page, and their data pages average under four bytes a value, i.e. hold
    dictionary indices, not values a writer fell back to writing plainly (reading those as a
    dictionary would hash every value)."""
    for index in row_groups:
        chunk = metadata.row_group(index).column(column)
        if not chunk.has_dictionary_page or chunk.num_values <= 0:
            return False
        dictionary_page = chunk.data_page_offset - (chunk.dictionary_page_offset or 0)
        data_bytes = chunk.total_uncompressed_size - max(dictionary_page, 0)
        if data_bytes >= 4 * chunk.num_values:
            return False
    return True


def _expand_dictionaries(table: pa.Table, names: list[str], schema: pa.Schema) -> pa.Table:
    for name in names:
        i = table.schema.get_field_index(name)
        column = table.column(i)
        if pa.types.is_dictionary(column.type):
            table = table.set_column(i, schema.field(name), dictionary_strings.dense(column))
    return table


def _scanned_tables(
    fragment: ParquetFragment,
    indices: list[int],
    columns: Sequence[str] | None,
    prune_filter: Any,
    row_filter: Any,
    schema: pa.Schema | None,
    batch_size: int | None,
    use_threads: bool,
) -> Iterator[tuple[int | None, Block]]:
    scanned = fragment.dataset_fragment()
    scan_schema = schema if schema is not None else scanned.physical_schema
    if prune_filter is not None and indices:
        subset = scanned.subset(filter=prune_filter, schema=scan_schema)
        kept = {rg.id for rg in subset.row_groups}
        indices = [i for i in indices if i in kept]
    options = {
        "schema": scan_schema,
        "columns": None if columns is None else list(columns),
        "use_threads": use_threads,
        "filter": row_filter,
    }
    if batch_size:
        options["batch_size"] = batch_size
    if not indices:
        yield None, scanned.subset(row_group_ids=[]).to_table(**options)
        return
    for index in indices:
        yield index, scanned.subset(row_group_ids=[index]).to_table(**options)


def _positions(deleted_positions: Sequence[int] | None) -> np.ndarray | None:
    if deleted_positions is None:
        return None
    positions = np.unique(np.asarray(deleted_positions, dtype=np.int64))
    return positions if positions.size else None


def _row_offsets(metadata: Any) -> list[int]:
    offsets, total = [], 0
    for i in range(metadata.num_row_groups):
        offsets.append(total)
        total += metadata.row_group(i).num_rows
    return offsets


def _drop_positions(table: pa.Table, positions: np.ndarray, start: int) -> pa.Table:
    end = start + table.num_rows
    lo, hi = np.searchsorted(positions, [start, end])
    if lo == hi:
        return table
    keep = np.ones(table.num_rows, dtype=bool)
    keep[positions[lo:hi] - start] = False
    return table.filter(pa.array(keep))


_ROWS_BATCH = 8192


def read_parquet_rows(
    fragment: ParquetFragment,
    row_group: int,
    rows: Sequence[int],
    *,
    columns: Sequence[str],
    schema: pa.Schema | None = None,
    use_threads: bool = False,
) -> Block:
    """Rows ``rows`` (ascending, numbered from the start of row group ``row_group``) of
    ``columns``, as :func:`read_parquet_fragment` reads them.

    A plain read decodes in batches and stops after the batch holding the last row wanted
    (late materialization: a few rows of each file); other reads read the row group whole.
    """
    positions = np.asarray(rows, dtype=np.int64)
    if not _reads_plainly(fragment, columns, schema):
        (table,) = read_parquet_fragment(
            fragment,
            columns=columns,
            schema=schema,
            row_groups=[row_group],
            use_threads=use_threads,
        )
        return table.take(pa.array(positions))
    parquet_file = fragment.parquet_file()
    selected = list(columns)
    expanded = _dictionary_string_columns(parquet_file, [row_group], selected)
    reader = fragment.parquet_file(expanded) if expanded else parquet_file
    last = int(positions[-1]) if len(positions) else -1
    pieces, seen = [], 0
    for batch in reader.iter_batches(
        batch_size=_ROWS_BATCH, row_groups=[row_group], columns=selected, use_threads=use_threads
    ):
        lo, hi = np.searchsorted(positions, [seen, seen + batch.num_rows])
        if hi > lo:
            pieces.append(pa.Table.from_batches([batch.take(pa.array(positions[lo:hi] - seen))]))
        seen += batch.num_rows
        if seen > last:
            break
    if not pieces:
        empty = reader.schema_arrow.empty_table().select(selected)
        return _expand_dictionaries(empty, expanded, parquet_file.schema_arrow)
    table = pa.concat_tables(pieces)
    return _expand_dictionaries(table, expanded, parquet_file.schema_arrow)
