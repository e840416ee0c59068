"""The stages XShards adds to a Dataset's plan: maps over partitions, one block each.

``MapShards`` is a one-to-one logical operation holding its own stage, so it fuses with its
neighbours like any map. Every XShards plan ends with a stage that ``keeps_blocks``, so the
engine never joins or cuts partitions to its target block sizes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.execution.stages.transforms import Stage, coalesce_blocks, split_large_blocks
from shardflow.engine.plan.logical import MapLike
from shardflow.engine.xshards.encoding import (
    DATAFRAME,
    META_KEY,
    OBJECTS,
    decode,
    decode_objects,
    encode,
    info_of,
    is_dataframe,
    short_type,
    type_name,
)
from shardflow.sdk.block import Block, concat_blocks, to_block
from shardflow.sdk.datasink import TaskContext


@dataclass(frozen=True, eq=False)
class MapShards(MapLike):
    """A map over XShards partitions (a logical operation that builds its own stage)."""

    stage: Any

    @property
    def name(self) -> str:
        return self.stage.name

    def make_stage(self) -> Stage:
        return self.stage


def fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class ShardStage(Stage):
    """Calls ``fn`` on each element of each partition (``per_element``), or on the list of a
    partition's elements, which it replaces with the list ``fn`` returns."""

    keeps_blocks = True

    def __init__(
        self,
        fn: Callable,
        args: Sequence[Any] = (),
        name: str = "TransformShard",
        per_element: bool = True,
        python_heavy: bool = False,
    ):
        self.fn = fn
        self.args = tuple(args)
        self.name = name
        self.per_element = per_element
        self.python_heavy = python_heavy

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for block in blocks:
            elements = decode(block)
            if self.per_element:
                out = [self.fn(element, *self.args) for element in elements]
            else:
                out = list(self.fn(elements, *self.args))
            yield encode(out)


class KeepStage(Stage):
    """Passes partitions through unchanged (after a read, so they are not cut)."""

    keeps_blocks = True

    def __init__(self, name: str = "XShards"):
        self.name = name

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        yield from blocks


class FromDatasetStage(Stage):
    """Makes a Dataset's blocks partitions: cut to the block sizes the Dataset would have
    used, then kept, so maps fused after it see the same partitions as a materialized run."""

    keeps_blocks = True
    name = "ToXShards"

    def __init__(self, min_bytes: int, max_bytes: int):
        self.min_bytes, self.max_bytes = min_bytes, max_bytes

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        yield from split_large_blocks(coalesce_blocks(blocks, self.min_bytes), self.max_bytes)


class ToDatasetStage(Stage):
    """Turns partitions into Dataset blocks: DataFrames and dicts of arrays become rows."""

    name = "ToDataset"

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for block in blocks:
            out = partition_to_rows(block)
            if out is not None:
                yield out


def partition_to_rows(block: pa.Table) -> pa.Table | None:
    """A Dataset block of a partition's rows (None for a partition with no elements)."""
    info = info_of(block)
    if info.kind != OBJECTS:
        return _plain_frame(block)  # a DataFrame's or a dict of arrays' columns, as they are
    parts = [element_to_block(e) for e in decode_objects(block)]
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else concat_blocks(parts)


def _plain_frame(block: pa.Table) -> pa.Table:
    """A frame block without pandas' index columns and metadata (zero-copy)."""
    metadata = block.schema.metadata or {}
    index_columns: list[str] = []
    if b"pandas" in metadata:
        pandas_meta = json.loads(metadata[b"pandas"])
        index_columns = [c for c in pandas_meta.get("index_columns", []) if isinstance(c, str)]
    kept = {k: v for k, v in metadata.items() if k not in (b"pandas", META_KEY)}
    return block.drop_columns(index_columns).replace_schema_metadata(kept or None)


def element_to_block(element: Any) -> pa.Table | None:
    """The rows of one element: a DataFrame, a dict of arrays, an ndarray (column ``data``)
    or an Arrow table."""
    if isinstance(element, pa.Table):
        return element
    if is_dataframe(element):
        return to_block(element)
    if isinstance(element, np.ndarray) and element.ndim:
        return to_block({"data": element})
    if isinstance(element, dict) and element and all(isinstance(k, str) for k in element):
        return to_block(element)
    raise TypeError(
        "to_dataset() turns shards of pandas DataFrames, dicts of numpy arrays or numpy arrays "
        f"into rows; this XShards holds {short_type(type_name(element))} shards. Use "
        "transform_shard to make them one of those first."
    )


def element_types(blocks_types: Sequence[tuple[int, list[str]]], what: str) -> str | None:
    """The one element type of all partitions, or None when there is no element.

    Raises:
        TypeError: naming the first two partitions whose elements differ in type.
    """
    first: tuple[int, str] | None = None
    for index, types in blocks_types:
        for name in types:
            if first is None:
                first = (index, name)
            elif name != first[1]:
                raise TypeError(
                    f"{what}: the shards of this XShards have different types: partition "
                    f"{first[0]} holds {short_type(first[1])} and partition {index} holds "
                    f"{short_type(name)}. A function given to transform_shard must return the "
                    "same type for every shard."
                )
    return None if first is None else first[1]


def is_frame_type(name: str | None) -> bool:
    return name == DATAFRAME


def select_key(element: Any, key: Any) -> Any:
    """``element[key]``, with Orca's errors."""
    from shardflow.engine.xshards.errors import XShardsKeyError, XShardsTypeError

    if not hasattr(element, "__getitem__"):
        raise XShardsTypeError(
            "No selection operation available for this XShards: its shards are "
            f"{type(element).__name__}, which cannot be indexed."
        )
    try:
        return element[key]
    except Exception as exc:
        raise XShardsKeyError(
            f"Invalid key for this XShards: {key!r} is not a key of a shard of type "
            f"{type(element).__name__} ({type(exc).__name__}: {exc})."
        ) from exc
