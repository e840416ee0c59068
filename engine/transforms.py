"""Block transforms: the picklable work done inside map-like tasks.

Each stage maps an iterator of blocks to an iterator of blocks. Consecutive stages are fused
into one :class:`FusedTransform` that runs in a single task with no materialization between
stages. Any exception inside a stage reaches the driver naming that stage.
"""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import cloudpickle
import numpy as np
import pyarrow as pa

from shardflow.engine.errors import UserCodeError, wrap_user_exception
from shardflow.engine.refs import resolve
from shardflow.sdk.block import (
    Block,
    block_to_batch,
    block_to_rows,
    concat_blocks,
    rows_to_block,
    to_block,
)
from shardflow.sdk.datasink import TaskCancelled, TaskContext
from shardflow.sdk.datasource import ReadTask
from shardflow.sdk.expressions import ColumnNotFoundError, Expr


class Stage:
    """One step of a fused transform. ``python_heavy`` marks per-row Python work.

    ``keeps_blocks`` on the last stage of a fused transform keeps its output blocks as they
    are, neither joined nor cut to the target block sizes: XShards partitions are blocks.
    """

    name: str = "Stage"
    python_heavy: bool = False
    keeps_blocks: bool = False

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        raise NotImplementedError


def _resolve_callable(fn: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Callable:
    """Instantiate a callable class once per task, as a stateless stand-in for an actor."""
    if isinstance(fn, type):
        return fn(*args, **kwargs)
    return fn


class BatchMapStage(Stage):
    """``map_batches``: slice or combine blocks into batches, call ``fn``, collect its output."""

    def __init__(
        self,
        fn: Callable,
        name: str,
        batch_size: Optional[int],
        batch_format: str,
        fn_args: Sequence[Any] = (),
        fn_kwargs: Optional[Dict[str, Any]] = None,
        fn_constructor_args: Sequence[Any] = (),
        fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
        zero_copy_batch: bool = False,
    ):
        self.fn = fn
        self.name = name
        self.batch_size = batch_size
        self.batch_format = batch_format
        self.fn_args = tuple(fn_args)
        self.fn_kwargs = dict(fn_kwargs or {})
        self.fn_constructor_args = tuple(fn_constructor_args)
        self.fn_constructor_kwargs = dict(fn_constructor_kwargs or {})
        self.zero_copy_batch = zero_copy_batch

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = _resolve_callable(self.fn, self.fn_constructor_args, self.fn_constructor_kwargs)
        batch_size = self.batch_size
        if batch_size == "auto":
            blocks, batch_size = _auto_batch_size(blocks)
        for block in rebatch_blocks(blocks, batch_size):
            batch = block_to_batch(block, self.batch_format)
            if not self.zero_copy_batch and self.batch_format == "numpy":
                batch = {k: _writable(v) for k, v in batch.items()}
            try:
                result = fn(batch, *self.fn_args, **self.fn_kwargs)
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc
            if inspect.isgenerator(result):
                for item in result:
                    yield self._output(item)
            else:
                yield self._output(result)

    def _output(self, result: Any) -> Block:
        try:
            return to_block(result)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise ValueError(
                f"{self.name}: the function must return a pyarrow.Table, a pandas.DataFrame or a "
                f"dict of column name to numpy array (one entry per column); it returned "
                f"{type(result).__name__}. ({exc})"
            ) from exc


_AUTO_BATCH_BYTES = 8 * 1024 * 1024


def _auto_batch_size(blocks: Iterator[Block]) -> tuple:
    """Peek at the first block to size batches at about 8 MiB."""
    import itertools

    first = next(blocks, None)
    if first is None:
        return iter(()), None
    row_bytes = max(1, first.nbytes // max(1, first.num_rows))
    return itertools.chain([first], blocks), max(1, _AUTO_BATCH_BYTES // row_bytes)


def _writable(array: Any) -> Any:
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        return array.copy()
    return array


class RowMapStage(Stage):
    """``map``: one output row per input row."""

    python_heavy = True

    def __init__(self, fn: Callable, name: str, fn_args=(), fn_kwargs=None,
                 fn_constructor_args=(), fn_constructor_kwargs=None):
        self.fn, self.name = fn, name
        self.fn_args, self.fn_kwargs = tuple(fn_args), dict(fn_kwargs or {})
        self.ctor_args, self.ctor_kwargs = tuple(fn_constructor_args), dict(fn_constructor_kwargs or {})

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = _resolve_callable(self.fn, self.ctor_args, self.ctor_kwargs)
        args, kwargs = self.fn_args, self.fn_kwargs
        for block in blocks:
            try:
                rows = [fn(row, *args, **kwargs) for row in block_to_rows(block)]
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc
            for row in rows:
                if not isinstance(row, Mapping):
                    raise ValueError(
                        f"{self.name}: the function must return a dict of column name to value "
                        f"for each row; it returned {type(row).__name__}. Wrap other values, "
                        "e.g. return {'item': value}."
                    )
            yield rows_to_block(rows)


class FlatMapStage(Stage):
    """``flat_map``: any number of output rows per input row."""

    python_heavy = True

    def __init__(self, fn: Callable, name: str, fn_args=(), fn_kwargs=None,
                 fn_constructor_args=(), fn_constructor_kwargs=None):
        self.fn, self.name = fn, name
        self.fn_args, self.fn_kwargs = tuple(fn_args), dict(fn_kwargs or {})
        self.ctor_args, self.ctor_kwargs = tuple(fn_constructor_args), dict(fn_constructor_kwargs or {})

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = _resolve_callable(self.fn, self.ctor_args, self.ctor_kwargs)
        for block in blocks:
            out: List[Any] = []
            for row in block_to_rows(block):
                try:
                    produced = fn(row, *self.fn_args, **self.fn_kwargs)
                except Exception as exc:
                    raise wrap_user_exception(self.name, exc) from exc
                if isinstance(produced, Mapping) or not isinstance(produced, Iterable):
                    error = ValueError if isinstance(produced, Mapping) else TypeError
                    raise error(
                        f"{self.name}: the function must return a list of rows (dicts of "
                        f"column name to value); it returned {type(produced).__name__}."
                    )
                for item in produced:
                    if not isinstance(item, Mapping):
                        raise ValueError(
                            f"{self.name}: each row the function returns must be a dict of "
                            f"column name to value; it returned a {type(item).__name__}."
                        )
                    out.append(item)
            yield rows_to_block(out)


class RowFilterStage(Stage):
    """``filter`` with a Python predicate over rows."""

    python_heavy = True

    def __init__(self, fn: Callable, name: str, fn_args=(), fn_kwargs=None,
                 fn_constructor_args=(), fn_constructor_kwargs=None):
        self.fn, self.name = fn, name
        self.fn_args, self.fn_kwargs = tuple(fn_args), dict(fn_kwargs or {})
        self.ctor_args, self.ctor_kwargs = tuple(fn_constructor_args), dict(fn_constructor_kwargs or {})

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = _resolve_callable(self.fn, self.ctor_args, self.ctor_kwargs)
        for block in blocks:
            try:
                mask = [bool(fn(row, *self.fn_args, **self.fn_kwargs)) for row in block_to_rows(block)]
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc
            yield block.filter(pa.array(mask, type=pa.bool_())) if mask else block


class ExprFilterStage(Stage):
    """``filter`` with an engine expression, evaluated by Arrow (vectorized); one that calls
    Python code (a ``udf``) is evaluated batch by batch, its mask then applied by Arrow."""

    def __init__(self, expr: Expr, name: str):
        self.expr, self.name = expr, name

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        from shardflow.sdk.expression_eval import evaluate

        in_python = self.expr.runs_python()
        pa_expr = None if in_python else self.expr.to_pyarrow()
        for block in blocks:
            missing = self.expr.referenced_columns() - set(block.column_names)
            if missing and block.num_columns:
                raise ColumnNotFoundError(
                    f"{self.name}: the expression refers to unknown column(s) {sorted(missing)}; "
                    f"the data has columns {block.column_names}."
                )
            if not block.num_rows:
                yield block
            elif in_python:
                yield block.filter(evaluate(self.expr, block))
            else:
                yield block.filter(pa_expr)


class WriteStage(Stage):
    """Hands every block of the task to ``Datasink.write`` and emits its return value."""

    def __init__(self, datasink: Any, name: str, write_uuid: str = ""):
        self.datasink, self.name, self.write_uuid = datasink, name, write_uuid

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
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(payload)])


def _int_cell(value: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(np.array([value], dtype=np.int64))])


