"""Dask: ``from_dask`` (partitions become blocks) and the work of ``Dataset.to_dask``.

``from_dask`` reads one Dask partition per read task, computed where the task runs (a thread
of this process, or a Ray worker on the Ray backend), so partitions stream through the
executor under its memory budget instead of being collected first. A partition Dask already
holds (a frame persisted with Dask-on-Ray, or on a distributed cluster) is fetched from
where it lives by the task that reads it.

``to_dask`` gives one Dask partition per piece of the dataset (engine/plan/pieces.py): a
read task and the maps after it, which the Dask task that computes the partition runs, or a
block of a materialized dataset (kept in Ray's object store on the Ray backend until Dask
computes the partition).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata, block_to_batch, to_block
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require


def _is_dask_dataframe(df: Any) -> bool:
    module = type(df).__module__.split(".")[0]
    return (
        module in ("dask", "dask_expr") and hasattr(df, "to_delayed") and hasattr(df, "npartitions")
    )


class DaskDatasource(Datasource):
    """One read task per partition of a Dask DataFrame."""

    def __init__(self, df: Any):
        self._partitions = [_own_graph(part) for part in df.to_delayed(optimize_graph=True)]
        self._columns = [str(c) for c in df.columns]

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ReadTask]:
        return [
            ReadTask(_PartitionReader(part), BlockMetadata(None, None)) for part in self._partitions
        ]

    def get_name(self) -> str:
        return "FromDask"


def _own_graph(part: Any) -> Any:
    """The partition's Delayed with only the tasks it needs: a read task pickles its own
    partition's graph, not every partition's (a frame made with from_pandas holds its data
    in the graph)."""
    from dask.delayed import Delayed

    graph = part.__dask_graph__()
    cull = getattr(graph, "cull", None)
    if cull is None:
        return part
    return Delayed(part.key, dict(cull({part.key})))


class _PartitionReader:
    """Computes one partition with Dask's synchronous scheduler in the read task (the tasks
    are shardflow's parallelism), and fetches it when Dask holds it elsewhere."""

    def __init__(self, partition: Any):
        self.partition = partition

    def __call__(self) -> list[pa.Table]:
        frame = self.partition.compute(scheduler="sync")
        frame = _fetch(frame)
        return [to_block(frame)]


def _fetch(value: Any) -> Any:
    """A partition that a persisted frame holds by reference: a Ray ObjectRef (Dask-on-Ray)
    or a distributed Future."""
    kind = type(value).__name__
    if kind == "ObjectRef":
        import ray

        return ray.get(value)
    if kind == "Future" and hasattr(value, "result"):
        return value.result()
    return value


def from_dask(df: Any) -> Any:
    """Create a :class:`~shardflow.Dataset` from a `Dask DataFrame`.

    Each partition becomes a block, read by a read task of its own that computes the
    partition with Dask's synchronous scheduler where the task runs (a thread here, or a Ray
    worker on the Ray backend), so partitions stream through the pipeline under its memory
    budget and are never all collected first. The partitions of a frame persisted with
    Dask-on-Ray (``ray.util.dask.ray_dask_get``) are read from Ray's object store by the
    tasks that need them. Columns and dtypes are those :func:`from_pandas` gives the
    partitions; as in Ray Data, the index is not kept.

    Unlike Ray Data, which computes the whole frame when ``from_dask`` is called, the
    partitions are computed when the dataset runs; call ``materialize()`` to compute them
    once and keep them. A partition that shares upstream work with others (after a Dask
    shuffle or a set_index) recomputes it: ``df.persist()`` first.

    Args:
        df: A ``dask.dataframe.DataFrame``.

    Returns:
        A lazy :class:`~shardflow.Dataset` with one block per partition.

    Examples:
        >>> import dask.dataframe as dd, pandas as pd, shardflow as sf  # doctest: +SKIP
        >>> df = dd.from_pandas(pd.DataFrame({"a": range(6)}), npartitions=3)  # doctest: +SKIP
        >>> sf.from_dask(df).sum("a")  # doctest: +SKIP
        15
    """
    require("dask.dataframe", "dask", "from_dask")
    if not _is_dask_dataframe(df):
        raise TypeError(f"from_dask takes a dask.dataframe.DataFrame, got {type(df).__name__}.")
    from shardflow.engine.api.create import read_datasource

    return read_datasource(DaskDatasource(df), override_num_blocks=max(1, df.npartitions))


def dask_meta(schema: pa.Schema | None) -> Any:
    """An empty pandas DataFrame with the columns and dtypes each partition will have."""
    import pandas as pd

    if schema is None:
        return pd.DataFrame()
    return block_to_batch(schema.empty_table(), "pandas")


def to_dask(dataset: Any, meta: Any = None, verify_meta: bool = True) -> Any:
    """The work of :meth:`Dataset.to_dask` (see its docstring)."""
    dask = require("dask", "dask", "Dataset.to_dask")
    dd = require("dask.dataframe", "dask", "Dataset.to_dask")
    if not isinstance(verify_meta, bool):
        raise TypeError(f"to_dask: verify_meta must be a bool, got {verify_meta!r}.")
    from shardflow.engine.plan.pieces import pieces_of

    if meta is None:
        meta = dask_meta(dataset._arrow_schema())
    pieces = pieces_of(dataset)
    if not pieces:
        pieces = [None]
    name = f"shardflow-to-dask-{uuid.uuid4().hex}"
    partition = dask.delayed(_piece_to_frame)
    parts = [partition(piece, meta, dask_key_name=(name, i)) for i, piece in enumerate(pieces)]
    return dd.from_delayed(parts, meta=meta, verify_meta=verify_meta)


def _piece_to_frame(piece: Any, meta: Any) -> Any:
    """One Dask partition: a piece of the dataset, run where Dask computes the partition."""
    import pandas as pd

    if piece is None:
        return meta if isinstance(meta, pd.DataFrame) else pd.DataFrame()
    return piece.to_pandas()
