"""Parquet files of flat columns written by shardflow itself.

Arrow's Parquet writer spent about 40% of a Parquet-to-Parquet ETL's CPU time: it hashes every
value of a dictionary column through a generic hash table, updates statistics value by
value, and encodes definition levels one by one even when a column has no nulls. For tables
whose columns are all flat and of common types (integers, floats, dates, timestamps, strings,
binary), :class:`FlatParquetWriter` writes the file instead: the per-value work (dictionary
hashing, the RLE / bit-packing hybrid, plain byte strings) runs in shardflow's compiled
``_parquet_encode`` module, statistics are computed over whole columns with NumPy (for
dictionary-encoded strings, over the dictionary's entries), levels of a column without nulls
are one run, and pages are compressed with Arrow's codecs. The files are standard Parquet
(format 2.6, v1 data pages, the same schema and stored Arrow schema as Arrow writes), read
back by any Parquet reader.

:func:`handles` says whether a write qualifies; everything else (nested or other types,
field metadata, options beyond the codec and dictionary choice) goes to Arrow's writer.

Examples:
    >>> import io, pyarrow as pa, pyarrow.parquet as pq
    >>> from shardflow.connectors.parquet.flat_writer import FlatParquetWriter, handles
    >>> table = pa.table({"x": [1, 2, None], "s": ["a", "b", "a"]})
    >>> handles(table.schema, {"compression": "snappy"})
    True
    >>> f = io.BytesIO()
    >>> writer = FlatParquetWriter(f, table.schema, use_dictionary=["s"], compression="snappy")
    >>> writer.write_table(table)
    >>> writer.close()
    >>> pq.read_table(io.BytesIO(f.getvalue())).equals(table)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from shardflow import __version__
from shardflow.connectors.parquet import flat_schema as meta
from shardflow.connectors.parquet.thrift_compact import (
    BINARY,
    I32,
    I64,
    LIST,
    STRUCT,
    struct,
    varint,
)

try:
    from shardflow.connectors.parquet import _parquet_encode
except ImportError:  # built without the extension: Arrow's writer writes every file
    _parquet_encode = None  # type: ignore[assignment]

# Arrow's defaults: data pages of about 1 MiB, a dictionary of at most 1 MiB (plain-encoded)
# per column chunk, row groups of at most 1Mi rows.
PAGE_BYTES = 1024 * 1024
DICTIONARY_BYTES = 1024 * 1024
MAX_ROW_GROUP_ROWS = 1024 * 1024
# Write options the writer understands; any other makes the write go to Arrow's writer.
_OPTIONS = {"compression", "use_dictionary", "write_batch_size"}


def available() -> bool:
    """Whether the compiled encoders are installed (else Arrow's writer writes every file)."""
    return _parquet_encode is not None


def handles(schema: pa.Schema, args: dict[str, Any]) -> bool:
    """Whether :class:`FlatParquetWriter` writes tables of ``schema`` with ``args``
    (``pyarrow.parquet.ParquetWriter`` arguments, ``row_group_size`` excluded)."""
    if _parquet_encode is None or not set(args) <= _OPTIONS or len(schema) == 0:
        return False
    names = schema.names
    if len(set(names)) != len(names):
        return False
    if any(meta.column_kind(f.type) is None or f.metadata for f in schema):
        return False
    compression = args.get("compression", "snappy")
    codecs = compression.values() if isinstance(compression, dict) else [compression]
    if isinstance(compression, dict) and not set(compression) <= set(names):
        return False
    if not all(_codec_name(codec) in meta.CODECS for codec in codecs):
        return False
    use_dictionary = args.get("use_dictionary", True)
    return isinstance(use_dictionary, bool) or (
        isinstance(use_dictionary, (list, tuple))
        and all(isinstance(name, str) for name in use_dictionary)
    )


def _codec_name(codec: Any) -> str | None:
    if codec is None:
        return "none"
    return codec.lower() if isinstance(codec, str) else None


class FlatParquetWriter:
    """Writes one Parquet file of flat columns, row group by row group.

    Args:
        f: The binary output stream (anything with ``write``).
        schema: The file's Arrow schema (:func:`handles` must accept it).
        use_dictionary: True, False, or the names of the columns to dictionary-encode.
        compression: A codec name for every column, or a dict of codec names by column
            (columns left out are not compressed, as in pyarrow).
    """

    def __init__(
        self, f: Any, schema: pa.Schema, use_dictionary: Any = True, compression: Any = "snappy"
    ):
        self._f = f
        self.schema = schema
        self._kinds = [meta.column_kind(field.type) for field in schema]
        if any(kind is None for kind in self._kinds):
            raise ValueError(f"FlatParquetWriter cannot write the schema {schema}")
        chosen = set(schema.names) if use_dictionary is True else set(use_dictionary or ())
        self._dictionary = [name in chosen for name in schema.names]
        self._codecs = []
        for name in schema.names:
            # As in pyarrow, a column a dict of codecs leaves out is not compressed.
            codec = compression.get(name) if isinstance(compression, dict) else compression
            codec = _codec_name(codec) or "none"
            self._codecs.append(
                (meta.CODECS[codec], None if meta.CODECS[codec] == 0 else pa.Codec(codec))
            )
        self._row_groups: list[bytes] = []
        self._num_rows = 0
        self._position = 0
        self.is_open = True
        self._write(b"PAR1")

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        """Append ``table`` (of the writer's schema) as row groups of at most
        ``row_group_size`` rows (1Mi rows by default)."""
        if not table.schema.equals(self.schema, check_metadata=False):
            raise ValueError(
                f"Table schema does not match the file's schema.\ntable: {table.schema}\n"
                f"file: {self.schema}"
            )
        if row_group_size is not None and (
            isinstance(row_group_size, bool)
            or not isinstance(row_group_size, int)
            or row_group_size < 1
        ):
            raise ValueError(f"row_group_size must be a positive int, got {row_group_size!r}.")
        if table.num_rows == 0:  # one row group of no rows, as Arrow's writer writes
            self._write_row_group(table)
            return
        step = min(row_group_size or MAX_ROW_GROUP_ROWS, MAX_ROW_GROUP_ROWS)
        for start in range(0, table.num_rows, step):
            self._write_row_group(table.slice(start, step))

    def close(self) -> None:
        """Write the footer. The stream stays open."""
        if not self.is_open:
            return
        self.is_open = False
        footer = struct(
            [
                (1, I32, 2),
                (2, LIST, (STRUCT, meta.schema_elements(self.schema, self._kinds))),
                (3, I64, self._num_rows),
                (4, LIST, (STRUCT, self._row_groups)),
                (5, LIST, (STRUCT, meta.key_value_metadata(self.schema))),
                (6, BINARY, f"shardflow version {__version__}"),
                (7, LIST, (STRUCT, [meta.TYPE_ORDER] * len(self.schema))),
            ]
        )
        self._write(footer)
        self._write(meta.little_endian_u32(len(footer)))
        self._write(b"PAR1")

    def _write(self, data: Any) -> None:
        self._f.write(data)
        self._position += len(data) if isinstance(data, bytes) else memoryview(data).nbytes

    def _write_row_group(self, table: pa.Table) -> None:
        start = self._position
        chunks = []
        uncompressed = compressed = 0
        for index, column in enumerate(table.columns):
            chunk, sizes = self._write_column(index, column)
            chunks.append(chunk)
            uncompressed += sizes[0]
            compressed += sizes[1]
        self._row_groups.append(
            struct(
                [
                    (1, LIST, (STRUCT, chunks)),
                    (2, I64, uncompressed),
                    (3, I64, table.num_rows),
                    (5, I64, start),
                    (6, I64, compressed),  # no ordinal (7): Arrow's writer writes none
                ]
            )
        )
        self._num_rows += table.num_rows

    def _write_column(self, index: int, column: pa.ChunkedArray) -> tuple[bytes, tuple[int, int]]:
        field, kind = self.schema.field(index), self._kinds[index]
        assert kind is not None
        if column.null_count and not field.nullable:
            raise pa.ArrowInvalid(
                f"Column '{field.name}' is declared non-nullable but contains nulls"
            )
        arrays = [chunk for chunk in column.chunks if len(chunk)]
        if column.type != kind.stored:
            same_width = column.type.bit_width == kind.stored.bit_width
            arrays = [a.view(kind.stored) if same_width else a.cast(kind.stored) for a in arrays]
        return _ColumnChunk(self, index, arrays, field.nullable).write()


class _ColumnChunk:
    """One column chunk being written (its arrays: the row group's chunks of the column):
    its pages, then its ColumnChunk metadata. Pages of plain values stay within one array;
    dictionary indices of all arrays are paged together."""

    def __init__(
        self, writer: FlatParquetWriter, index: int, arrays: list[pa.Array], nullable: bool
    ):
        self.writer, self.index, self.arrays, self.nullable = writer, index, arrays, nullable
        kind = writer._kinds[index]
        assert kind is not None
        self.kind = kind
        self.codec_id, self.codec = writer._codecs[index]
        self.rows = sum(len(a) for a in arrays)
        self.null_count = sum(a.null_count for a in arrays)
        # Each array's validity as booleans (None: no nulls), unpacked once for statistics,
        # plain values and definition levels alike.
        self.masks = [_valid_mask(a) if a.null_count else None for a in arrays]
        self.uncompressed = self.compressed = self.data_pages = 0
        self.data_offset = 0

    def write(self) -> tuple[bytes, tuple[int, int]]:
        if self.kind.physical == meta.BYTE_ARRAY:
            statistics, dictionary_offset = self._byte_arrays()
        else:
            statistics, dictionary_offset = self._fixed()
        if not self.rows:
            statistics = None  # Arrow's writer gives a column chunk of no values none
        encoded = dictionary_offset is not None
        encoding = meta.RLE_DICTIONARY if encoded else meta.PLAIN
        encodings = [meta.PLAIN, meta.RLE] + ([meta.RLE_DICTIONARY] if encoded else [])
        column_meta = struct(
            [
                (1, I32, self.kind.physical),
                (2, LIST, (I32, encodings)),
                (3, LIST, (BINARY, [self.writer.schema.names[self.index]])),
                (4, I32, self.codec_id),
                (5, I64, self.rows),
                (6, I64, self.uncompressed),
                (7, I64, self.compressed),
                (9, I64, self.data_offset),
                (11, I64, dictionary_offset),
                (12, STRUCT, statistics),
                (13, LIST, meta.encoding_stats(encoded, self.data_pages, encoding)),
            ]
        )
        chunk = struct([(2, I64, 0), (3, STRUCT, column_meta)])
        return chunk, (self.uncompressed, self.compressed)

    # -- values

    def _dictionary_wanted(self) -> bool:
        return self.writer._dictionary[self.index] and self.null_count < self.rows

    def _fixed(self) -> tuple[bytes, int | None]:
        kind = self.kind
        assert kind.numpy is not None
        width = kind.width
        views = []
        lows, highs = [], []
        for array, mask in zip(self.arrays, self.masks, strict=True):
            values = np.frombuffer(
                array.buffers()[1], kind.numpy, count=len(array), offset=array.offset * width
            )
            present = values if mask is None else values[mask]
            views.append(values)
            if not len(present):
                continue
            low, high = present.min(), present.max()
            if np.isnan(low) or np.isnan(high):  # NaN wins min and max: skip them
                present = present[~np.isnan(present)]
                if not len(present):
                    continue
                low, high = present.min(), present.max()
            lows.append(low)
            highs.append(high)
        statistics = meta.fixed_statistics(
            kind, min(lows) if lows else None, max(highs) if highs else None, self.null_count
        )
        if self._dictionary_wanted():
            parts = [(a.buffers()[1], a.offset, len(a), _validity(a)) for a in self.arrays]
            integers = kind.numpy.startswith("<i")
            encoded = _parquet_encode.dictionary_fixed(
                parts, width, DICTIONARY_BYTES // width, integers
            )
            if encoded is not None:
                indices, dictionary = encoded
                entries = len(dictionary) // width
                return statistics, self._dictionary_pages(indices, dictionary, entries)
        self.data_offset = self.writer._position
        rows_per_page = max(1, PAGE_BYTES // width)
        for array, mask, values in zip(self.arrays, self.masks, views, strict=True):
            for first in range(0, len(array), rows_per_page):
                page = values[first : first + rows_per_page]
                rows = len(page)
                if mask is not None:
                    page = page[mask[first : first + rows]]
                self._data_page(mask, first, rows, [page.data], meta.PLAIN)
        return statistics, None

    def _byte_arrays(self) -> tuple[bytes, int | None]:
        parts = []
        for array in self.arrays:
            large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
            _, offsets, data = array.buffers()
            parts.append(
                (
                    offsets,
                    data or b"",
                    8 if large else 4,
                    array.offset,
                    len(array),
                    _validity(array),
                )
            )
        if self._dictionary_wanted():
            encoded = _parquet_encode.dictionary_bytes(parts, DICTIONARY_BYTES)
            if encoded is not None:
                indices, dictionary, entries, low, high = encoded
                statistics = meta.bytes_statistics(self.null_count, low, high)
                return statistics, self._dictionary_pages(indices, dictionary, entries)
        bounds = [b for b in (_parquet_encode.bytes_min_max(*p) for p in parts) if b is not None]
        low = min(b[0] for b in bounds) if bounds else None
        high = max(b[1] for b in bounds) if bounds else None
        statistics = meta.bytes_statistics(self.null_count, low, high)
        self.data_offset = self.writer._position
        for mask, (offsets, data, width, offset, length, validity) in zip(
            self.masks, parts, strict=True
        ):
            ends = np.frombuffer(offsets, f"<i{width}", count=length + 1, offset=offset * width)
            sizes = ends.astype(np.int64) - int(ends[0]) + 4 * np.arange(length + 1)
            first = 0
            while first < length:
                last = int(np.searchsorted(sizes, sizes[first] + PAGE_BYTES, side="right")) - 1
                last = min(max(last, first + 1), length)
                plain = _parquet_encode.plain_bytes(
                    offsets, data, width, offset + first, last - first, validity
                )
                self._data_page(mask, first, last - first, [plain], meta.PLAIN)
                first = last
        return statistics, None

    def _dictionary_pages(self, indices: bytes, dictionary: bytes, entries: int) -> int:
        """Write the dictionary page and the data pages of ``indices``; return the
        dictionary page's offset."""
        dictionary_offset = self.writer._position
        self._page(meta.DICTIONARY_PAGE, [dictionary], entries, meta.PLAIN)
        self.data_offset = self.writer._position
        mask = None
        if self.null_count:
            mask = np.concatenate(
                [np.ones(len(a), bool) if m is None else m for a, m in zip(self.arrays, self.masks)]
            )
        bit_width = max(1, (entries - 1).bit_length())
        rows_per_page = max(8, PAGE_BYTES * 8 // bit_width)
        done = 0  # indices written so far (one per non-null value)
        for first in range(0, self.rows, rows_per_page):
            rows = min(rows_per_page, self.rows - first)
            present = rows if mask is None else int(np.count_nonzero(mask[first : first + rows]))
            encoded = _parquet_encode.rle_hybrid(indices, done, present, bit_width)
            self._data_page(mask, first, rows, [bytes([bit_width]), encoded], meta.RLE_DICTIONARY)
            done += present
        return dictionary_offset

    # -- pages

    def _data_page(
        self, mask: np.ndarray | None, first: int, rows: int, parts: list[Any], encoding: int
    ) -> None:
        """Write a data page of rows [first, first + rows) (of the array ``mask`` is the
        validity of; None: no nulls) holding the encoded values ``parts``."""
        if self.nullable:
            parts = [_levels(mask, first, rows), *parts]
        self._page(meta.DATA_PAGE, parts, rows, encoding)
        self.data_pages += 1

    def _page(self, page_type: int, parts: list[Any], values: int, encoding: int) -> None:
        size = sum(memoryview(part).nbytes for part in parts)
        if self.codec is None:
            stored, stored_size = parts, size
        else:
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            compressed = self.codec.compress(body)
            stored, stored_size = [compressed], compressed.size
        header = meta.page_header(page_type, size, stored_size, values, encoding)
        self.writer._write(header)
        for part in stored:
            self.writer._write(part)
        self.uncompressed += len(header) + size
        self.compressed += len(header) + stored_size


def _validity(array: pa.Array) -> Any:
    return array.buffers()[0] if array.null_count else None


def _valid_mask(array: pa.Array) -> np.ndarray:
    bits = np.frombuffer(array.buffers()[0], np.uint8)
    unpacked = np.unpackbits(bits, bitorder="little")
    return unpacked[array.offset : array.offset + len(array)].astype(bool)


def _levels(mask: np.ndarray | None, first: int, rows: int) -> bytes:
    """Definition levels of rows [first, first + rows) with their length prefix: one run
    when there are no nulls, else the validity bits as one bit-packed run."""
    if mask is None:
        run = varint(rows << 1) + b"\x01"
    else:
        packed = np.packbits(mask[first : first + rows], bitorder="little")
        run = varint((len(packed) << 1) | 1) + packed.tobytes()
    return meta.little_endian_u32(len(run)) + run
