"""Exchanges that order rows by key: sort, and repartition by keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardflow.engine.execution.exchange.base import (
    ExchangeSpec,
    PlanContext,
    PrepareTransform,
    ReducePlan,
    Run,
    split_even,
    spread,
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


class SortRun(PrepareTransform):
    """Prepare: the block sorted by key, then a sample of its keys (the side block).

    Runs are sorted, so a reduce finds its key range in each by binary search (reading only
    the batches of that range from a spilled run), and the pieces it gathers are sorted runs,
    which the merge sorts fast."""

    def __init__(self, key: SortKey):
        self.key = key

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        ordered = sort_block(block, self.key)
        yield ordered
        yield sample_keys(ordered, self.key)


class MergeRange:
    """Reduce: the rows of every run between two boundaries, sorted (or just gathered), as
    ``outputs`` blocks in order."""

    def __init__(
        self,
        key: SortKey,
        lo: tuple | None,
        hi: tuple | None,
        sort: bool = True,
        outputs: int = 1,
        inclusive: bool = False,
    ):
        self.key, self.lo, self.hi, self.sort, self.outputs = key, lo, hi, sort, outputs
        self.inclusive = inclusive

    def pieces(self, inputs: list[Any]) -> list[Block]:
        return [partition_of(i, self.key, self.lo, self.hi, self.inclusive) for i in inputs]

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        pieces = self.pieces(inputs)
        block = concat_blocks(pieces)
        if self.sort and sum(1 for p in pieces if p.num_rows) > 1:  # one run's piece is sorted
            block = sort_block(block, self.key, sorted_runs=True)
        yield from split_even(block, self.outputs)


def range_plans(
    runs: list[Run],
    key: SortKey,
    parts: int,
    boundaries: list[tuple[Any, ...]] | None,
    make_reduce: Any,
) -> list[ReducePlan]:
    """One reduce plan per key range; every run goes whole to every reduce task, which cuts
    its own range out (a binary search over the sorted run)."""
    if boundaries is None:
        boundaries = choose_boundaries([r.side for r in runs], key, parts)
    refs = [r.bundle.ref for r in runs]
    expected = sum(r.size_bytes for r in runs) // max(1, len(boundaries) + 1)
    return [
        ReducePlan(refs, make_reduce(*partition_limits(boundaries, j)), expected)
        for j in range(len(boundaries) + 1)
    ]


class SortSpec(ExchangeSpec):
    """sort(key, descending, boundaries): range partitions by sampled (or given) boundaries,
    each sorted; nulls last."""

    name = "Sort"
    grouping_free = True

    def __init__(self, key: SortKey, boundaries: tuple[Any, ...] | None = None):
        self.key, self.boundaries = key, boundaries

    def prepare(self, input_index: int) -> Any:
        return SortRun(self.key)

    def has_side(self, input_index: int) -> bool:
        return True

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        if not runs:
            return []
        given = None
        if self.boundaries is not None:
            values = sorted(self.boundaries, reverse=self.key.descending[0])
            given = [(v,) for v in values]
        if given is not None:
            # Each block holds the values from one boundary up to the next; descending, the
            # same ranges in reverse order, so a boundary value stays in the block above it.
            inclusive = self.key.descending[0]
            return range_plans(
                runs,
                self.key,
                len(given) + 1,
                given,
                lambda lo, hi: MergeRange(self.key, lo, hi, inclusive=inclusive),
            )
        outputs = ctx.num_partitions(None, runs, ctx.num_input_blocks[0])
        tasks = ctx.reduce_tasks(outputs, runs, balanced=True)
        counts = iter(spread(outputs, tasks))
        return range_plans(
            runs,
            self.key,
            tasks,
            None,
            lambda lo, hi: MergeRange(self.key, lo, hi, outputs=next(counts)),
        )


class KeyedRepartitionSpec(ExchangeSpec):
    """repartition(num_blocks, keys=...): rows with equal keys land in the same block
    (range partitioning by key); blocks sorted by key when ``sort``."""

    name = "Repartition"

    def __init__(self, key: SortKey, num_blocks: int, sort: bool):
        self.key, self.num_blocks, self.sort = key, num_blocks, sort

    def prepare(self, input_index: int) -> Any:
        return SortRun(self.key)

    def has_side(self, input_index: int) -> bool:
        return True

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        if not runs:
            return []
        return range_plans(
            runs,
            self.key,
            self.num_blocks,
            None,
            lambda lo, hi: MergeRange(self.key, lo, hi, self.sort),
        )