class _CountingIterator:
    """The blocks a datasink writes, counted; stops the write once the task is cancelled."""

    def __init__(self, blocks: Iterator[Block], ctx: TaskContext):
        self._blocks, self._ctx, self.rows, self.bytes = blocks, ctx, 0, 0

    def __iter__(self) -> "_CountingIterator":
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

    def __init__(self, fraction: float, seed: Optional[int], name: str):
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
        stages: List[Stage],
        source_name: str = "Read",
        min_block_bytes: int = 0,
        max_block_bytes: Optional[int] = None,
    ):
        self.stages = list(stages)
        self.source_name = source_name
        self.min_block_bytes = min_block_bytes
        self.max_block_bytes = max_block_bytes

    @property
    def python_heavy(self) -> bool:
        return any(s.python_heavy for s in self.stages)

    def then(self, stage: Stage) -> "FusedTransform":
        return FusedTransform(self.stages + [stage], self.source_name, self.min_block_bytes, self.max_block_bytes)

    def __call__(self, inputs: List[Any], ctx: TaskContext) -> Iterator[Block]:
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

    def names(self) -> List[str]:
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
    pending: List[Block] = []
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


def _read_inputs(inputs: List[Any]) -> Iterator[Block]:
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
    except Exception as exc:
        raise wrap_user_exception(name, exc) from exc


def rebatch_blocks(blocks: Iterable[Block], batch_size: Optional[int]) -> Iterator[Block]:
    """Yield blocks of exactly ``batch_size`` rows (the last may be smaller); None passes through.

    Slices are zero-copy; rows spanning two blocks are concatenated.
    """
    if batch_size is None:
        for block in blocks:
            yield block
        return
    pending: List[Block] = []
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


def _merge(pieces: List[Block]) -> Block:
    if len(pieces) == 1:
        return pieces[0]
    return concat_blocks(pieces).combine_chunks()
