"""XShards on Spark: the shards are the elements of an RDD, its partitions the XShards'
partitions, and every operation is a Spark job (Orca's ``SparkXShards``).

The class keeps the API, the results and the errors of XShards on the engine backends: the
same cuts for ``repartition``, the same hash for ``partition_by``, the same checks; only where
the work runs differs. Caching follows Orca: every XShards caches its RDD (``rdd.cache()``),
and deriving another one uncaches it unless the user called ``cache()`` or ``to_lazy()``; the
Spark cache is released only once the derived XShards has been computed, so it starts from
the computed partitions instead of recomputing them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from shardflow.engine.xshards.encoding import BlockInfo, length_of, seq_len, type_name
from shardflow.engine.xshards.errors import XShardsTypeError
from shardflow.engine.xshards.shards import XShards, positive_int
from shardflow.engine.xshards.spark.errors import guarded, run_job
from shardflow.engine.xshards.spark.session import spark_session
from shardflow.engine.xshards.stages import ShardStage, element_types, fn_name, select_key


class SparkBackedXShards(XShards):
    """An XShards whose partitions are the partitions of a Spark RDD of shards.

    Made by the readers, ``XShards.partition`` and ``XShards.load_pickle`` when XShards run
    on Spark (``init_orca_context(backend="spark")``), or directly from an RDD:
    ``XShards(rdd)`` (Orca's ``SparkXShards(rdd)``).

    Attributes:
        rdd: The RDD of shards.
    """

    def __init__(
        self,
        rdd: Any,
        transient: bool = False,
        class_name: str | None = None,
        *,
        _lazy: bool = False,
        _name: str = "SparkXShards",
    ):
        if not hasattr(rdd, "mapPartitions"):
            raise XShardsTypeError(f"SparkXShards needs an RDD, got {type(rdd).__name__}.")
        self.rdd = rdd
        self._name = _name
        self._lazy_mode = _lazy or transient
        self._marked = not self._lazy_mode
        self._user_caching = bool(rdd.is_cached)
        self._class = class_name
        self._pending: list[_Release] = []  # parents' caches to release once computed
        if self._marked:
            rdd.cache()
        weakref.finalize(self, _release_all, self._pending)

    # -- lineage and caching ------------------------------------------------------------

    def _child(self, rdd: Any, name: str, *, transient: bool = False, keep: bool = False) -> Any:
        child = SparkBackedXShards(rdd, transient=transient, _lazy=self._lazy_mode, _name=name)
        if not transient and not keep:
            self._release_to([child])
        return child._eager()

    def _release_to(self, children: list[Any]) -> None:
        """Orca's ``_uncache`` of a parent: unmarked now, its Spark cache released when all
        ``children`` have been computed (or are gone)."""
        if self._user_caching:
            return
        if self._marked and self.rdd.is_cached:
            token = _Release(self.rdd, len(children))
            for child in children:
                child._pending.append(token)
        self._marked = False

    def _computed(self) -> None:
        """After a job that computed this XShards' RDD: parents' caches are not needed."""
        if self._marked:
            _release_all(self._pending)

    def _run(self, job: Callable[[], Any]) -> Any:
        result = run_job(job)
        self._computed()
        return result

    def cache(self) -> SparkBackedXShards:
        """Keep the partitions once computed (Spark's ``rdd.cache()``)."""
        self._user_caching = True
        self._marked = True
        self.rdd.cache()
        return self

    def uncache(self) -> SparkBackedXShards:
        """Release the kept partitions (``rdd.unpersist()``)."""
        self._user_caching = False
        self._marked = False
        if self.rdd.is_cached:
            try:
                self.rdd.unpersist()
            except Exception:  # the SparkContext is gone: nothing is kept anyway
                pass
        return self

    def compute(self) -> SparkBackedXShards:
        """Compute the partitions now (Orca's ``compute``: ``rdd.count()``)."""
        self._run(self.rdd.count)
        return self

    def _eager(self) -> SparkBackedXShards:
        from shardflow.engine.xshards.orca_context import OrcaContext

        if OrcaContext._eager_mode and self._marked:
            self.compute()
        return self

    @classmethod
    def lazy(cls, rdd: Any, class_name: str | None = None) -> SparkBackedXShards:
        """An XShards over ``rdd`` that computes lazily (Orca's ``SparkXShards.lazy``)."""
        return SparkBackedXShards(rdd, transient=True, class_name=class_name).to_lazy()

    # -- transformations ----------------------------------------------------------------

    def _map(self, stage: ShardStage, transient: bool = False) -> Any:
        rdd = self.rdd.mapPartitions(guarded(_StageOnPartition(stage), stage.name))
        return self._child(rdd, stage.name, transient=transient)

    def _map_keep_parent(self, fn: Callable[..., Any], args: tuple, name: str) -> Any:
        stage = ShardStage(fn, args, name)
        rdd = self.rdd.mapPartitions(guarded(_StageOnPartition(stage), name))
        return self._child(rdd, name, keep=True)

    def _select_item(self, index: int) -> Any:
        stage = ShardStage(select_key, (index,), f"split[{index}]")
        rdd = self.rdd.mapPartitions(guarded(_StageOnPartition(stage), stage.name))
        return self._child(rdd, stage.name, keep=True)

    def repartition(self, num_partitions: int) -> Any:
        from shardflow.engine.xshards.spark.exchange import repartition_rdd

        num = positive_int(num_partitions, "num_partitions")
        return self._child(repartition_rdd(self, num), "Repartition")

    def partition_by(self, cols: Any, num_partitions: int | None = None) -> Any:
        from shardflow.engine.xshards.shards import column_list
        from shardflow.engine.xshards.spark.exchange import partition_by_rdd

        columns = column_list(cols, "partition_by")
        num = self.num_partitions() if num_partitions is None else num_partitions
        num = positive_int(num, "num_partitions")
        return self._child(partition_by_rdd(self, columns, num), "PartitionBy")

    def zip(self, other: Any) -> Any:
        from shardflow.engine.xshards.exchange import check_zip_counts

        if not isinstance(other, SparkBackedXShards):
            raise XShardsTypeError(
                f"other should be a SparkXShards (an XShards on Spark); got {type(other).__name__}."
            )
        check_zip_counts(self._shard_counts(), other._shard_counts())
        child = SparkBackedXShards(self.rdd.zip(other.rdd), _lazy=self._lazy_mode, _name="Zip")
        self._release_to([child])
        other._release_to([child])
        return child._eager()

    # -- results ------------------------------------------------------------------------

    def get_partitions(self) -> list[list[Any]]:
        partitions = self._run(self.rdd.glom().collect)
        element_types(
            [(i, [type_name(e) for e in part]) for i, part in enumerate(partitions)], "collect()"
        )
        return partitions

    def num_partitions(self) -> int:
        return int(self.rdd.getNumPartitions())

    def take(self, n: int) -> list[Any]:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise XShardsTypeError(f"n must be a non-negative int, got {n!r}.")
        return list(self._run(lambda: self.rdd.take(n)))

    def _element_facts(self) -> list[BlockInfo]:
        facts = self._run(self.rdd.mapPartitions(guarded(_facts, "XShards")).collect)
        return [BlockInfo("objects", *fact) for fact in facts]

    def _collect_map(self, stage: ShardStage) -> list[Any]:
        return self._run(
            self.rdd.mapPartitions(guarded(_StageOnPartition(stage), stage.name)).collect
        )

    def save_pickle(
        self,
        path: str,
        batchSize: int = 10,
        *,
        storage_options: dict | None = None,
        filesystem: Any = None,
    ) -> SparkBackedXShards:
        from shardflow.engine.xshards.spark.pickle_files import save_pickle_from_spark

        save_pickle_from_spark(self, path, batchSize, storage_options, filesystem)
        return self

    def to_dataset(self) -> Any:
        """The shards' rows as a Dataset, built on the driver from the collected partitions."""
        from shardflow.engine.xshards.encoding import encode
        from shardflow.engine.xshards.execution import blocks_dataset
        from shardflow.engine.xshards.stages import MapShards, ToDatasetStage
        from shardflow.sdk.block import BlockMetadata

        blocks = [encode(part) for part in self.get_partitions()]
        metas = [BlockMetadata.of(b) for b in blocks]
        return blocks_dataset(blocks, metas, "FromSpark")._with(MapShards(ToDatasetStage()))

    def to_spark_df(self) -> Any:
        """The DataFrame shards as one Spark DataFrame (through Arrow, partition by partition)."""
        from shardflow.engine.xshards.spark.frames import shards_to_spark_df

        self._require_frames("to_spark_df")
        return shards_to_spark_df(self)

    def _sort_values(self, keys: list[str], ascending: list[bool]) -> Any:
        from shardflow.engine.xshards.spark.frames import sort_frames

        return sort_frames(self, keys, ascending)

    def _group_by(self, keys: list[str], pairs: list[tuple[str, str]], join: bool) -> Any:
        import pandas as pd

        from shardflow.engine.xshards.frame_ops import join_frame
        from shardflow.engine.xshards.spark.frames import group_frames

        shards = group_frames(self, keys, pairs)
        if not join:
            return shards
        table = pd.concat(shards.collect(), ignore_index=True)
        return self._map_keep_parent(join_frame, (table, keys), "group_by(join)")

    # The engine's internals do not exist here.
    @property
    def _ds(self) -> Any:
        raise AttributeError("An XShards on Spark has no engine Dataset; use to_dataset().")

    def __repr__(self) -> str:
        return f"SparkXShards(num_partitions={self.num_partitions()}, last={self._name})"


class _StageOnPartition:
    """A ShardStage applied to one partition's shards inside a Spark task."""

    def __init__(self, stage: ShardStage):
        self.stage = stage

    def __call__(self, shards: Iterable[Any]) -> Iterator[Any]:
        stage = self.stage
        if stage.per_element:
            for shard in shards:
                yield stage.fn(shard, *stage.args)
        else:
            yield from stage.fn(list(shards), *stage.args)


def _facts(shards: Iterable[Any]) -> Iterator[tuple]:
    items = list(shards)
    yield (
        [type_name(e) for e in items],
        [length_of(e) for e in items],
        [seq_len(e) for e in items],
    )


class _Release:
    """A parent's cached RDD, unpersisted when the last XShards derived from it no longer
    needs it."""

    def __init__(self, rdd: Any, holders: int):
        self.rdd, self.holders = rdd, holders

    def done(self) -> None:
        self.holders -= 1
        if self.holders == 0:
            try:
                self.rdd.unpersist()
            except Exception:  # the SparkContext is gone
                pass


def _release_all(tokens: list[_Release]) -> None:
    while tokens:
        tokens.pop().done()


# -- making XShards on Spark ----------------------------------------------------------------


def from_shards(shards: list[Any], num: int, name: str) -> SparkBackedXShards:
    """Local shards, one per slice, as an XShards on Spark (``sc.parallelize``)."""
    sc = spark_session().sparkContext
    return SparkBackedXShards(sc.parallelize(shards, num), _name=name)


def from_partitions(partitions: list[list[Any]], name: str) -> SparkBackedXShards:
    """Local partitions (lists of shards) as an XShards on Spark, partition for partition."""
    sc = spark_session().sparkContext
    rdd = sc.parallelize(partitions, max(1, len(partitions))).flatMap(_identity_list)
    return SparkBackedXShards(rdd, _name=name)


def _identity_list(partition: list[Any]) -> list[Any]:
    return partition


def from_calls(calls: list[Callable[[], list[Any]]], name: str) -> SparkBackedXShards:
    """One partition per call; each call runs in a Spark task and returns its shards."""
    sc = spark_session().sparkContext
    rdd = sc.parallelize(calls, max(1, len(calls))).mapPartitions(guarded(_run_calls, name))
    return SparkBackedXShards(rdd, _name=name)


def _run_calls(calls: Iterable[Callable[[], list[Any]]]) -> Iterator[Any]:
    for call in calls:
        yield from call()


class _ReadGroup:
    def __init__(self, reader: Any, files: list[str]):
        self.reader, self.files = reader, files

    def __call__(self) -> list[Any]:
        import pyarrow as pa

        out = self.reader(self.files)
        return [out.to_pandas() if isinstance(out, pa.Table) else out]


def read_groups(reader: Any, groups: list[list[str]]) -> SparkBackedXShards:
    """Files read by ``reader``, one partition per group, in Spark tasks."""
    name = f"Read{reader.fmt.upper() if reader.fmt != 'parquet' else 'Parquet'}"
    return from_calls([_ReadGroup(reader, group) for group in groups], name)


__all__ = ["SparkBackedXShards", "fn_name"]
