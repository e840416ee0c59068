"""How shardflow's own Parquet writer stores each Arrow type it handles, and the Thrift
metadata that describes it: schema elements, statistics, logical types.

The mapping is the one Arrow's writer uses (format version 2.6), so a file reads back with
the same Parquet schema and, through the stored Arrow schema, the same Arrow types.
"""

from __future__ import annotations

import base64
import struct as packing
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from shardflow.connectors.parquet.thrift_compact import BINARY, BOOL, I8, I32, I64, STRUCT, struct

# Parquet physical types, encodings and page types (parquet.thrift).
INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY = 1, 2, 4, 5, 6
PLAIN, RLE, RLE_DICTIONARY = 0, 3, 8
DATA_PAGE, DICTIONARY_PAGE = 0, 2
CODECS = {"none": 0, "uncompressed": 0, "snappy": 1, "gzip": 2, "brotli": 4, "zstd": 6}

# Statistics of byte strings longer than this are left out (Arrow's max_statistics_size).
MAX_STATISTICS_BYTES = 4096

_EMPTY = struct([])
_UTF8, _DATE, _TIMESTAMP_MILLIS, _TIMESTAMP_MICROS = 0, 6, 9, 10
_CONVERTED_INTEGER = {(8, True): 15, (16, True): 16, (8, False): 11, (16, False): 12}
_UNITS = {"ms": 1, "us": 2, "ns": 3}


@dataclass(frozen=True)
class ColumnKind:
    """How one Arrow type is stored.

    Attributes:
        physical: The Parquet physical type.
        width: Bytes per value of a fixed-width physical type; 0 for byte arrays.
        stored: The Arrow type whose buffers hold the stored values (a cast for narrow ints).
        numpy: The NumPy dtype of stored fixed-width values, for statistics.
        converted: The legacy converted type, if any.
        logical: The encoded LogicalType union, if any.
        signed: Whether statistics order is signed (the legacy min/max fields are written
            too, as Arrow does, for old readers).
    """

    physical: int
    width: int
    stored: pa.DataType
    numpy: str | None
    converted: int | None = None
    logical: bytes | None = None
    signed: bool = True


def column_kind(kind: pa.DataType) -> ColumnKind | None:
    """The storage of Arrow type ``kind``, or None when the writer does not handle it."""
    if kind == pa.int32():
        return ColumnKind(INT32, 4, kind, "<i4")
    if kind == pa.int64():
        return ColumnKind(INT64, 8, kind, "<i8")
    if kind == pa.float32():
        return ColumnKind(FLOAT, 4, kind, "<f4")
    if kind == pa.float64():
        return ColumnKind(DOUBLE, 8, kind, "<f8")
    if kind in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()):
        signed = pa.types.is_signed_integer(kind)
        logical = struct([(10, STRUCT, struct([(1, I8, kind.bit_width), (2, BOOL, signed)]))])
        converted = _CONVERTED_INTEGER[kind.bit_width, signed]
        return ColumnKind(INT32, 4, pa.int32(), "<i4", converted, logical, signed)
    if kind == pa.date32():
        return ColumnKind(INT32, 4, pa.int32(), "<i4", _DATE, struct([(6, STRUCT, _EMPTY)]))
    if pa.types.is_timestamp(kind) and kind.unit in _UNITS:
        adjusted = kind.tz is not None
        unit = struct([(_UNITS[kind.unit], STRUCT, _EMPTY)])
        timestamp = struct([(1, BOOL, adjusted), (2, STRUCT, unit)])
        legacy = {"ms": _TIMESTAMP_MILLIS, "us": _TIMESTAMP_MICROS}.get(kind.unit)
        return ColumnKind(
            INT64,
            8,
            pa.int64(),
            "<i8",
            legacy,  # (Arrow's writer writes it whether or not the values are in UTC)
            struct([(8, STRUCT, timestamp)]),
        )
    if kind in (pa.string(), pa.large_string()):
        logical = struct([(1, STRUCT, _EMPTY)])
        return ColumnKind(BYTE_ARRAY, 0, kind, None, _UTF8, logical, signed=False)
    if kind in (pa.binary(), pa.large_binary()):
        return ColumnKind(BYTE_ARRAY, 0, kind, None, signed=False)
    return None


