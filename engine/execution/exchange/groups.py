"""Groups of a block sorted by key: where each starts, and a group id per row.

Keys are equal when their values are equal, both null, or both NaN, as the sort puts them
next to each other.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardflow.sdk.block import Block


def group_starts(sorted_block: Block, keys: Sequence[str]) -> np.ndarray:
    """Row offsets where each group starts, plus the block's length at the end."""
    n = sorted_block.num_rows
    if n == 0:
        return np.zeros(1, dtype=np.int64)
    if not keys:
        return np.array([0, n], dtype=np.int64)
    change = np.zeros(n - 1, dtype=bool)
    for name in keys:
        column = sorted_block.column(name)
        if column.num_chunks != 1:
            column = column.combine_chunks()
        else:
            column = column.chunk(0)
        change |= _changes(column)
    return np.concatenate([[0], np.flatnonzero(change) + 1, [n]]).astype(np.int64)


def _changes(column: pa.Array) -> np.ndarray:
    """For each row but the first, whether its value differs from the previous row's."""
    if pa.types.is_null(column.type):  # all null: one group
        return np.zeros(len(column) - 1, dtype=bool)
    head, tail = column.slice(0, len(column) - 1), column.slice(1)
    differs = pc.fill_null(pc.not_equal(tail, head), True)
    same_null = pc.and_(pc.is_null(tail), pc.is_null(head))
    result = pc.and_(differs, pc.invert(same_null))
    if pa.types.is_floating(column.type):
        both_nan = pc.and_(
            pc.fill_null(pc.is_nan(tail), False), pc.fill_null(pc.is_nan(head), False)
        )
        result = pc.and_(result, pc.invert(both_nan))
    return result.to_numpy(zero_copy_only=False)


def group_ids(starts: np.ndarray) -> np.ndarray:
    """The group of every row (0, 0, 1, 1, 1, 2, ...) from group starts."""
    sizes = np.diff(starts)
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def iter_groups(sorted_block: Block, starts: np.ndarray) -> Iterator[tuple[int, Block]]:
    """(group number, rows of the group) for each group."""
    for g in range(len(starts) - 1):
        yield g, sorted_block.slice(int(starts[g]), int(starts[g + 1] - starts[g]))


def first_rows(sorted_block: Block, keys: Sequence[str], starts: np.ndarray) -> Block:
    """The key columns of each group's first row."""
    return sorted_block.select(list(keys)).take(pa.array(starts[:-1]))
