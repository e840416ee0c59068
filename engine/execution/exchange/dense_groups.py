"""Group-by over dense key codes: counts, sums and means with ``np.bincount``.

Arrow's hash aggregation hashes every row; with many groups (a tenth of the rows) that is
most of a groupby's time, and its output must then be sorted by key. When every key maps to a
small integer code (an integer column over a short range: the value less the minimum; a string
column: the index into its dictionary, renumbered in value order) and the codes of all keys
combine into a range not much longer than the block, one ``np.bincount`` per state column
aggregates the block in linear time, and the groups come out in key order.

String codes come for free when the read delivers the column as an Arrow dictionary (a
dictionary-encoded Parquet column; see the optimizer's ``_encoded_group_keys``). A plain
string column must be dictionary-encoded first, which hashes every row: as the only key that
cost more than Arrow's whole hash aggregation (0.21 s against 0.17 s for 10M rows of 10k
distinct strings), so it takes Arrow's path; beside other keys its codes spare Arrow's
hashing of composite keys.

Only additive states take this path: Count, and Sum and Mean over float64 columns without
nulls (the states are then plain sums and counts, summed in row order as Arrow's hash
aggregation sums them, or per slice of rows with few groups: the same up to the order of
the float additions, exactly the same where those are exact). Anything else returns None
and the caller takes Arrow's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardflow.sdk.block import Block

try:
    from shardflow.engine.execution.exchange import _grouped_sums
except ImportError:  # built without the extension: NumPy's bincount counts and sums
    _grouped_sums = None  # type: ignore[assignment]

#: Codes may span this many times the rows (and at least MIN_SPAN) before bincount's
#: zeroed arrays cost more than hashing.
SPAN_PER_ROW = 4
MIN_SPAN = 1 << 16
#: Rows per slice of :func:`grouped_sums`, for spans of at most SPAN_PER_CHUNK codes.
CHUNK_ROWS = 1 << 15
SPAN_PER_CHUNK = 1 << 14
#: Weight columns the compiled module sums in one pass.
MAX_WEIGHTS = 8


class DenseKeys:
    """The group code of every row, and how to turn codes back into key columns."""

    def __init__(
        self, codes: np.ndarray, span: int, decoders: list[Any], rank: np.ndarray | None = None
    ):
        self.codes, self.span = codes, span
        self._decoders = decoders  # per key: (name, radix, values for each digit)
        self._rank = rank  # each code's place in key order, where codes are not in it

    def present(self, counts: np.ndarray) -> np.ndarray:
        """The codes with rows (``counts`` per code), in key order."""
        present = np.flatnonzero(counts)
        if self._rank is not None:
            present = present[np.argsort(self._rank[present])]
        return present

    def key_columns(self, present: np.ndarray) -> dict[str, pa.Array]:
        """The key columns of the groups whose codes are ``present``."""
        out: dict[str, pa.Array] = {}
        rest = present
        for name, radix, values in reversed(self._decoders):
            digit, rest = rest % radix, rest // radix
            out[name] = values.take(pa.array(digit))
        return {name: out[name] for name, _, _ in self._decoders}


def dense_keys(
    block: Block, keys: Sequence[str], encoded: Sequence[str] = (), lone_strings: bool = False
) -> DenseKeys | None:
    """Dense codes for ``keys`` over ``block``, or None when a key has nulls, a string column
    is the only key (unless ``lone_strings``), or the codes would span too wide a range. Keys
    named in ``encoded`` may be Arrow dictionaries: their codes are the dictionary's (ranked
    in value order)."""
    limit = max(MIN_SPAN, SPAN_PER_ROW * block.num_rows)
    codes: np.ndarray | None = None
    span = 1
    decoders = []
    for name in keys:
        column = block.column(name)
        if column.null_count:
            return None
        kind = column.type
        if pa.types.is_integer(kind):
            values = column_numpy(column)
            low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
            radix = high - low + 1
            if radix <= 0 or span * radix > limit:
                return None
            # At most one pass per key: the int64 values of a first key from 0 are its codes
            # (bincount reads them in place).
            digits = values.astype(np.int64, copy=False)
            if low:
                digits = digits - low
            key_values = pa.array(np.arange(low, high + 1, dtype=np.int64)).cast(kind)
        else:
            array = _dictionary_of(column, name in encoded, len(keys) > 1 or lone_strings)
            if array is None:
                return None
            radix = max(1, len(array.dictionary))
            if radix > limit:
                return None
            if len(keys) == 1:
                # A lone key: the dictionary's own codes, read in place; only the groups
                # present are put in key order (see DenseKeys.present).
                ranks = dictionary_ranks(array)
                if ranks is None:
                    return None
                indices = array.indices.to_numpy(zero_copy_only=False)
                return DenseKeys(indices, radix, [(name, radix, array.dictionary)], ranks[0])
            ranked = ranked_codes(array) if span * radix <= limit else None
            if ranked is None:
                return None
            digits, key_values = ranked
        codes = digits if codes is None else codes * radix + digits
        span *= radix
        decoders.append((name, radix, key_values))
    if codes is None:
        return None
    return DenseKeys(codes, span, decoders)


def _dictionary_of(
    column: pa.ChunkedArray, encoded: bool, may_encode: bool
) -> pa.DictionaryArray | None:
    """A string key as one dictionary array: its own dictionaries when the read delivered it
    encoded, else dictionary-encoded if ``may_encode``; None for other columns."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return one_dictionary(column) if encoded else None
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and may_encode:
        # Beside other keys only: hashing a sole string key costs as much as Arrow's whole
        # aggregation (unless the other way is a sort, as when combining).
        return pc.dictionary_encode(column.combine_chunks())
    return None


