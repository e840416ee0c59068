"""The join exchange: both inputs range-partitioned by key with the same boundaries, then
each partition joined on its own.

Rows are matched with Arrow's hash join over the key columns and row positions only; the
other columns are then taken by position, so columns of any type (tensors, lists) join.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.execution.exchange.base import (
    ExchangeSpec,
    PlanContext,
    PrepareTransform,
    ReducePlan,
    Run,
)
from shardflow.engine.execution.exchange.ranges import (
    choose_boundaries,
    partition_limits,
    partition_of,
    sample_keys,
    sort_block,
)
from shardflow.engine.plan.logical import SortKey
from shardflow.sdk.block import Block, concat_blocks
from shardflow.sdk.datasink import TaskContext

_ARROW_JOIN_TYPES = {
    "inner": "inner",
    "left_outer": "left outer",
    "right_outer": "right outer",
    "full_outer": "full outer",
    "left_semi": "left semi",
    "right_semi": "right semi",
    "left_anti": "left anti",
    "right_anti": "right anti",
}


def _key(columns: tuple[str, ...]) -> SortKey:
    return SortKey(columns, (False,) * len(columns))


def _common(columns: int) -> tuple[str, ...]:
    return tuple(f"__k{i}" for i in range(columns))


class _SortSide(PrepareTransform):
    """Prepare: one side's block sorted by its keys, and a key sample under common names."""

    def __init__(self, keys: tuple[str, ...]):
        self.keys = keys

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        missing = [k for k in self.keys if k not in block.column_names]
        if missing and (block.num_rows or block.num_columns):
            raise ValueError(
                f"join: there's no column {missing[0]!r} in the dataset. The dataset has columns: "
                f"{block.column_names}"
            )
        ordered = sort_block(block, _key(self.keys))
        yield ordered
        yield sample_keys(ordered, _key(self.keys)).rename_columns(list(_common(len(self.keys))))


class _JoinPartition:
    """Reduce: join the rows of both sides between two boundaries."""

    def __init__(self, spec: JoinSpec, lo: tuple | None, hi: tuple | None, num_left: int):
        self.spec, self.lo, self.hi, self.num_left = spec, lo, hi, num_left

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        spec = self.spec
        left = [partition_of(i, _key(spec.on), self.lo, self.hi) for i in inputs[: self.num_left]]
        right = [
            partition_of(i, _key(spec.right_on), self.lo, self.hi) for i in inputs[self.num_left :]
        ]
        yield join_blocks(concat_blocks(left), concat_blocks(right), spec)


def join_blocks(left: Block, right: Block, spec: JoinSpec) -> Block:
    """``left`` joined with ``right`` as ``spec`` says."""
    how = spec.join_type
    left_idx = left.select(list(spec.on)).append_column("__li", pa.array(np.arange(left.num_rows)))
    right_idx = right.select(list(spec.right_on)).append_column(
        "__ri", pa.array(np.arange(right.num_rows))
    )
    joined = left_idx.join(
        right_idx,
        keys=list(spec.on),
        right_keys=list(spec.right_on),
        join_type=_ARROW_JOIN_TYPES[how],
        use_threads=False,
        coalesce_keys=True,
    )
    if how in ("left_semi", "left_anti"):
        return left.take(joined.column("__li"))
    if how in ("right_semi", "right_anti"):
        return right.take(joined.column("__ri"))
    left_rest = [c for c in left.column_names if c not in spec.on]
    right_rest = [c for c in right.column_names if c not in spec.right_on]
    overlap = sorted(set(left_rest) & set(right_rest))
    if overlap and spec.left_suffix is None and spec.right_suffix is None:
        raise ValueError(
            f"Left and right columns suffixes cannot be both None (overlapping columns: {overlap})"
        )
    columns = {}
    for name in spec.on:
        columns[name] = joined.column(name)
    for name in left_rest:
        out = name + (spec.left_suffix or "") if name in overlap else name
        columns[out] = left.column(name).take(joined.column("__li"))
    for name in right_rest:
        out = name + (spec.right_suffix or "") if name in overlap else name
        columns[out] = right.column(name).take(joined.column("__ri"))
    return pa.table(columns)


class JoinSpec(ExchangeSpec):
    """join(other, join_type, num_partitions, on, right_on, suffixes)."""

    name = "Join"
    num_inputs = 2

    def __init__(
        self,
        join_type: str,
        on: tuple[str, ...],
        right_on: tuple[str, ...],
        left_suffix: str | None,
        right_suffix: str | None,
        num_partitions: int,
    ):
        self.join_type, self.on, self.right_on = join_type, on, right_on
        self.left_suffix, self.right_suffix = left_suffix, right_suffix
        self.num_partitions = num_partitions

    def prepare(self, input_index: int) -> Any:
        return _SortSide(self.on if input_index == 0 else self.right_on)

    def has_side(self, input_index: int) -> bool:
        return True

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        left = [r for r in runs if r.input_index == 0]
        right = [r for r in runs if r.input_index == 1]
        if not left or not right:
            return self._one_side_plan(left, right)
        boundaries = choose_boundaries(
            [r.side for r in runs], _key(_common(len(self.on))), self.num_partitions
        )
        refs = [r.bundle.ref for r in left] + [r.bundle.ref for r in right]
        expected = sum(r.size_bytes for r in runs) // self.num_partitions
        return [
            ReducePlan(
                refs, _JoinPartition(self, *partition_limits(boundaries, j), len(left)), expected
            )
            for j in range(len(boundaries) + 1)
        ]

    def _one_side_plan(self, left: list[Run], right: list[Run]) -> list[ReducePlan]:
        """One side has no blocks at all: only unmatched rows of the other side can remain."""
        keep = {
            "left_outer": left,
            "full_outer": left + right,
            "right_outer": right,
            "left_anti": left,
            "right_anti": right,
        }.get(self.join_type, [])
        return [ReducePlan(passthrough=r.bundle) for r in keep]
