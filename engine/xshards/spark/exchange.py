"""``repartition`` and ``partition_by`` of XShards on Spark, as Spark shuffles.

The driver plans from the shards' types and lengths (one Spark job that reads no data back),
with the same cuts as the engine backends (engine/xshards/exchange.py): a first
``mapPartitionsWithIndex`` cuts every shard into pieces keyed by their output partition and
their place in the data, ``partitionBy`` moves them, and a last ``mapPartitions`` puts each
output partition's pieces back in order and joins them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from shardflow.engine.xshards.encoding import DATAFRAME, short_type
from shardflow.engine.xshards.errors import XShardsTypeError
from shardflow.engine.xshards.exchange import (
    MERGEABLE,
    balanced_bounds,
    concat_items,
    hash_destinations,
    item_length,
    slice_element,
)
from shardflow.engine.xshards.spark.errors import guarded, guarded_with_index
from shardflow.engine.xshards.stages import element_types

# A cut of one shard: (row in its partition, start, stop, output partition); start and stop
# are None when the shard moves whole.
Cut = tuple[int, Any, Any, int]


def repartition_rdd(xshards: Any, num: int) -> Any:
    """The RDD of ``xshards``' shards cut into ``num`` partitions."""
    infos = xshards._element_facts()
    family = element_types([(i, info.types) for i, info in enumerate(infos)], "repartition")
    sc = xshards.rdd.context
    if family is None:
        return sc.parallelize([], num)
    mergeable = family in MERGEABLE and all(n is not None for i in infos for n in i.lens)
    cuts = _record_cuts(infos, num) if mergeable else _element_cuts(infos, num)
    return _shuffle(xshards.rdd, _CutPartition(cuts), num, family if mergeable else None)


def _element_cuts(infos: list[Any], num: int) -> list[list[Cut]]:
    located = [(k, row) for k, info in enumerate(infos) for row in range(info.count)]
    bounds = balanced_bounds(len(located), num)
    cuts: list[list[Cut]] = [[] for _ in infos]
    for dest in range(num):
        for k, row in located[bounds[dest] : bounds[dest + 1]]:
            cuts[k].append((row, None, None, dest))
    return cuts


def _record_cuts(infos: list[Any], num: int) -> list[list[Cut]]:
    total = sum(n for info in infos for n in info.lens)
    bounds = balanced_bounds(total, num)
    cuts: list[list[Cut]] = [[] for _ in infos]
    offset, dest = 0, 0
    for k, info in enumerate(infos):
        for row, length in enumerate(info.lens):
            start, end = offset, offset + length
            while start < end:
                while dest < num - 1 and start >= bounds[dest + 1]:
                    dest += 1
                stop = min(end, int(bounds[dest + 1]))
                whole = start == offset and stop == end
                piece = (None, None) if whole else (start - offset, stop - offset)
                cuts[k].append((row, *piece, dest))
                start = stop
            offset = end
    return cuts


class _CutPartition:
    """Cuts partition ``index``'s shards as planned: ``(dest, ((index, row, start), piece))``."""

    def __init__(self, cuts: list[list[Cut]]):
        self.cuts = cuts

    def __call__(self, index: int, shards: Iterable[Any]) -> Iterator[tuple]:
        items = list(shards)
        for row, start, stop, dest in self.cuts[index]:
            element = items[row]
            piece = element if start is None else slice_element(element, start, stop)
            yield dest, ((index, row, start or 0), piece)


class _HashPartition:
    """Splits each DataFrame shard by the hash of ``cols``, as the engine backends do."""

    def __init__(self, cols: list[str], num: int):
        self.cols, self.num = cols, num

    def __call__(self, index: int, shards: Iterable[Any]) -> Iterator[tuple]:
        for row, df in enumerate(shards):
            dest = hash_destinations(df, self.cols, self.num)
            for j in range(self.num):
                rows = df[dest == j]
                if len(rows):
                    yield j, ((index, row, 0), rows)


class _Gather:
    """One output partition: its pieces in the order of the data, joined when ``family``
    says they are of one mergeable type, else kept as shards."""

    def __init__(self, family: str | None):
        self.family = family

    def __call__(self, pairs: Iterable[tuple]) -> Iterator[Any]:
        pieces = [piece for _, (_, piece) in sorted(pairs, key=lambda pair: pair[1][0])]
        if self.family is None:
            yield from pieces
            return
        pieces = [piece for piece in pieces if item_length(piece)]
        if pieces:
            yield concat_items(pieces, self.family)


def _identity(dest: int) -> int:
    return dest


def _shuffle(rdd: Any, cut: Any, num: int, family: str | None) -> Any:
    keyed = rdd.mapPartitionsWithIndex(guarded_with_index(cut, "Exchange"))
    moved = keyed.partitionBy(num, _identity)
    return moved.mapPartitions(guarded(_Gather(family), "Exchange"), preservesPartitioning=True)


def partition_by_rdd(xshards: Any, cols: list[str], num: int) -> Any:
    """The rows of ``xshards``' DataFrame shards, grouped by the hash of ``cols`` into
    ``num`` partitions (an RDD)."""
    infos = xshards._element_facts()
    family = element_types([(i, info.types) for i, info in enumerate(infos)], "partition_by")
    if family is None:
        return xshards.rdd.context.parallelize([], num)
    if family != DATAFRAME:
        raise XShardsTypeError(
            "Currently only support partition by for XShards of Pandas DataFrame: "
            f"partition_by applies to XShards of pandas DataFrames; these shards hold "
            f"{short_type(family)}."
        )
    return _shuffle(xshards.rdd, _HashPartition(cols, num), num, DATAFRAME)