def one_dictionary(column: pa.ChunkedArray) -> pa.DictionaryArray | None:
    """``column`` (dictionary chunks) as one dictionary array, or None when its dictionary
    holds nulls."""
    if column.num_chunks == 1:
        array = column.chunk(0)
    else:
        array = column.unify_dictionaries().combine_chunks()
    return None if array.dictionary.null_count else array


def ranked_codes(array: pa.DictionaryArray) -> tuple[np.ndarray, pa.Array] | None:
    """Codes of ``array`` (no null indices) renumbered so that they order as the values do
    (as ``sort_block`` orders them), and the values in that order: groups then come out of
    ``np.bincount`` in key order, and the partial result needs no sort. None when the
    dictionary holds a value twice (a writer may): codes would then not be groups."""
    ranks = dictionary_ranks(array)
    if ranks is None:
        return None
    rank, values = ranks
    indices = array.indices.to_numpy(zero_copy_only=False)
    return rank[indices], values


def dictionary_ranks(array: pa.DictionaryArray) -> tuple[np.ndarray, pa.Array] | None:
    """Each dictionary code's place among the dictionary's values in order, and the values
    in that order; None when the dictionary holds a value twice."""
    dictionary = array.dictionary
    order = pc.sort_indices(dictionary)
    values = dictionary.take(order)
    if len(values) > 1 and pc.any(pc.equal(values[1:], values[:-1])).as_py():
        return None
    order_numpy = order.to_numpy()
    rank = np.empty(len(order_numpy), dtype=np.int64)
    rank[order_numpy] = np.arange(len(order_numpy), dtype=np.int64)
    return rank, values


