"""Block transforms: the picklable work done inside map-like tasks.

Each stage maps an iterator of blocks to an iterator of blocks (the stages of user functions
are in engine/execution/stages/udf.py). Consecutive stages are fused
into one :class:`FusedTransform` that runs in a single task with no materialization between
stages. Any exception inside a stage reaches the driver naming that stage.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa

from shardflow.engine.execution.errors import UserCodeError, wrap_task_exception
from shardflow.engine.execution.refs import resolve
from shardflow.engine.execution.stages.udf import (  # noqa: F401  (the stages of user functions)
    BatchMapStage,
    FlatMapStage,
    RowFilterStage,
    RowMapStage,
    Stage,
    UDFStage,
)
from shardflow.sdk.block import Block, concat_blocks
from shardflow.sdk.datasink import TaskCancelled, TaskContext
from shardflow.sdk.datasource import ReadTask
from shardflow.sdk.expressions import ColumnNotFoundError, Expr

_AUTO_BATCH_BYTES = 8 * 1024 * 1024


def auto_batch_size(blocks: Iterator[Block]) -> tuple:
    """Peek at the first block to size batches at about 8 MiB."""
    import itertools

    first = next(blocks, None)
    if first is None:
        return iter(()), None
    row_bytes = max(1, first.nbytes // max(1, first.num_rows))
    return itertools.chain([first], blocks), max(1, _AUTO_BATCH_BYTES // row_bytes)


class ExprFilterStage(Stage):
    """``filter`` with an engine expression, evaluated by Arrow (vectorized); one that calls
    Python code (a ``udf``) is evaluated batch by batch, its mask then applied by Arrow."""

    def __init__(self, expr: Expr, name: str, executions: dict[str, int] | None = None):
        self.expr, self.name = expr, name
        # The execution's number for each random() in the expression (its seeds).
        self.executions = executions or {}

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        from shardflow.sdk.expression_eval import RowPosition, evaluate

        in_python = self.expr.runs_python()
        pa_expr = None if in_python else self.expr.to_pyarrow()
        rows_before = 0
        for block_idx, block in enumerate(blocks):
            missing = self.expr.referenced_columns() - set(block.column_names)
            if missing and block.num_columns:
                raise ColumnNotFoundError(
                    f"{self.name}: the expression refers to unknown column(s) {sorted(missing)}; "
                    f"the data has columns {block.column_names}."
                )
            if not block.num_rows:
                yield block
            elif in_python:
                position = RowPosition(ctx.task_idx, rows_before, block_idx, self.executions)
                yield block.filter(evaluate(self.expr, block, position=position))
            else:
                yield block.filter(pa_expr)
            rows_before += block.num_rows


class WriteStage(Stage):
    """Hands every block of the task to ``Datasink.write`` and emits its return value.

    ``records_inputs`` (resumable writes) asks the task to tell the sink what it reads
    (``TaskContext.input_pieces``)."""

    def __init__(
        self, datasink: Any, name: str, write_uuid: str = "", records_inputs: bool = False
    ):
        self.datasink, self.name, self.write_uuid = datasink, name, write_uuid
        self.records_inputs = records_inputs

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        ctx.write_uuid = self.write_uuid
        counted = _CountingIterator(blocks, ctx)
        result = self.datasink.write(counted, ctx)
        yield pa.table(
            {
                "write_return": _binary_cell(cloudpickle.dumps(result)),
                "num_rows": _int_cell(counted.rows),
                "size_bytes": _int_cell(counted.bytes),
            }
        )


def _binary_cell(payload: bytes) -> pa.Array:
    """A one-element binary array, built from buffers (``pa.array`` would import pandas)."""
    offsets = np.array([0, len(payload)], dtype=np.int32)
    return pa.Array.from_buffers(
        pa.binary(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(payload)]
    )


def _int_cell(value: int) -> pa.Array:
    return pa.Array.from_buffers(
        pa.int64(), 1, [None, pa.py_buffer(np.array([value], dtype=np.int64))]
    )


class _CountingIterator:
    """The blocks a datasink writes, counted; stops the write once the task is cancelled."""

    def __init__(self, blocks: Iterator[Block], ctx: TaskContext):
        self._blocks, self._ctx, self.rows, self.bytes = blocks, ctx, 0, 0

    def __iter__(self) -> _CountingIterator:
        return self

    def __next__(self) -> Block:
        if self._ctx.cancelled():
            raise TaskCancelled(f"{self._ctx.op_name}: the write was cancelled")
        block = next(self._blocks)
        self.rows += block.num_rows
        self.bytes += block.nbytes
        return block


def decode_write_returns(blocks: Iterable[Block]) -> tuple:
    """(returns, rows, bytes) from the blocks a write emitted."""
    returns, rows, size = [], 0, 0
    for block in blocks:
        for payload, n, b in zip(
            block.column("write_return").to_pylist(),
            block.column("num_rows").to_pylist(),
            block.column("size_bytes").to_pylist(),
        ):
            returns.append(pickle.loads(payload))
            rows += n
            size += b
    return returns, rows, size


class RandomSampleStage(Stage):
    """``random_sample``: keep each row with probability ``fraction``.

    With a seed, the rows kept depend only on the seed and the position of the block in the
    stream, so runs (and backends) agree.
    """

    def __init__(self, fraction: float, seed: int | None, name: str):
        self.fraction, self.seed, self.name = fraction, seed, name

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for number, block in enumerate(blocks):
            if self.seed is None:
                rng = np.random.default_rng()
            else:
                rng = np.random.default_rng([self.seed, ctx.task_idx, number])
            mask = rng.random(block.num_rows) < self.fraction
            yield block.filter(pa.array(mask, type=pa.bool_()))


class FusedTransform:
    """Runs stages back to back inside one task; exceptions are tagged with the stage's name.

    Output blocks are kept between ``min_block_bytes`` (small outputs of stages are joined)
    and ``max_block_bytes`` (larger ones are cut into zero-copy slices), as
    DataContext.target_min_block_size / target_max_block_size ask.
    """

    def __init__(
        self,
        stages: list[Stage],
        source_name: str = "Read",
        min_block_bytes: int = 0,
        max_block_bytes: int | None = None,
    ):
        self.stages = list(stages)
        self.source_name = source_name
        self.min_block_bytes = min_block_bytes
        self.max_block_bytes = max_block_bytes

    @property
    def python_heavy(self) -> bool:
        return any(s.python_heavy for s in self.stages)

    def setup(self) -> None:
        """Build the state kept across tasks (in an actor: construct callable classes once)."""
        for stage in self.stages:
            stage.setup()

    def teardown(self) -> None:
        for stage in self.stages:
            stage.teardown()

    def then(self, stage: Stage) -> FusedTransform:
        return FusedTransform(
            self.stages + [stage], self.source_name, self.min_block_bytes, self.max_block_bytes
        )

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        if any(getattr(stage, "records_inputs", False) for stage in self.stages):
            ctx.input_pieces = _input_pieces(inputs)
        stream = _guard(self.source_name, _read_inputs(inputs))
        for stage in self.stages:
            stream = _guard(stage.name, stage(stream, ctx))
        if self.stages and getattr(self.stages[-1], "keeps_blocks", False):
            return stream
        if self.min_block_bytes and self.stages:
            stream = coalesce_blocks(stream, self.min_block_bytes)
        if self.max_block_bytes:
            stream = split_large_blocks(stream, self.max_block_bytes)
        return stream

    def names(self) -> list[str]:
        return [s.name for s in self.stages]


def split_large_blocks(blocks: Iterator[Block], max_bytes: int) -> Iterator[Block]:
    """Cut blocks larger than ``max_bytes`` into zero-copy slices of about that size."""
    for block in blocks:
        size = block.nbytes
        if size <= max_bytes or block.num_rows <= 1:
            yield block
            continue
        pieces = -(-size // max_bytes)
        step = -(-block.num_rows // pieces)
        for offset in range(0, block.num_rows, step):
            yield block.slice(offset, step)


def coalesce_blocks(blocks: Iterator[Block], min_bytes: int) -> Iterator[Block]:
    """Join consecutive small blocks (zero-copy) until each holds at least ``min_bytes``.

    Many tiny blocks (a map_batches with small batches) would otherwise cost one downstream
    task and one scheduling round each.
    """
    pending: list[Block] = []
    size = 0
    for block in blocks:
        if not pending and block.nbytes >= min_bytes:
            yield block
            continue
        pending.append(block)
        size += block.nbytes
        if size >= min_bytes:
            yield concat_blocks(pending)
            pending, size = [], 0
    if pending:
        yield concat_blocks(pending)


def _input_pieces(inputs: list[Any]) -> list[Any] | None:
    """What the read tasks among ``inputs`` read, by identity; None when any input cannot
    tell (a block in hand, a read task of a source without input identity)."""
    pieces: list[Any] = []
    for item in inputs:
        told = item.input_pieces() if isinstance(item, ReadTask) else None
        if told is None:
            return None
        pieces.extend(told)
    return pieces


def _read_inputs(inputs: list[Any]) -> Iterator[Block]:
    for item in inputs:
        if isinstance(item, ReadTask):
            yield from item()
        else:
            yield resolve(item)


def _guard(name: str, stream: Iterator[Block]) -> Iterator[Block]:
    try:
        yield from stream
    except UserCodeError:
        raise
    except Exception as exc:  # not from a call of a user function: those are wrapped there
        raise wrap_task_exception(name, exc) from exc


def rebatch_blocks(blocks: Iterable[Block], batch_size: int | None) -> Iterator[Block]:
    """Yield blocks of exactly ``batch_size`` rows (the last may be smaller); None passes through.

    Slices are zero-copy; rows spanning two blocks are concatenated.
    """
    if batch_size is None:
        for block in blocks:
            yield block
        return
    pending: list[Block] = []
    pending_rows = 0
    for block in blocks:
        offset = 0
        while offset < block.num_rows:
            take = min(batch_size - pending_rows, block.num_rows - offset)
            pending.append(block.slice(offset, take))
            pending_rows += take
            offset += take
            if pending_rows == batch_size:
                yield _merge(pending)
                pending, pending_rows = [], 0
    if pending_rows:
        yield _merge(pending)


def _merge(pieces: list[Block]) -> Block:
    if len(pieces) == 1:
        return pieces[0]
    return concat_blocks(pieces).combine_chunks()
