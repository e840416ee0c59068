"""Stages that run a user function: ``map_batches``, ``map``, ``flat_map`` and ``filter``.

A callable class is constructed by :meth:`UDFStage.setup`, once per actor, and the instance
then serves every batch the actor receives (engine/execution/operators/actor_map.py). Functions run
in tasks. ``async def`` functions and async generators run on an event loop in a background
thread, several inputs at a time, with results in input order (engine/execution/stages/async_udf.py).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.api.context import current_pandas_conversion
from shardflow.engine.execution.errors import wrap_user_exception
from shardflow.engine.execution.stages.async_udf import (
    ASYNC_BATCH_CONCURRENCY,
    ASYNC_ROW_CONCURRENCY,
    EventLoopThread,
    call_to_list,
    is_async_callable,
)
from shardflow.sdk.block import Block, block_to_batch, block_to_rows, rows_to_block, to_block
from shardflow.sdk.datasink import TaskContext


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

    def setup(self) -> None:
        """Prepare state kept across tasks (an actor's instance of a callable class)."""

    def teardown(self) -> None:
        """Release what ``setup`` made."""


class UDFStage(Stage):
    """A stage calling ``fn`` (a function, or a class constructed once per actor)."""

    def __init__(
        self,
        fn: Callable,
        name: str,
        fn_args: Sequence[Any] = (),
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: Sequence[Any] = (),
        fn_constructor_kwargs: dict[str, Any] | None = None,
    ):
        self.fn = fn
        self.name = name
        self.fn_args = tuple(fn_args)
        self.fn_kwargs = dict(fn_kwargs or {})
        self.ctor_args = tuple(fn_constructor_args)
        self.ctor_kwargs = dict(fn_constructor_kwargs or {})
        self._instance: Any = None
        self._loop: EventLoopThread | None = None
        # Captured where the plan is made (the driver), used where the batches are made.
        self.pandas = current_pandas_conversion()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_instance"] = None
        state["_loop"] = None
        return state

    @property
    def is_class(self) -> bool:
        return isinstance(self.fn, type)

    def setup(self) -> None:
        if self.is_class and self._instance is None:
            self._instance = self._construct()
        if self._loop is None and is_async_callable(self._instance or self.fn):
            self._loop = EventLoopThread()

    def teardown(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self._instance = None

    def _construct(self) -> Any:
        try:
            return self.fn(*self.ctor_args, **self.ctor_kwargs)
        except Exception as exc:
            where = f"{self.name} (constructor of {self.fn.__name__})"
            raise wrap_user_exception(where, exc) from exc

    def _callable(self) -> Callable:
        """The actor's instance; outside actors, a class is constructed once per task."""
        if self._instance is not None:
            return self._instance
        return self._construct() if self.is_class else self.fn

    @contextlib.contextmanager
    def _event_loop(self) -> Iterator[EventLoopThread]:
        if self._loop is not None:
            yield self._loop
            return
        loop = EventLoopThread()
        try:
            yield loop
        finally:
            loop.close()

    def _call(self, fn: Callable, item: Any) -> Any:
        try:
            return fn(item, *self.fn_args, **self.fn_kwargs)
        except Exception as exc:
            raise wrap_user_exception(self.name, exc) from exc

    def _map_async(
        self, fn: Callable, items: Iterator[Any], limit: int, flat: bool = False
    ) -> Iterator[Any]:
        """Per input, the list of ``fn``'s outputs (a flat function's rows), in input order."""
        args, kwargs = self.fn_args, self.fn_kwargs

        async def apply(item: Any) -> list[Any]:
            if flat and not inspect.isasyncgenfunction(_call_target(fn)):
                return list(await fn(item, *args, **kwargs))
            return await call_to_list(fn, item, *args, **kwargs)

        with self._event_loop() as loop:
            try:
                yield from loop.map_ordered(apply, items, limit)
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc


def _call_target(fn: Any) -> Any:
    return fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", fn)  # noqa: B004


class BatchMapStage(UDFStage):
    """``map_batches``: slice or combine blocks into batches, call ``fn``, collect its output."""

    def __init__(
        self,
        fn: Callable,
        name: str,
        batch_size: int | None,
        batch_format: str,
        fn_args: Sequence[Any] = (),
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: Sequence[Any] = (),
        fn_constructor_kwargs: dict[str, Any] | None = None,
        zero_copy_batch: bool = False,
    ):
        super().__init__(fn, name, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        self.batch_size = batch_size
        self.batch_format = batch_format
        self.zero_copy_batch = zero_copy_batch

    @property
    def fn_constructor_args(self) -> tuple:
        return self.ctor_args

    @property
    def fn_constructor_kwargs(self) -> dict[str, Any]:
        return self.ctor_kwargs

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = self._callable()
        batches = self._batches(blocks)
        if is_async_callable(fn):
            for outputs in self._map_async(fn, batches, ASYNC_BATCH_CONCURRENCY):
                for item in outputs:
                    yield self._output(item)
            return
        for batch in batches:
            result = self._call(fn, batch)
            if inspect.isgenerator(result):
                try:
                    for item in result:
                        yield self._output(item)
                except Exception as exc:
                    raise wrap_user_exception(self.name, exc) from exc
            else:
                yield self._output(result)

    def _batches(self, blocks: Iterator[Block]) -> Iterator[Any]:
        from shardflow.engine.execution.stages.transforms import auto_batch_size, rebatch_blocks

        batch_size = self.batch_size
        if batch_size == "auto":
            blocks, batch_size = auto_batch_size(blocks)
        for block in rebatch_blocks(blocks, batch_size):
            batch = block_to_batch(block, self.batch_format, self.pandas)
            if not self.zero_copy_batch and self.batch_format == "numpy":
                batch = {k: _writable(v) for k, v in batch.items()}
            yield batch

    def _output(self, result: Any) -> Block:
        try:
            return to_block(result)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise ValueError(f"{self.name}: {describe_bad_batch(result, exc)}") from None


def describe_bad_batch(result: Any, error: BaseException) -> str:
    """Why ``result``, returned by a ``map_batches`` function, is not a batch, and what to do."""
    expected = (
        "The function must return a pyarrow.Table, a pandas.DataFrame or a dict of column "
        "name to an array with one value per row"
    )
    if isinstance(result, Mapping) and result:
        lengths = {}
        for name, values in result.items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
                return (
                    f"{expected}; column {name!r} is a single {type(values).__name__}, not an "
                    f"array. Return one value per row, e.g. {{{name!r}: np.full(n, value)}}."
                )
            lengths[name] = len(values)
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{name!r}: {n}" for name, n in lengths.items())
            return (
                f"{expected}; the columns it returned have different lengths ({shown} values). "
                "Every column of a batch must have one value per row: return columns of equal "
                "length (a batch may have fewer or more rows than it was given)."
            )
    if isinstance(result, Mapping) or hasattr(result, "columns"):
        return f"{expected}; converting what it returned failed: {type(error).__name__}: {error}"
    return f"{expected}; it returned {type(result).__name__}."


#: Row functions see a block's rows at most this many rows and about this many Arrow bytes at
#: a time. As Python objects, rows take many times their Arrow size (a dict per row, an
#: object per value: ~30x for rows of two integers): a block of a million rows held that way
#: took ~500 MB in each worker, far beyond the memory budget, which counts blocks only. Each
#: slice's rows go back to Arrow before the next slice is converted, and the fused transform
#: joins the small outputs into blocks of the target size.
ROW_SLICE_ROWS = 4096
ROW_SLICE_BYTES = 1 << 20


def row_slices(blocks: Iterator[Block]) -> Iterator[Block]:
    """The input blocks cut into zero-copy slices of at most ``ROW_SLICE_ROWS`` rows and
    about ``ROW_SLICE_BYTES`` (one row at least), for stages that turn rows into Python
    objects."""
    for block in blocks:
        rows = block.num_rows
        per_row = max(1, block.nbytes // max(1, rows))
        step = max(1, min(ROW_SLICE_ROWS, ROW_SLICE_BYTES // per_row))
        if rows <= step:
            yield block
            continue
        for offset in range(0, rows, step):
            yield block.slice(offset, step)


def _writable(array: Any) -> Any:
    if isinstance(array, np.ndarray) and not array.flags.writeable:
        return array.copy()
    return array


class RowMapStage(UDFStage):
    """``map``: one output row per input row."""

    python_heavy = True

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = self._callable()
        for block in row_slices(blocks):
            rows = block_to_rows(block)
            if is_async_callable(fn):
                out = [r[0] for r in self._map_async(fn, iter(rows), ASYNC_ROW_CONCURRENCY)]
            else:
                out = [self._call(fn, row) for row in rows]
            for row in out:
                if not isinstance(row, Mapping):
                    raise ValueError(
                        f"{self.name}: the function must return a dict of column name to value "
                        f"for each row; it returned {type(row).__name__}. Wrap other values, "
                        "e.g. return {'item': value}."
                    )
            yield rows_to_block(out)


class FlatMapStage(UDFStage):
    """``flat_map``: any number of output rows per input row."""

    python_heavy = True

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = self._callable()
        for block in row_slices(blocks):
            out: list[Any] = []
            rows = block_to_rows(block)
            if is_async_callable(fn):
                for produced in self._map_async(fn, iter(rows), ASYNC_ROW_CONCURRENCY, flat=True):
                    out.extend(self._rows_of(produced))
            else:
                for row in rows:
                    out.extend(self._rows_of(self._call(fn, row)))
            yield rows_to_block(out)

    def _rows_of(self, produced: Any) -> list[Any]:
        """The rows one call returned, checked: a list (any iterable) of dicts."""
        if isinstance(produced, Mapping) or not isinstance(produced, Iterable):
            error = ValueError if isinstance(produced, Mapping) else TypeError
            raise error(
                f"{self.name}: the function must return a list of rows (dicts of column name "
                f"to value); it returned {type(produced).__name__}."
            )
        rows = list(produced)
        for item in rows:
            if not isinstance(item, Mapping):
                raise ValueError(
                    f"{self.name}: each row the function returns must be a dict of column "
                    f"name to value; it returned a {type(item).__name__}."
                )
        return rows


class RowFilterStage(UDFStage):
    """``filter`` with a Python predicate over rows."""

    python_heavy = True

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        fn = self._callable()
        for block in row_slices(blocks):
            rows = block_to_rows(block)
            if is_async_callable(fn):
                mask = [bool(r[0]) for r in self._map_async(fn, iter(rows), ASYNC_ROW_CONCURRENCY)]
            else:
                mask = [bool(self._call(fn, row)) for row in rows]
            yield block.filter(pa.array(mask, type=pa.bool_())) if mask else block
