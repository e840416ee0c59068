"""Exchanges that move rows without looking at them: random_shuffle, repartition (by count or
shuffled), randomize_block_order."""

from __future__ import annotations

from typing import Any, Iterator, List, Optional

import numpy as np
import pyarrow as pa

from shardflow.engine.exchange.base import (
    ExchangeSpec,
    PlanContext,
    PrepareTransform,
    ReducePlan,
    Run,
    even_ranges,
    gather,
    seeded_rng,
)
from shardflow.engine.refs import slice_ref
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import TaskContext


class _Permute(PrepareTransform):
    """Prepare: a random permutation of the block, so any row range is a random sample."""

    def __init__(self, seed: Optional[int]):
        self.seed = seed

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        rng = seeded_rng(self.seed, 0, index)
        yield block.take(pa.array(rng.permutation(block.num_rows))) if block.num_rows > 1 else block


class _ConcatPermute:
    """Reduce: the partition's pieces, permuted once more."""

    def __init__(self, seed: Optional[int], partition: int):
        self.seed, self.partition = seed, partition

    def __call__(self, inputs: List[Any], ctx: TaskContext) -> Iterator[Block]:
        block = gather(inputs)
        rng = seeded_rng(self.seed, 1, self.partition)
        yield block.take(pa.array(rng.permutation(block.num_rows))) if block.num_rows > 1 else block


class _Concat:
    """Reduce: the partition's pieces, in order, as one block."""

    def __call__(self, inputs: List[Any], ctx: TaskContext) -> Iterator[Block]:
        yield gather(inputs)


def _slices_of_each_run(runs: List[Run], parts: int) -> List[List[Any]]:
    """For each of ``parts`` partitions, an even share of every run."""
    pieces: List[List[Any]] = [[] for _ in range(parts)]
    for run in runs:
        for j, (offset, length) in enumerate(even_ranges(run.num_rows, parts)):
            if length:
                pieces[j].append(slice_ref(run.bundle.ref, offset, length))
    return pieces


def _expected(runs: List[Run], parts: int) -> int:
    return sum(r.size_bytes for r in runs) // max(1, parts)


class RandomShuffleSpec(ExchangeSpec):
    """random_shuffle: every output block is a random mix of every input block.

    As many output blocks as input blocks unless ``num_blocks`` says otherwise (more when
    blocks would not fit the memory budget comfortably).
    """

    name = "RandomShuffle"

    def __init__(self, seed: Optional[int], num_blocks: Optional[int]):
        self.seed, self.num_blocks = seed, num_blocks

    def prepare(self, input_index: int) -> Any:
        return _Permute(self.seed)

    def plan(self, runs: List[Run], ctx: PlanContext) -> List[ReducePlan]:
        if not runs:
            return []
        parts = ctx.num_partitions(self.num_blocks, runs, ctx.num_input_blocks[0])
        expected = _expected(runs, parts)
        return [
            ReducePlan(pieces, _ConcatPermute(self.seed, j), expected)
            for j, pieces in enumerate(_slices_of_each_run(runs, parts))
        ]


class RepartitionSpec(ExchangeSpec):
    """repartition(num_blocks): in order by default (block j holds rows j*N/n .. (j+1)*N/n);
    with ``shuffle=True`` every output block takes an even share of every input block."""

    name = "Repartition"

    def __init__(self, num_blocks: int, shuffle: bool):
        self.num_blocks, self.shuffle = num_blocks, shuffle

    def plan(self, runs: List[Run], ctx: PlanContext) -> List[ReducePlan]:
        if not runs:
            return []
        expected = _expected(runs, self.num_blocks)
        if self.shuffle:
            pieces = _slices_of_each_run(runs, self.num_blocks)
            return [ReducePlan(p, _Concat(), expected) for p in pieces]
        total = sum(r.num_rows for r in runs)
        starts = np.cumsum([0] + [r.num_rows for r in runs])
        plans = []
        for offset, length in even_ranges(total, self.num_blocks):
            pieces = []
            for run, start in zip(runs, starts[:-1]):
                lo = max(offset, int(start))
                hi = min(offset + length, int(start) + run.num_rows)
                if hi > lo or (length == 0 and not pieces):
                    pieces.append(slice_ref(run.bundle.ref, lo - int(start), max(0, hi - lo)))
            plans.append(ReducePlan(pieces, _Concat(), expected))
        return plans


class RandomizeBlockOrderSpec(ExchangeSpec):
    """randomize_block_order: the same blocks, in a random order."""

    name = "RandomizeBlockOrder"

    def __init__(self, seed: Optional[int]):
        self.seed = seed

    def plan(self, runs: List[Run], ctx: PlanContext) -> List[ReducePlan]:
        order = seeded_rng(self.seed, 2).permutation(len(runs))
        return [ReducePlan(passthrough=runs[i].bundle) for i in order]