def schema_elements(schema: pa.Schema, kinds: list[ColumnKind]) -> list[bytes]:
    """The file's SchemaElement list: the root group, then one leaf per column."""
    # the root is REQUIRED (repetition type 0), as Arrow's writer says
    elements = [struct([(3, I32, 0), (4, BINARY, "schema"), (5, I32, len(schema))])]
    for field, kind in zip(schema, kinds, strict=True):
        elements.append(
            struct(
                [
                    (1, I32, kind.physical),
                    (3, I32, 1 if field.nullable else 0),
                    (4, BINARY, field.name),
                    (6, I32, kind.converted),
                    (10, STRUCT, kind.logical),
                ]
            )
        )
    return elements


def key_value_metadata(schema: pa.Schema) -> list[bytes]:
    """The file's key-value metadata: the schema's own entries and the serialized Arrow
    schema (``ARROW:schema``), as Arrow's writer stores them."""
    entries = dict(schema.metadata or {})
    entries[b"ARROW:schema"] = base64.b64encode(schema.serialize().to_pybytes())
    return [struct([(1, BINARY, key), (2, BINARY, value)]) for key, value in entries.items()]


# A ColumnOrder union: TYPE_ORDER, min and max follow the column's (logical) type.
TYPE_ORDER = struct([(1, STRUCT, _EMPTY)])


def fixed_statistics(kind: ColumnKind, low: object, high: object, null_count: int) -> bytes:
    """Statistics of a fixed-width column chunk: ``low`` and ``high`` are the smallest and
    largest non-null (and, for floats, non-NaN) values, None when there are none. No NaN
    count, as Arrow's writer writes none (readers that know the field prune differently)."""
    if low is None or high is None:
        return _statistics(null_count, None, None, kind.signed)
    if kind.physical in (FLOAT, DOUBLE):
        # Parquet's rule for zeros: a zero minimum is written -0.0, a zero maximum +0.0.
        low = -0.0 if low == 0 else low
        high = 0.0 if high == 0 else high
    dtype = np.dtype(kind.numpy)
    return _statistics(
        null_count,
        np.array(low, dtype).tobytes(),
        np.array(high, dtype).tobytes(),
        kind.signed,
    )


def bytes_statistics(null_count: int, low: bytes | None, high: bytes | None) -> bytes:
    """Statistics of a byte-array column chunk: a min or max longer than
    MAX_STATISTICS_BYTES is left out (the other kept), as Arrow's writer does."""
    if low is not None and len(low) > MAX_STATISTICS_BYTES:
        low = None
    if high is not None and len(high) > MAX_STATISTICS_BYTES:
        high = None
    return _statistics(null_count, low, high, signed=False)


def _statistics(null_count: int, low: bytes | None, high: bytes | None, signed: bool) -> bytes:
    legacy = signed and low is not None
    return struct(
        [
            (1, BINARY, high if legacy else None),
            (2, BINARY, low if legacy else None),
            (3, I64, null_count),
            (5, BINARY, high),
            (6, BINARY, low),
            (7, BOOL, True if high is not None else None),
            (8, BOOL, True if low is not None else None),
        ]
    )


def page_header(
    page_type: int, uncompressed: int, compressed: int, values: int, encoding: int
) -> bytes:
    """A PageHeader of a v1 data page or a dictionary page."""
    if page_type == DICTIONARY_PAGE:
        detail = (7, STRUCT, struct([(1, I32, values), (2, I32, encoding)]))
    else:
        detail = (
            5,
            STRUCT,
            struct([(1, I32, values), (2, I32, encoding), (3, I32, RLE), (4, I32, RLE)]),
        )
    return struct([(1, I32, page_type), (2, I32, uncompressed), (3, I32, compressed), detail])


def encoding_stats(dictionary: bool, data_pages: int, data_encoding: int) -> tuple:
    """The ``encoding_stats`` list of a column chunk."""
    stats = []
    if dictionary:
        stats.append(struct([(1, I32, DICTIONARY_PAGE), (2, I32, PLAIN), (3, I32, 1)]))
    stats.append(struct([(1, I32, DATA_PAGE), (2, I32, data_encoding), (3, I32, data_pages)]))
    return (STRUCT, stats)


def little_endian_u32(value: int) -> bytes:
    return packing.pack("<I", value)
