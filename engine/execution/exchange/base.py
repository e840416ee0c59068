"""What every exchange (shuffle, sort, aggregate, repartition, join) tells the exchange operator.

An exchange runs in two task phases around one decision on the driver:

1. **prepare**: as input blocks arrive, a task turns each group of them into a *run*: one block
   reordered so that any output partition is a contiguous row range of it (randomly permuted
   for a shuffle, sorted by key for a sort, partially aggregated and sorted for a groupby),
   plus an optional small *side* block the driver reads (key samples).
2. **plan** (driver, after the last run): choose the number of output partitions and, for each
   one, the inputs of its reduce task (whole runs, or row ranges of runs).
3. **reduce**: one task per output partition combines its pieces into output blocks.

Because partitions are row ranges chosen after every input was seen, the number of outputs
can depend on the whole input (its size, the samples) while runs are written only once.
A spec describes the three steps; engine/execution/operators/exchange.py runs them, keeps runs in memory
or spills them to disk, and delivers the outputs in partition order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.refs import RefBundle, resolve
from shardflow.sdk.block import Block, concat_blocks
from shardflow.sdk.datasink import TaskContext


@dataclass
class Run:
    """One prepared run, as the driver sees it; ``order`` sorts runs in input order."""

    input_index: int
    bundle: RefBundle
    side: pa.Table | None = None
    order: tuple[int, int, int] = (0, 0, 0)

    @property
    def num_rows(self) -> int:
        return self.bundle.num_rows

    @property
    def size_bytes(self) -> int:
        return self.bundle.meta.size_bytes or 0


@dataclass
class ReducePlan:
    """The inputs of one output partition and the task that combines them.

    A plan with ``passthrough`` set runs no task: that run is emitted as it is.
    """

    inputs: list[Any] = field(default_factory=list)
    transform: Callable[[list[Any], TaskContext], Iterator[Block]] | None = None
    expected_bytes: int = 0
    passthrough: RefBundle | None = None


@dataclass
class PlanContext:
    """What a spec may use to plan: settings, budget, and how many blocks came in."""

    num_input_blocks: list[int]
    memory_budget_bytes: int
    target_max_block_size: int
    #: How many reduce tasks run at once (the backend's task slots).
    parallelism: int = 1
    #: Partitions are never planned smaller than this (DataContext.target_min_block_size).
    target_min_block_size: int = 1

    def partition_bytes(self) -> int:
        """The largest partition the reduce side should handle comfortably: an eighth of the
        budget, within the block size targets. A budget smaller than a block still gives
        blocks of the minimum size (admitted one at a time), never millions of tiny ones."""
        share = min(self.target_max_block_size, self.memory_budget_bytes // 8)
        return max(1, self.target_min_block_size, share)

    def num_partitions(self, requested: int | None, runs: list[Run], default: int) -> int:
        """``requested`` when given, else ``default`` raised so partitions fit in memory."""
        if requested:
            return requested
        total = sum(r.size_bytes for r in runs)
        return max(1, default, math.ceil(total / self.partition_bytes()))

    def reduce_tasks(self, outputs: int, runs: list[Run], balanced: bool = False) -> int:
        """How many reduce tasks make ``outputs`` blocks: one per partition-sized share of
        the data at most, so each task reads large pieces of each run (many tiny pieces of
        memory-mapped runs would cost far more memory and time than their size).

        With ``balanced`` (for specs whose rows do not depend on the number of tasks), rounded
        up to a multiple of the parallelism so that no slot idles in the last round; seeded
        shuffles keep a task count that depends only on the data and the settings."""
        total = sum(r.size_bytes for r in runs)
        tasks = max(1, math.ceil(total / self.partition_bytes()))
        if balanced and tasks > 1 and self.parallelism > 1:
            tasks = math.ceil(tasks / self.parallelism) * self.parallelism
        return min(outputs, tasks)


class ExchangeSpec:
    """One kind of exchange. Specs are picklable; their prepare/reduce transforms run in tasks."""

    name = "Exchange"
    num_inputs = 1
    #: Whether prepare tasks gather several input blocks into one run (fewer, larger runs
    #: make reduce tasks read larger pieces); specs whose runs are tiny (partial aggregates)
    #: prepare each block as it comes.
    gathers_inputs = True
    #: Whether the output is the same however input blocks are grouped into runs (a stable
    #: sort): runs kept in memory are then prepared block by block as the blocks arrive, so
    #: preparing overlaps with reading; only runs bound for disk gather to full size.
    grouping_free = False

    def prepare(
        self, input_index: int
    ) -> Callable[[list[Any], TaskContext], Iterator[Block]] | None:
        """The prepare transform for blocks of input ``input_index``; None keeps the input
        blocks as runs unchanged (no task, unless they must be spilled)."""
        return None

    def prepare_for(
        self, input_index: int, spilling: bool
    ) -> Callable[[list[Any], TaskContext], Iterator[Block]] | None:
        """``prepare`` for a task whose run will (or will not) be spilled to disk."""
        return self.prepare(input_index)

    def has_side(self, input_index: int) -> bool:
        """Whether the prepare transform yields a side block after the run."""
        return False

    def validate(self, runs: list[Run]) -> None:
        """Raise before planning when the runs show the operation cannot succeed."""

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        """The reduce tasks, in output order."""
        raise NotImplementedError


class PrepareTransform:
    """Base of prepare transforms: concatenate the task's inputs and prepare one run."""

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        block = (
            concat_blocks([resolve(i) for i in inputs]) if len(inputs) != 1 else resolve(inputs[0])
        )
        yield from self.prepare(block, ctx.task_idx)

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        raise NotImplementedError


def gather(inputs: list[Any]) -> Block:
    """The pieces of one partition as one block (zero-copy concatenation)."""
    blocks = [resolve(i) for i in inputs]
    if not blocks:
        return pa.table({})
    return concat_blocks(blocks)


def even_ranges(num_rows: int, parts: int) -> list[tuple]:
    """``parts`` contiguous (offset, length) ranges of ``num_rows`` rows, sizes within one."""
    bounds = [num_rows * j // parts for j in range(parts + 1)]
    return [(bounds[j], bounds[j + 1] - bounds[j]) for j in range(parts)]


def spread(outputs: int, tasks: int) -> list[int]:
    """How many of ``outputs`` blocks each of ``tasks`` tasks emits (as even as can be)."""
    return [length for _, length in even_ranges(outputs, tasks)]


def split_even(block: Block, parts: int) -> Iterator[Block]:
    """``block`` as ``parts`` zero-copy slices of nearly equal row counts (empty ones too)."""
    for offset, length in even_ranges(block.num_rows, max(1, parts)):
        yield block.slice(offset, length)


def seeded_rng(seed: int | None, *stream: int) -> Any:
    """A generator that depends only on ``seed`` and the stream position (random if no seed)."""
    import numpy as np

    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([seed, *stream])
