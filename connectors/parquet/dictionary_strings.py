"""Dictionary-encoded string columns expanded into plain Arrow strings, fast.

Parquet writers dictionary-encode most string columns. Arrow's reader turns such a column
into a plain ``string`` array value by value through a builder; reading it as an Arrow
dictionary instead (``read_dictionary``) costs a tenth of that, and expanding the dictionary
with :func:`dense` (shardflow's compiled ``_dictionary_strings`` module: one pass for the
offsets, one copying bytes) costs less than a third of the dense read, for the same array.
:mod:`shardflow.connectors.parquet.reading` reads string columns this way when their column chunks
are dictionary-encoded.

The module is an optional compiled extension: without it (no C compiler at install time),
:func:`dense` casts with Arrow, and Parquet reads decode strings as Arrow does.

Examples:
    >>> import pyarrow as pa
    >>> from shardflow.connectors.parquet.dictionary_strings import dense
    >>> encoded = pa.array(["b", None, "a", "b"]).dictionary_encode()
    >>> dense(pa.chunked_array([encoded])).to_pylist()
    ['b', None, 'a', 'b']
"""

from __future__ import annotations

import pyarrow as pa

try:
    from shardflow.connectors.parquet import _dictionary_strings
except ImportError:  # built without the extension: Arrow expands every dictionary
    _dictionary_strings = None  # type: ignore[assignment]

# Bytes a copy may write past a value's end (the module copies in 16-byte steps).
_SLACK = 16 if _dictionary_strings is None else _dictionary_strings.STEP


def available() -> bool:
    """Whether the compiled module is installed."""
    return _dictionary_strings is not None


def expandable(value_type: pa.DataType) -> bool:
    """Whether :func:`dense` expands dictionaries of ``value_type`` without Arrow's cast."""
    return value_type in (pa.string(), pa.binary())


def dense(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``column`` (dictionary chunks) as a chunked array of its dictionaries' value type,
    equal to ``column.cast(value_type)``.

    Args:
        column: A chunked array of a dictionary type.

    Returns:
        The plain chunked array.
    """
    value_type = column.type.value_type
    chunks = []
    for chunk in column.chunks:
        expanded = expand(chunk)
        chunks.append(chunk.cast(value_type) if expanded is None else expanded)
    return pa.chunked_array(chunks, value_type)


def expand(array: pa.DictionaryArray) -> pa.Array | None:
    """``array`` as a plain array of its value type, or None where the compiled module is
    missing or declines (other index or value types, an index out of range, a dictionary
    holding nulls, a result past 2 GiB of values); Arrow's cast then decides."""
    if _dictionary_strings is None:
        return None
    indices, dictionary = array.indices, array.dictionary
    value_type = dictionary.type
    if not expandable(value_type) or indices.type != pa.int32() or dictionary.null_count:
        return None
    length = len(indices)
    validity = None
    if indices.null_count:
        if indices.offset % 8:
            return None
        bitmap = indices.buffers()[0]
        validity = bitmap.slice(indices.offset // 8, (length + 7) // 8)
    index_buffer = indices.buffers()[1]
    _, dict_offsets, dict_data = dictionary.buffers()
    if dict_data is None:
        dict_data = pa.py_buffer(b"")
    offsets = pa.allocate_buffer((length + 1) * 4)
    total = _dictionary_strings.offsets(
        index_buffer,
        indices.offset,
        length,
        validity,
        0,
        dict_offsets,
        dictionary.offset,
        len(dictionary),
        dict_data,
        offsets,
    )
    if total < 0:
        return None
    data = pa.allocate_buffer(total + _SLACK)
    _dictionary_strings.gather(
        index_buffer,
        indices.offset,
        length,
        dict_offsets,
        dictionary.offset,
        len(dictionary),
        dict_data,
        offsets,
        data,
    )
    return pa.Array.from_buffers(
        value_type,
        length,
        [validity, offsets, data.slice(0, total)],
        null_count=indices.null_count,
    )
