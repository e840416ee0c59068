"""Flat Parquet columns decoded page by page, faster than Arrow's reader.

Reading a float64 column that a writer compressed with Snappy, Arrow spends about 12 ns a
value, of which its Snappy build takes 8; ``cramjam``'s Snappy takes 6, and shardflow's
compiled ``_parquet_decode`` module (page headers, definition levels, PLAIN values and
dictionary indices) about 1, for the same array. :mod:`shardflow.connectors.parquet.reading`
decodes this way the columns :func:`decodable_columns` and :func:`decodable_dictionaries`
accept, and reads the others with Arrow.

What is accepted: top-level columns, required or optional, of Arrow type int32, int64,
float32, float64 or date32 stored without conversion (INT32, INT64, FLOAT, DOUBLE), and
string or binary columns the reader takes as Arrow dictionaries (every data page
dictionary-encoded: int32 indices and the dictionary page's values, as Arrow's
``read_dictionary`` gives them), in chunks compressed with Snappy or not at all, with PLAIN
or dictionary-encoded data pages (v1 or v2). The chunk is read in one request into a buffer
each thread keeps (up to 8 MiB). Anything else, and anything in a chunk that does not add up (a page header
that does not parse, a page that does not decompress to its stated size, fewer values than
the row group's rows, an index past the dictionary), *declines*: :func:`decode_column_chunk`
returns None and Arrow reads the column, raising its own error for a corrupt file. A
differential fuzz suite (tests/connectors/parquet/test_fuzz_page_decoding.py) checks that
every array decoded here equals Arrow's, bit for bit.

The compiled module and ``cramjam`` are optional: without them Arrow decodes every column;
``SHARDFLOW_PARQUET_PAGE_DECODING=0`` in the environment turns the module off.

Examples:
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> from shardflow.connectors.parquet import page_decoding
    >>> sink = pa.BufferOutputStream()
    >>> pq.write_table(pa.table({"x": [1.5, None, 2.5]}), sink)
    >>> f = pq.ParquetFile(pa.BufferReader(sink.getvalue()))
    >>> page_decoding.decode_column_chunk(
    ...     pa.BufferReader(sink.getvalue()), f.metadata, 0, 0, pa.float64()
    ... ).to_pylist()  # doctest: +SKIP
    [1.5, None, 2.5]
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

try:
    from shardflow.connectors.parquet import _parquet_decode
except ImportError:  # built without the extension: Arrow decodes every column
    _parquet_decode = None  # type: ignore[assignment]

# Arrow type -> (Parquet physical type, logical types stored without conversion, width).
_TYPES = {
    pa.int32(): ("INT32", ("NONE", "INT"), 4),
    pa.int64(): ("INT64", ("NONE", "INT"), 8),
    pa.float32(): ("FLOAT", ("NONE",), 4),
    pa.float64(): ("DOUBLE", ("NONE",), 8),
    pa.date32(): ("INT32", ("DATE",), 4),
}
_CODECS = ("SNAPPY", "UNCOMPRESSED")
_ENCODINGS = frozenset({"PLAIN", "RLE", "RLE_DICTIONARY", "PLAIN_DICTIONARY"})

# Thrift enum values of the Parquet format.
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8

ENV_SWITCH = "SHARDFLOW_PARQUET_PAGE_DECODING"
_scratch = threading.local()  # buffers per thread (see _scratch_buffer)
_KEPT_BYTES = 8 << 20  # larger buffers are not kept between chunks


class Decline(Exception):
    """Raised inside this module where Arrow must read the column instead."""


def available() -> bool:
    """Whether the compiled module and ``cramjam`` (for Snappy) are installed."""
    return _parquet_decode is not None and _snappy() is not None


def enabled() -> bool:
    """Whether Parquet reads decode here: :func:`available`, and not turned off by the
    environment variable ``SHARDFLOW_PARQUET_PAGE_DECODING=0`` (seen by worker processes
    too)."""
    return available() and os.environ.get(ENV_SWITCH, "1") != "0"


@functools.cache
def _snappy() -> Any:
    """cramjam's Snappy module, or None (looked up once: it is called for every page)."""
    try:
        import cramjam
    except ImportError:
        return None
    return cramjam.snappy


def decodable_columns(parquet_file: Any, names: Sequence[str] | None) -> dict[str, int]:
    """The columns among ``names`` (all when None) this module may decode, by name, with
    their leaf column indices: see the module docstring. Row groups may still decline
    (another codec, another encoding)."""
    wanted = None if names is None else set(names)
    found = {}
    for i, field, leaf in _flat_leaves(parquet_file):
        kind = _TYPES.get(field.type)
        if kind is None or (wanted is not None and field.name not in wanted):
            continue
        if leaf.physical_type != kind[0] or leaf.logical_type.type not in kind[1]:
            continue
        if leaf.logical_type.type == "INT" and not _is_int(leaf.logical_type, kind[2]):
            continue
        found[field.name] = i
    return found


