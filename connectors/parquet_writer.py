"""Writing one Parquet file block by block, and which columns get a dictionary.

A :class:`ParquetBlockWriter` keeps one ``pyarrow.parquet.ParquetWriter`` open per file and
appends row groups as blocks arrive, so a write task holds at most one row group of rows
(plus the block being written), never the whole file.

Dictionary encoding: pyarrow's default dictionary-encodes every column and gives up on a
column chunk only once its dictionary reaches 1 MiB, so on columns of distinct numbers
(ids, measurements) most of the hashing is wasted: it was about half of all CPU time of a
Parquet-to-Parquet ETL. Unless ``use_dictionary`` is passed, shardflow dictionary-encodes
string and binary columns (and Arrow dictionary columns), plus numeric columns whose first
values repeat a lot: at most one distinct value in eight of a sample, or so few values seen
only once that the next value is unlikely to be new (Good-Turing: singletons at most a tenth
of the sample), the sign of a small dictionary however long the sample (codes, categories,
sums of a few such). Dictionary-encoding those is both faster than writing them plainly
(fewer bytes to compress) and gives smaller files. The files are standard Parquet either
way; only their encodings differ from Ray Data's (which uses pyarrow's default).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_writing import BlockFileWriter

# Rows of a column sampled to judge its cardinality (a first, smaller sample rules out
# columns of nearly distinct values); a numeric column is dictionary-encoded when the share
# of distinct values in the sample, or the share of values seen once, is at most these.
_FIRST_SAMPLE_ROWS = 2048
_SAMPLE_ROWS = 16384
_MIN_SAMPLE_ROWS = 256
_MAX_DISTINCT_SHARE = 1 / 8
_MAX_SINGLETON_SHARE = 1 / 10
_MOSTLY_DISTINCT_SHARE = 0.9
# Values the writer encodes, levels and statistics included, per step (pyarrow's default is
# 1024): fewer, larger steps took 0.98x the time of a Parquet-to-Parquet ETL (B4, paired
# runs); data pages may exceed their 1 MiB target by up to one step's values.
_WRITE_BATCH_ROWS = 65536
# Blocks smaller than this are gathered into one row group (unless row_group_size says
# otherwise), so a stream of small blocks does not make a file of tiny row groups.
_MIN_ROW_GROUP_BYTES = 8 * 1024 * 1024


def dictionary_columns(block: Block) -> Any:
    """The ``use_dictionary`` argument shardflow writes ``block``'s file with: a list of the
    column paths (Parquet leaf names) to dictionary-encode.

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.connectors.parquet_writer import dictionary_columns
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


class ParquetBlockWriter(BlockFileWriter):
    """Appends blocks to one Parquet file as row groups.

    Args:
        f: The open binary output file.
        block: The file's first block (fixes its schema; not written here).
        args: ``pyarrow.parquet.write_table`` arguments (``row_group_size`` included).
    """

    def __init__(self, f: Any, block: Block, args: dict[str, Any]):
        import pyarrow.parquet as pq

        args = dict(args)
        self._row_group_size: int | None = args.pop("row_group_size", None)
        if "use_dictionary" not in args:
            args["use_dictionary"] = dictionary_columns(block)
        args.setdefault("write_batch_size", _WRITE_BATCH_ROWS)
        self.schema = block.schema
        self._writer = pq.ParquetWriter(f, self.schema, **args)
        self._pending: list[Block] = []
        self._pending_rows = self._pending_bytes = 0

    def write(self, block: Block) -> bool:
        block = self._conform(block)
        if block is None:
            return False
        self._pending.append(block)
        self._pending_rows += block.num_rows
        self._pending_bytes += block.nbytes
        if self._row_group_size is not None:
            if self._pending_rows >= self._row_group_size:
                whole = self._pending_rows - self._pending_rows % self._row_group_size
                self._flush(whole)
        elif self._pending_bytes >= _MIN_ROW_GROUP_BYTES:
            self._flush(self._pending_rows)
        return True

    def close(self) -> None:
        try:
            if self._pending_rows:
                self._flush(self._pending_rows)
        finally:
            self._writer.close()

    def abandon(self) -> None:
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        try:
            self._writer.close()
        except Exception:
            self._writer.is_open = False  # nothing more to write; keep __del__ quiet

    def _conform(self, block: Block) -> Block | None:
        if block.schema.equals(self.schema, check_metadata=False):
            return block
        if sorted(block.column_names) != sorted(self.schema.names):
            return None
        try:
            return block.select(self.schema.names).cast(self.schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError):
            return None

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` pending rows (whole row groups); keep the rest."""
        pending = self._pending[0] if len(self._pending) == 1 else pa.concat_tables(self._pending)
        head, rest = pending.slice(0, rows), pending.slice(rows)
        if self._row_group_size is not None:
            self._writer.write_table(head, row_group_size=self._row_group_size)
        else:
            self._writer.write_table(head)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._pending_bytes = rest.nbytes if rest.num_rows else 0
