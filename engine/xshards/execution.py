"""Running XShards plans: materializing partitions, reading what they hold, and sources
whose read tasks are planned only when the plan runs (exchanges between partitions).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.refs import RayRef, resolve
from shardflow.engine.execution.runtime import current_backend
from shardflow.engine.plan.logical import BlocksSource, LogicalPlan, ReadSource
from shardflow.engine.xshards.encoding import BlockInfo, info_from_metadata
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require

_probe = None


def materialize(dataset: Any) -> tuple[list[Any], list[BlockMetadata]]:
    """Run ``dataset`` and keep its blocks: (references, metadata), in partition order."""
    refs, metas = [], []
    for ref, meta in dataset._execute():
        refs.append(ref)
        metas.append(meta)
    return refs, metas


def blocks_dataset(refs: Sequence[Any], metas: Sequence[BlockMetadata], name: str) -> Any:
    """A Dataset over blocks already computed."""
    from shardflow.engine.api.dataset import Dataset

    return Dataset(LogicalPlan(BlocksSource(tuple(refs), name, tuple(metas))))


def source_dataset(datasource: Datasource) -> Any:
    from shardflow.engine.api.dataset import Dataset

    return Dataset(LogicalPlan(ReadSource(datasource)))


def block_infos(refs: Sequence[Any], metas: Sequence[BlockMetadata]) -> list[BlockInfo]:
    """What each partition block holds, read from its schema metadata.

    On Ray a small task per block reads it where the block lives, so no data moves.
    """
    metadatas = block_metadata(refs)
    return [info_from_metadata(m, meta.num_rows or 0) for m, meta in zip(metadatas, metas)]


def block_metadata(refs: Sequence[Any]) -> list[dict | None]:
    """The schema metadata of each block."""
    if current_backend().name != "ray":
        return [resolve(ref).schema.metadata for ref in refs]
    ray = require("ray", "ray", "XShards on the Ray backend")

    global _probe
    if _probe is None:
        _probe = ray.remote(_schema_metadata)
    return ray.get([_probe.remote(_ray_arg(ref)) for ref in refs])


def _schema_metadata(item: Any) -> dict | None:
    return resolve(item).schema.metadata


def _ray_arg(ref: Any) -> Any:
    return ref.object_ref if isinstance(ref, RayRef) else ref


class BlocksCall:
    """A read function over blocks already computed: resolves the references where the task
    runs and yields the one block ``fn(blocks, *args)`` returns."""

    def __init__(self, fn: Callable[..., pa.Table], refs: Sequence[Any], args: Sequence[Any] = ()):
        self.fn = fn
        self.refs = list(refs)
        self.args = tuple(args)

    def __call__(self) -> list[pa.Table]:
        return [self.fn([resolve(ref) for ref in self.refs], *self.args)]


def blocks_task(
    fn: Callable[..., pa.Table], refs: Sequence[Any], args: Sequence[Any] = ()
) -> ReadTask:
    return ReadTask(BlocksCall(fn, refs, args), BlockMetadata(None, None))


class DeferredSource(Datasource):
    """A source whose read tasks are planned by ``planner()`` when the plan first runs.

    The planner may run other plans first (the partitions an exchange takes in). Its tasks
    are kept for later runs on the same backend, as Spark keeps a cached RDD.
    """

    def __init__(self, name: str, planner: Callable[[], list[ReadTask]]):
        self._name = name
        self._planner = planner
        self._lock = threading.Lock()
        self._tasks: list[ReadTask] | None = None
        self._backend: str | None = None

    def get_name(self) -> str:
        return self._name

    def get_read_tasks(self, parallelism: int, **kwargs: Any) -> list[ReadTask]:
        backend = current_backend().name
        with self._lock:
            if self._tasks is None or self._backend != backend:
                self._tasks = list(self._planner())
                self._backend = backend
            return list(self._tasks)


class TaskListSource(Datasource):
    """A source of read tasks planned in advance."""

    def __init__(self, name: str, tasks: list[ReadTask]):
        self._name = name
        self._tasks = list(tasks)

    def get_name(self) -> str:
        return self._name

    def get_read_tasks(self, parallelism: int, **kwargs: Any) -> list[ReadTask]:
        return list(self._tasks)


def default_num_shards() -> int:
    """Partitions to make when none is asked for: one per CPU of the backend."""
    from shardflow.engine.xshards.spark.session import spark_session_or_none

    session = spark_session_or_none()
    if session is not None:
        return max(1, int(session.sparkContext.defaultParallelism))
    return max(1, current_backend().num_slots("thread"))


def partitions_of(dataset: Any) -> tuple[list[Any], list[BlockMetadata]]:
    """The blocks of ``dataset``: taken as they are when it is a Dataset over blocks already
    computed, else computed now."""
    plan = dataset._plan
    source = plan.source
    if isinstance(source, BlocksSource) and not plan.ops and source.metadata is not None:
        return list(source.blocks), list(source.metadata)
    return materialize(dataset)