def decodable_dictionaries(parquet_file: Any, names: Sequence[str]) -> dict[str, int]:
    """The string and binary columns among ``names`` (read as Arrow dictionaries) this
    module may decode into dictionary arrays, by name, with their leaf column indices."""
    if not names:
        return {}
    return {
        field.name: i
        for i, field, leaf in _flat_leaves(parquet_file)
        if field.name in names
        and field.type in (pa.string(), pa.binary())
        and leaf.physical_type == "BYTE_ARRAY"
    }


def _flat_leaves(parquet_file: Any) -> Iterator[tuple[int, pa.Field, Any]]:
    """``(leaf index, Arrow field, Parquet column)`` of the file's top-level columns that are
    neither nested nor repeated, named once, required or optional as their field says; none
    without the compiled module (or when any column is nested: leaf indices then shift)."""
    if not available():
        return
    schema = parquet_file.schema_arrow
    leaves = parquet_file.metadata.schema
    if len(leaves) != len(schema):
        return
    for i, field in enumerate(schema):
        leaf = leaves.column(i)
        if (
            leaf.path == field.name
            and schema.names.count(field.name) == 1
            and leaf.max_repetition_level == 0
            and leaf.max_definition_level <= 1
            and (leaf.max_definition_level == 1) == field.nullable
        ):
            yield i, field, leaf


def _is_int(logical: Any, width: int) -> bool:
    """Whether an INT logical type is a signed integer of ``width`` bytes."""
    text = logical.to_json()
    return '"isSigned": true' in text and f'"bitWidth": {width * 8}' in text


def decode_column_chunk(
    source: Any,
    metadata: Any,
    row_group: int,
    column: int,
    arrow_type: pa.DataType,
    dictionary: bool = False,
) -> pa.Array | None:
    """Column ``column`` of row group ``row_group`` as an Arrow array, or None where this
    module declines.

    Args:
        source: The Parquet file, a ``pyarrow.NativeFile`` (its position moves).
        metadata: The file's ``pyarrow.parquet.FileMetaData``.
        row_group: Row group index.
        column: Leaf column index (from :func:`decodable_columns`, or from
            :func:`decodable_dictionaries` with ``dictionary``).
        arrow_type: The column's Arrow type (one :func:`decodable_columns` accepts), or with
            ``dictionary`` its value type (string or binary).
        dictionary: Decode a dictionary-encoded string or binary column into an Arrow
            dictionary array (int32 indices), as Arrow's ``read_dictionary`` reads it; a
            chunk with plain pages declines.

    Returns:
        The column's values, equal to Arrow's read of them, or None.
    """
    group = metadata.row_group(row_group)
    chunk = group.column(column)
    if chunk.compression not in _CODECS or not set(chunk.encodings) <= _ENCODINGS:
        return None
    rows = group.num_rows
    if chunk.num_values != rows:
        return None
    if rows == 0:
        return None if dictionary else pa.array([], arrow_type)
    start = chunk.data_page_offset
    dictionary_offset = chunk.dictionary_page_offset
    if chunk.has_dictionary_page and dictionary_offset and 0 < dictionary_offset < start:
        start = dictionary_offset
    size = chunk.total_compressed_size
    if start < 0 or size <= 0:
        return None
    raw = _scratch_buffer("chunk", size)[:size]
    source.seek(start)
    if source.readinto(raw) != size:
        return None
    nullable = metadata.schema.column(column).max_definition_level == 1
    snappy = chunk.compression == "SNAPPY"
    try:
        if dictionary:
            return _decode_pages(raw, snappy, rows, pa.int32(), nullable, arrow_type)
        return _decode_pages(raw, snappy, rows, arrow_type, nullable)
    except Decline:
        return None


