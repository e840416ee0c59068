"""Which columns shardflow's Parquet writes dictionary-encode, and which they compress.

Dictionary encoding: pyarrow's default dictionary-encodes every column and gives up on a
column chunk only once its dictionary reaches 1 MiB, so on columns of distinct numbers
(ids, measurements) most of the hashing is wasted: it was about half of all CPU time of a
Parquet-to-Parquet ETL. Unless ``use_dictionary`` is passed, shardflow dictionary-encodes
string and binary columns (and Arrow dictionary columns), plus numeric columns whose first
values repeat a lot: at most one distinct value in eight of a sample, or so few values seen
only once that the next value is unlikely to be new (Good-Turing: singletons at most a tenth
of the sample), the sign of a small dictionary however long the sample (codes, categories,
sums of a few such). Dictionary-encoding those is both faster than writing them plainly
(fewer bytes to compress) and gives smaller files.

Compression: with snappy (the default codec), a column of plain numbers whose first values
snappy cannot shrink by a tenth (random measurements, hashes) is stored uncompressed: its
pages come out no larger, and writing and reading them skip the codec. Every other column is
compressed with snappy. Other codecs, and a codec given per column (a dict), are used as
given.

The files are standard Parquet either way; only their encodings (and, for such columns, the
codec) differ from Ray Data's, which uses pyarrow's defaults.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block

# Rows of a column sampled to judge its cardinality (a first, smaller sample rules out
# columns of nearly distinct values); a numeric column is dictionary-encoded when the share
# of distinct values in the sample, or the share of values seen once, is at most these.
_FIRST_SAMPLE_ROWS = 2048
_SAMPLE_ROWS = 16384
_MIN_SAMPLE_ROWS = 256
_MAX_DISTINCT_SHARE = 1 / 8
_MAX_SINGLETON_SHARE = 1 / 10
_MOSTLY_DISTINCT_SHARE = 0.9


def dictionary_columns(block: Block) -> Any:
    """The ``use_dictionary`` argument shardflow writes ``block``'s file with: a list of the
    column paths (Parquet leaf names) to dictionary-encode.

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.connectors.parquet.encodings import dictionary_columns
        >>> t = pa.table({"id": range(1000), "k": [i % 3 for i in range(1000)], "s": ["a"] * 1000})
        >>> dictionary_columns(t)
        ['k', 's']
    """
    names = block.column_names
    if len(set(names)) != len(names):
        return True  # duplicate names cannot be told apart by path: pyarrow's default
    chosen: list[str] = []
    nested = []
    for field in block.schema:
        kind = field.type
        if pa.types.is_nested(kind) or isinstance(kind, pa.ExtensionType):
            nested.append(field.name)
        elif _is_bytes_like(kind) or pa.types.is_dictionary(kind):
            chosen.append(field.name)
        elif pa.types.is_boolean(kind) or pa.types.is_null(kind):
            continue  # Parquet never dictionary-encodes booleans
        elif _repeats(block.column(field.name)):
            chosen.append(field.name)
    if nested:
        chosen += _byte_array_leaves(block.select(nested))
    return chosen


def _is_bytes_like(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
        or getattr(pa.types, "is_string_view", lambda _: False)(kind)
        or getattr(pa.types, "is_binary_view", lambda _: False)(kind)
    )


def _byte_array_leaves(block: Block) -> list[str]:
    """Parquet leaf paths of the string and binary values inside nested columns."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(block.slice(0, 0), buffer, use_dictionary=False)
    buffer.seek(0)
    schema = pq.ParquetFile(buffer).schema
    leaves = []
    for i in range(len(schema)):
        column = schema.column(i)
        if column.physical_type == "BYTE_ARRAY" or (
            column.physical_type == "FIXED_LEN_BYTE_ARRAY"
            and column.logical_type.type not in ("DECIMAL", "FLOAT16")
        ):
            leaves.append(column.path)
    return leaves