def decode_dictionaries(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column as a plain column of its value type."""
    return column.cast(column.type.value_type)


def column_numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column without nulls as NumPy, without a copy when it is one chunk."""
    if isinstance(column, pa.ChunkedArray) and column.num_chunks == 1:
        column = column.chunk(0)
    return column.to_numpy()


def additive_states(block: Block, aggs: Sequence[Any], bulks: Sequence[Any]) -> list | None:
    """For each aggregation, the (state name, kind, column name) it needs: kind "count" (rows)
    or "sum" (of a float64 column without nulls); None when one is not additive here."""
    from shardflow.engine.api.aggregate import Count, Mean, Sum

    plan = []
    for agg, bulk in zip(aggs, bulks):
        kind = type(agg)
        if kind is Count:
            if bulk.on is not None and block.column(bulk.on).null_count:
                return None
            plan.append([(bulk.state(0), "count", None)])
            continue
        if kind not in (Sum, Mean):
            return None
        column = block.column(bulk.on)
        if column.type != pa.float64() or column.null_count:
            return None
        sums = (bulk.state(0), "sum", bulk.on)
        plan.append([sums] if kind is Sum else [sums, (bulk.state(1), "count", None)])
    return plan


def dense_partial(
    block: Block,
    keys: Sequence[str],
    aggs: Sequence[Any],
    bulks: Sequence[Any],
    encoded: Sequence[str] = (),
) -> Block | None:
    """One row per group of ``block`` (keys + partial states) in key order, or None when the
    block does not suit dense codes. Keys named in ``encoded`` may be Arrow dictionaries; the
    output keys are plain."""
    if not keys or block.num_rows == 0:
        return None
    plan = additive_states(block, aggs, bulks)
    if plan is None:
        return None
    grouping = dense_keys(block, keys, encoded)
    if grouping is None:
        return None
    summed = list(dict.fromkeys(c for states in plan for _, kind, c in states if kind == "sum"))
    weights = [column_numpy(block.column(c)) for c in summed]
    counts, totals = grouped_sums(grouping.codes, grouping.span, weights)
    present = grouping.present(counts)
    out: dict[str, Any] = grouping.key_columns(present)
    count_column = pa.array(counts[present].astype(np.int64))
    # Sum and Mean of one column share one sum; Count and Mean share the counts.
    sums = {c: pa.array(total[present]) for c, total in zip(summed, totals)}
    for states in plan:
        for name, kind, column in states:
            out[name] = count_column if kind == "count" else sums[column]
    return pa.table(out)


def grouped_sums(
    codes: np.ndarray, span: int, weights: Sequence[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Rows per code and, for each of ``weights``, its sum per code (arrays of ``span``).

    shardflow's compiled ``_grouped_sums`` module counts and sums in one pass, in row order
    (the sums of ``np.bincount`` over the whole columns, bit for bit): 10 groups over
    625k rows read from Parquet took a third of the time of the bincounts below. Without
    it, with few codes the rows go in slices of ``CHUNK_ROWS``: ``np.bincount`` reads its
    input twice (its range, then the counts) and each weight column reads the codes again,
    so slices that stay in the CPU's cache took half the time of whole columns. Sums then
    add per slice, in row order within each.
    """
    rows = len(codes)
    if _grouped_sums is not None and codes.dtype.kind == "i" and len(weights) <= MAX_WEIGHTS:
        counts = np.zeros(span, dtype=np.int64)
        totals = [np.zeros(span, dtype=np.float64) for _ in weights]
        contiguous = [np.ascontiguousarray(w, dtype=np.float64) for w in weights]
        given = np.ascontiguousarray(codes, np.int32 if codes.dtype == np.int32 else np.int64)
        if _grouped_sums.count_and_sum(given, given.itemsize, span, counts, contiguous, totals):
            return counts, totals
    if span > SPAN_PER_CHUNK or rows <= 2 * CHUNK_ROWS:
        counts = np.bincount(codes, minlength=span)
        return counts, [np.bincount(codes, weights=w, minlength=span) for w in weights]
    counts = np.zeros(span, dtype=np.int64)
    totals = [np.zeros(span, dtype=np.float64) for _ in weights]
    for start in range(0, rows, CHUNK_ROWS):
        piece = codes[start : start + CHUNK_ROWS]
        counts += np.bincount(piece, minlength=span)
        for total, w in zip(totals, weights):
            total += np.bincount(piece, weights=w[start : start + CHUNK_ROWS], minlength=span)
    return counts, totals


def dense_combine(partial: Block, keys: Sequence[str], state_kinds: dict[str, str]) -> Block | None:
    """Partial states of several blocks merged per group (count and sum states are summed)
    in key order, or None when the keys or states do not suit. A string key alone has codes
    too: the other way merges the states of several blocks by sorting them."""
    for name, kind in state_kinds.items():
        column = partial.column(name)
        if column.null_count or column.type != (pa.int64() if kind == "count" else pa.float64()):
            return None
    grouping = dense_keys(partial, keys, lone_strings=True)
    if grouping is None:
        return None
    codes, span = grouping.codes, grouping.span
    present = grouping.present(np.bincount(codes, minlength=span))
    out: dict[str, Any] = grouping.key_columns(present)
    done: dict[tuple, pa.Array] = {}
    for name, kind in state_kinds.items():
        column = partial.column(name)
        # Mean's sum and count are Sum's and Count's arrays in each partial block: sum once.
        same = (kind, _chunk_identity(column))
        if same not in done:
            summed = np.bincount(codes, weights=column_numpy(column), minlength=span)[present]
            done[same] = pa.array(summed.astype(np.int64) if kind == "count" else summed)
        out[name] = done[same]
    return pa.table(out)


def _chunk_identity(column: pa.ChunkedArray) -> tuple:
    """Where the values of ``column`` lie: equal for columns whose chunks are views of the
    same memory (hence hold the same values)."""
    out = []
    for chunk in column.chunks:
        data = chunk.buffers()[1]
        out.append((None if data is None else data.address, chunk.offset, len(chunk)))
    return tuple(out)
