"""Range partitioning: sorting runs, sampling keys, choosing boundaries, finding them again.

Order is Arrow's: each key ascending or descending, NaN after every number and nulls after
everything, whatever the direction. Boundaries are tuples of Python values (a prefix of the
key columns); a partition is the rows from the first row not before one boundary up to the
first row not before the next.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardflow.engine.execution.refs import SpilledRef, resolve
from shardflow.engine.plan.logical import SortKey
from shardflow.sdk.block import Block

SAMPLES_PER_RUN = 64


def check_key_columns(block: Block, columns: Sequence[str]) -> None:
    """ValueError naming an unknown key column and the columns the data has."""
    if not block.num_columns and not block.num_rows:
        return
    for column in columns:
        if column not in block.column_names:
            raise ValueError(
                f"You specified the column '{column}', but there's no such column in the "
                f"dataset. The dataset has columns: {block.column_names}"
            )


def sort_block(block: Block, key: SortKey, sorted_runs: bool = False) -> Block:
    """``block`` ordered by ``key`` (stable). ``sorted_runs``: the block is sorted runs one
    after another (the pieces a sort's reduce gathers), which a merging sort orders in a
    fraction of the time a quicksort takes."""
    check_key_columns(block, key.columns)
    if block.num_rows <= 1:
        return block
    order = _unique_numeric_order(block, key, sorted_runs)
    if order is None:
        order = pc.sort_indices(block, sort_keys=key.arrow_sort_keys())
    return block.take(order)


def _unique_numeric_order(
    block: Block, key: SortKey, sorted_runs: bool = False
) -> np.ndarray | None:
    """The order of a single numeric key without nulls, NaNs or repeated values, from NumPy's
    vectorized quicksort (several times faster than Arrow's stable sort), or for sorted runs
    its timsort, which merges them (16 runs: 0.37x the quicksort's time); None otherwise.

    Without repeated values every order is the stable one, so the result is the same."""
    if len(key.columns) != 1:
        return None
    column = block.column(key.columns[0])
    kind = column.type
    if column.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    values = column.to_numpy()
    if pa.types.is_floating(kind):
        if np.isnan(values).any():
            return None
        if key.descending[0]:
            values = -values
    elif key.descending[0]:
        values = ~values  # order-reversing without overflow, for signed and unsigned
    order = np.argsort(values, kind="stable" if sorted_runs else "quicksort")
    ranked = values[order]
    if np.any(ranked[1:] == ranked[:-1]):
        return None  # ties: Arrow's stable sort keeps their input order
    return order


def sample_keys(sorted_block: Block, key: SortKey, count: int = SAMPLES_PER_RUN) -> Block:
    """Up to ``count`` evenly spaced rows of the key columns of a sorted block."""
    n = sorted_block.num_rows
    keys = sorted_block.select(list(key.columns))
    if n <= count:
        return keys
    positions = np.linspace(0, n - 1, count).round().astype(np.int64)
    return keys.take(pa.array(positions))


def choose_boundaries(samples: Sequence[Block], key: SortKey, parts: int) -> list[tuple[Any, ...]]:
    """``parts - 1`` boundaries splitting the sampled key distribution into equal parts."""
    tables = [s for s in samples if s is not None and s.num_rows]
    if parts <= 1 or not tables:
        return []
    merged = sort_block(pa.concat_tables(tables, promote_options="permissive"), key)
    rows = list(zip(*[merged.column(c).to_pylist() for c in key.columns]))
    n = len(rows)
    return [rows[min(n - 1, (n * j) // parts)] for j in range(1, parts)]


def _rank(value: Any) -> int:
    if value is None:
        return 2
    if isinstance(value, float) and math.isnan(value):
        return 1
    return 0


def compare_keys(a: Sequence[Any], b: Sequence[Any], descending: Sequence[bool]) -> int:
    """-1, 0 or 1: the order of two key tuples (compared over the shorter one's length)."""
    for x, y, desc in zip(a, b, descending):
        rx, ry = _rank(x), _rank(y)
        if rx != ry:
            return -1 if rx < ry else 1
        if rx or x == y:
            continue
        less = x < y
        return (1 if less else -1) if desc else (-1 if less else 1)
    return 0


def lower_bound(
    sorted_block: Block, key: SortKey, boundary: tuple[Any, ...] | None, inclusive: bool = False
) -> int:
    """The number of rows of a sorted block that come before ``boundary`` (None: none do);
    with ``inclusive``, rows equal to it count as before it too."""
    if boundary is None:
        return 0
    n = sorted_block.num_rows
    if n == 0:
        return 0
    if len(boundary) == 1:
        column = sorted_block.column(key.columns[0])
        fast = _numeric_lower_bound(column, key.descending[0], boundary[0], inclusive)
        if fast is not None:
            return fast
    columns = [sorted_block.column(c) for c in key.columns[: len(boundary)]]
    descending = key.descending[: len(boundary)]
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        row = tuple(col[mid].as_py() for col in columns)
        order = compare_keys(row, boundary, descending)
        if order < 0 or (inclusive and order == 0):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _numeric_lower_bound(
    column: pa.ChunkedArray, descending: bool, value: Any, inclusive: bool = False
) -> int | None:
    """Lower bound on one numeric key column by binary search, touching only the values it
    compares (runs may be memory-mapped files); None when the fast path does not apply."""
    arrow_type = column.type
    if not (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)):
        return None
    if value is not None and not isinstance(value, (int, float)):
        return None
    valid = len(column) - column.null_count  # nulls sort last
    if value is None:
        return valid
    ordered = valid
    if pa.types.is_floating(arrow_type):  # NaNs sort after numbers, before nulls
        ordered = bisect.bisect_left(
            range(valid), True, key=lambda i: math.isnan(column[i].as_py())
        )
    if isinstance(value, float) and math.isnan(value):
        return ordered
    position = 0
    for chunk in column.chunks:
        size = min(len(chunk), ordered - position)
        if size <= 0:
            break
        values = chunk.slice(0, size).to_numpy(zero_copy_only=False)
        if descending:  # the rows before ``value`` are those greater than it
            found = size - int(
                np.searchsorted(values[::-1], value, side="left" if inclusive else "right")
            )
        else:
            found = int(np.searchsorted(values, value, side="right" if inclusive else "left"))
        if found < size:
            return position + found
        position += size
    return ordered


def partition_of(
    run: Any, key: SortKey, lo: tuple | None, hi: tuple | None, inclusive: bool = False
) -> Block:
    """The rows of a sorted run (a block or a reference to one) from boundary ``lo``
    (inclusive) to ``hi`` (exclusive); with ``inclusive`` a row equal to a boundary belongs to
    the range before it. A spilled run is searched batch by batch, reading only its key
    columns, and only the rows in range are read in full."""
    if isinstance(run, SpilledRef):
        start = _spilled_lower_bound(run, key, lo, inclusive)
        end = run.num_rows if hi is None else _spilled_lower_bound(run, key, hi, inclusive)
        return run.load_rows(start, max(0, end - start))
    block = resolve(run)
    start = lower_bound(block, key, lo, inclusive)
    end = block.num_rows if hi is None else lower_bound(block, key, hi, inclusive)
    return block.slice(start, max(0, end - start))


def _spilled_lower_bound(
    run: SpilledRef, key: SortKey, boundary: tuple | None, inclusive: bool = False
) -> int:
    if boundary is None or not run.batch_rows:
        return 0
    prefix = SortKey(key.columns[: len(boundary)], key.descending[: len(boundary)])
    starts = np.cumsum((0,) + run.batch_rows)
    with run.reader(list(prefix.columns)) as reader:

        def last_row(index: int) -> tuple:
            batch = reader.get_batch(index)
            return tuple(batch.column(name)[len(batch) - 1].as_py() for name in prefix.columns)

        lo, hi = 0, len(run.batch_rows)
        while lo < hi:  # the first batch whose last row is not before the boundary
            mid = (lo + hi) // 2
            order = (
                compare_keys(last_row(mid), boundary, prefix.descending)
                if run.batch_rows[mid]
                else 1
            )
            if order < 0 or (inclusive and order == 0):
                lo = mid + 1
            else:
                hi = mid
        if lo == len(run.batch_rows):
            return int(starts[-1])
        batch = pa.Table.from_batches([reader.get_batch(lo)])
    return int(starts[lo]) + lower_bound(batch, prefix, boundary, inclusive)


def partition_limits(boundaries: list[tuple], j: int) -> tuple[tuple | None, tuple | None]:
    """(lower, upper) boundary of partition ``j`` of ``len(boundaries) + 1``."""
    lo = boundaries[j - 1] if j > 0 else None
    hi = boundaries[j] if j < len(boundaries) else None
    return lo, hi