def _decode_pages(
    raw: np.ndarray,
    snappy: bool,
    rows: int,
    arrow_type: pa.DataType,
    nullable: bool,
    value_type: pa.DataType | None = None,
) -> pa.Array:
    """The chunk's pages decoded; with a ``value_type``, a dictionary array of it (the
    indices as ``arrow_type``, int32)."""
    width = _TYPES[arrow_type][2]
    indices_only = value_type is not None
    values = pa.allocate_buffer(rows * width)
    validity = pa.allocate_buffer((rows + 7) // 8) if nullable else None
    dictionary: Any = None
    dictionary_count = 0
    done = nulls = 0
    at = 0
    while done < rows:
        header = _parquet_decode.page_header(raw, at)
        if header is None:
            raise Decline
        (length, kind, uncompressed, compressed, count, encoding, level_encoding,
         page_nulls, levels_length, repetition_length, is_compressed) = header  # fmt: skip
        body = at + length
        at = body + compressed
        if at > len(raw):
            raise Decline
        if kind == _DICTIONARY_PAGE:
            if dictionary is not None or done or encoding not in (_PLAIN, _PLAIN_DICTIONARY):
                raise Decline
            dictionary = _decompressed(raw, body, compressed, uncompressed, snappy, own=True)
            dictionary_count = count
            if indices_only:
                dictionary = _byte_arrays(dictionary, count, value_type)
            elif dictionary_count * width > len(dictionary):
                raise Decline
            continue
        if kind == _DATA_PAGE:
            if count > rows - done:
                raise Decline
            page = _decompressed(raw, body, compressed, uncompressed, snappy)
            levels_start = values_start = levels = 0
            if nullable:
                if level_encoding != _RLE or len(page) < 4:
                    raise Decline
                levels = int.from_bytes(bytes(page[:4]), "little")
                levels_start, values_start = 4, 4 + levels
        elif kind == _DATA_PAGE_V2:
            if count > rows - done or repetition_length != 0 or levels_length < 0:
                raise Decline
            if page_nulls < 0 or (levels_length and not nullable):
                raise Decline
            page = _v2_page(raw, body, compressed, uncompressed, levels_length,
                            snappy and is_compressed != 0)  # fmt: skip
            levels_start, levels, values_start = 0, levels_length, levels_length
        else:
            raise Decline
        if indices_only and (
            dictionary is None or encoding not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY)
        ):
            raise Decline  # values written plainly: Arrow builds the dictionary
        page_result = _parquet_decode.decode_page(
            page, levels_start, levels, values_start, count, encoding, width,
            None if indices_only else dictionary, dictionary_count, values, validity, done,
            indices_only,
        )  # fmt: skip
        if page_result < 0 or (kind == _DATA_PAGE_V2 and page_result != page_nulls):
            raise Decline
        nulls += page_result
        done += count
    buffers = [validity if nulls else None, values]
    array = pa.Array.from_buffers(arrow_type, rows, buffers, null_count=nulls)
    if not indices_only:
        return array
    if dictionary is None:
        raise Decline
    return pa.DictionaryArray.from_arrays(array, dictionary, safe=False)


def _byte_arrays(page: Any, count: int, value_type: pa.DataType) -> pa.Array:
    """A dictionary page of PLAIN byte arrays as an Arrow array of ``value_type`` (string
    values checked to be UTF-8, as Arrow's arrays must be)."""
    offsets = pa.allocate_buffer((count + 1) * 4)
    data = pa.allocate_buffer(max(len(page), 1))
    total = _parquet_decode.byte_arrays(page, count, offsets, data)
    if total < 0:
        raise Decline
    array = pa.Array.from_buffers(value_type, count, [None, offsets, data.slice(0, total)])
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raise Decline from None
    return array


def _decompressed(
    raw: np.ndarray, at: int, size: int, uncompressed: int, snappy: bool, own: bool = False
) -> Any:
    """The page body at ``raw[at:at + size]``, decompressed to ``uncompressed`` bytes, in
    one of this thread's scratch buffers: the dictionary's (``own``) or the page's, valid
    until the next such call."""
    body = raw[at : at + size]
    if not snappy:
        if size != uncompressed:
            raise Decline
        if not own:
            return body
        # An aligned copy for a dictionary (the compiled module reads its values as words).
        out = _scratch_buffer("dictionary", size)[:size]
        out[:] = body
        return out
    out = _scratch_buffer("dictionary" if own else "page", uncompressed)
    _snappy_into(body, out[:uncompressed])
    return out[:uncompressed]


def _v2_page(
    raw: np.ndarray, at: int, size: int, uncompressed: int, levels: int, snappy: bool
) -> Any:
    """A v2 data page: its levels stored as they are, then its values, compressed or not."""
    if levels > size or levels > uncompressed:
        raise Decline
    if not snappy:
        if size != uncompressed:
            raise Decline
        return raw[at : at + size]
    out = _scratch_buffer("page", uncompressed)
    out[:levels] = raw[at : at + levels]
    _snappy_into(raw[at + levels : at + size], out[levels:uncompressed])
    return out[:uncompressed]


def _snappy_into(body: Any, out: np.ndarray) -> None:
    """Decompress ``body`` into ``out``, which it must fill exactly."""
    try:
        written = _snappy().decompress_raw_into(body, out)
    except Exception:  # corrupt or not Snappy: Arrow reports it
        raise Decline from None
    if written != len(out):
        raise Decline


def _scratch_buffer(name: str, size: int) -> np.ndarray:
    """This thread's buffer ``name`` of at least ``size`` bytes: reused from chunk to chunk,
    since fresh memory costs a page fault every 4 KiB."""
    buffer = getattr(_scratch, name, None)
    if buffer is None or len(buffer) < size:
        buffer = np.empty(max(size, 1 << 20), np.uint8)
        if size <= _KEPT_BYTES:
            setattr(_scratch, name, buffer)
    return buffer
