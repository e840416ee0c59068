"""Exchanges that move rows without looking at them: random_shuffle, repartition (by count or
shuffled), randomize_block_order."""

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
    even_ranges,
    gather,
    seeded_rng,
    split_even,
    spread,
)
from shardflow.engine.execution.refs import slice_ref
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import TaskContext


class _Permute(PrepareTransform):
    """Prepare: a random permutation of the block, so any row range is a random sample."""

    def __init__(self, seed: int | None):
        self.seed = seed

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        rng = seeded_rng(self.seed, 0, index)
        yield block.take(pa.array(rng.permutation(block.num_rows))) if block.num_rows > 1 else block


class _ConcatPermute:
    """Reduce: the partition's pieces, permuted once more, as ``outputs`` blocks."""

    def __init__(self, seed: int | None, partition: int, outputs: int = 1):
        self.seed, self.partition, self.outputs = seed, partition, outputs

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        block = gather(inputs)
        rng = seeded_rng(self.seed, 1, self.partition)
        if block.num_rows > 1:
            block = block.take(pa.array(rng.permutation(block.num_rows)))
        yield from split_even(block, self.outputs)


class _Concat:
    """Reduce: the partition's pieces, in order, as blocks of the given row counts (or as
    ``outputs`` nearly equal blocks)."""

    def __init__(self, lengths: list[int] | None = None, outputs: int = 1):
        self.lengths, self.outputs = lengths, outputs

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        block = gather(inputs)
        if self.lengths is None:
            yield from split_even(block, self.outputs)
            return
        offset = 0
        for length in self.lengths:
            yield block.slice(offset, length)
            offset += length


def _slices_of_each_run(runs: list[Run], parts: int) -> list[list[Any]]:
    """For each of ``parts`` partitions, an even share of every run."""
    pieces: list[list[Any]] = [[] for _ in range(parts)]
    for run in runs:
        for j, (offset, length) in enumerate(even_ranges(run.num_rows, parts)):
            if length:
                pieces[j].append(slice_ref(run.bundle.ref, offset, length))
    for partition in pieces:
        if not partition and runs:  # an empty partition still carries the schema
            partition.append(slice_ref(runs[0].bundle.ref, 0, 0))
    return pieces


def _expected(runs: list[Run], parts: int) -> int:
    return sum(r.size_bytes for r in runs) // max(1, parts)


class RandomShuffleSpec(ExchangeSpec):
    """random_shuffle: every output block is a random mix of every input block.

    As many output blocks as input blocks unless ``num_blocks`` says otherwise (more when
    blocks would not fit the memory budget comfortably).
    """

    name = "RandomShuffle"

    def __init__(self, seed: int | None, num_blocks: int | None):
        self.seed, self.num_blocks = seed, num_blocks

    def prepare(self, input_index: int) -> Any:
        return _Permute(self.seed)

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        if not runs:
            return []
        outputs = ctx.num_partitions(self.num_blocks, runs, ctx.num_input_blocks[0])
        tasks = ctx.reduce_tasks(outputs, runs)
        expected = _expected(runs, tasks)
        return [
            ReducePlan(pieces, _ConcatPermute(self.seed, j, count), expected)
            for j, (pieces, count) in enumerate(
                zip(_slices_of_each_run(runs, tasks), spread(outputs, tasks))
            )
        ]


class RepartitionSpec(ExchangeSpec):
    """repartition(num_blocks): in order by default (block j holds rows j*N/n .. (j+1)*N/n);
    with ``shuffle=True`` every output block takes an even share of every input block."""

    name = "Repartition"

    def __init__(self, num_blocks: int, shuffle: bool):
        self.num_blocks, self.shuffle = num_blocks, shuffle

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        if not runs:
            return []
        tasks = ctx.reduce_tasks(self.num_blocks, runs)
        expected = _expected(runs, tasks)
        counts = spread(self.num_blocks, tasks)
        if self.shuffle:
            pieces = _slices_of_each_run(runs, tasks)
            return [ReducePlan(p, _Concat(outputs=k), expected) for p, k in zip(pieces, counts)]
        total = sum(r.num_rows for r in runs)
        blocks = even_ranges(total, self.num_blocks)
        starts = np.cumsum([0] + [r.num_rows for r in runs])
        plans, first = [], 0
        for count in counts:
            group = blocks[first : first + count]
            first += count
            offset = group[0][0]
            end = group[-1][0] + group[-1][1]
            pieces = []
            for run, start in zip(runs, starts[:-1]):
                lo, hi = max(offset, int(start)), min(end, int(start) + run.num_rows)
                if hi > lo:
                    pieces.append(slice_ref(run.bundle.ref, lo - int(start), hi - lo))
            if not pieces:  # keep the schema for empty blocks
                pieces.append(slice_ref(runs[0].bundle.ref, 0, 0))
            plans.append(
                ReducePlan(pieces, _Concat(lengths=[length for _, length in group]), expected)
            )
        return plans


class RandomizeBlockOrderSpec(ExchangeSpec):
    """randomize_block_order: the same blocks, in a random order."""

    name = "RandomizeBlockOrder"

    def __init__(self, seed: int | None):
        self.seed = seed

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        order = seeded_rng(self.seed, 2).permutation(len(runs))
        return [ReducePlan(passthrough=runs[i].bundle) for i in order]