def _repeats(column: pa.ChunkedArray) -> bool:
    """Whether a flat column's first values hold few distinct ones. A small sample comes
    first, so that columns of (nearly) distinct values cost little to rule out."""
    first = column.slice(0, _FIRST_SAMPLE_ROWS)
    valid = len(first) - first.null_count
    if valid < _MIN_SAMPLE_ROWS:
        return False
    counts = _value_counts(first)
    if counts is None or len(counts) > valid * _MOSTLY_DISTINCT_SHARE:
        return False
    sample = column.slice(0, _SAMPLE_ROWS)
    if len(sample) > len(first):
        valid = len(sample) - sample.null_count
        counts = _value_counts(sample)
        if counts is None:
            return False
    singletons = int((counts == 1).sum())
    return len(counts) <= valid * _MAX_DISTINCT_SHARE or singletons <= valid * _MAX_SINGLETON_SHARE


def _value_counts(sample: pa.ChunkedArray) -> np.ndarray | None:
    """How many times each distinct non-null value occurs in ``sample``."""
    import pyarrow.compute as pc

    try:
        counts = pc.value_counts(sample.drop_null()).field("counts")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return counts.to_numpy(zero_copy_only=False)


# Values of a column compressed to judge whether the codec shrinks it, and the share of its
# size the compressed sample must stay under for the column to be compressed.
_CODEC_SAMPLE_BYTES = 64 * 1024
_MIN_CODEC_SAVING = 0.1


def column_compression(block: Block, use_dictionary: Any, codec: Any) -> Any:
    """The ``compression`` argument shardflow writes ``block``'s file with: ``codec``, or,
    for snappy, a dict naming the plain numeric columns snappy does not shrink as ``"none"``.

    Args:
        block: The file's first block.
        use_dictionary: The ``use_dictionary`` argument of the write (True, False or a list
            of column names): dictionary-encoded columns are always compressed.
        codec: The codec asked for.

    Examples:
        >>> import numpy as np, pyarrow as pa
        >>> from shardflow.connectors.parquet.encodings import column_compression
        >>> t = pa.table({"id": np.arange(10_000), "x": np.random.default_rng(0).random(10_000)})
        >>> column_compression(t, [], "snappy")
        {'id': 'snappy', 'x': 'none'}
    """
    if not isinstance(codec, str) or codec.lower() != "snappy" or use_dictionary is True:
        return codec
    names = block.column_names
    if len(set(names)) != len(names) or any(pa.types.is_nested(f.type) for f in block.schema):
        return codec  # leaves are named by path: keep one codec for all
    encoded = set(use_dictionary or ())
    choice = {}
    for field in block.schema:
        plain_number = field.name not in encoded and (
            pa.types.is_integer(field.type)
            or pa.types.is_floating(field.type)
            or pa.types.is_temporal(field.type)
        )
        shrinks = not plain_number or _snappy_shrinks(block.column(field.name))
        choice[field.name] = codec if shrinks else "none"
    if all(value == codec for value in choice.values()):
        return codec
    return choice


def _snappy_shrinks(column: pa.ChunkedArray) -> bool:
    """Whether snappy shrinks the first values of a fixed-width column by a tenth; True when
    there are too few values to tell."""
    chunks = [c for c in column.chunks if len(c) - c.null_count > 0]
    if not chunks:
        return True
    chunk = chunks[0]
    width = chunk.type.bit_width // 8
    data = chunk.buffers()[1]
    if width <= 0 or data is None:
        return True
    start = chunk.offset * width
    size = min(len(chunk) * width, _CODEC_SAMPLE_BYTES)
    if size < _CODEC_SAMPLE_BYTES // 4:
        return True
    sample = data.slice(start, size)
    compressed = pa.compress(sample, "snappy", asbytes=True)
    return len(compressed) <= size * (1 - _MIN_CODEC_SAVING)
