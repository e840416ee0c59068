"""Modin: ``from_modin`` (row partitions become blocks) and the work of ``Dataset.to_modin``.

Both go through Modin's partition API (``modin.distributed.dataframe.pandas``):
``unwrap_partitions(df, axis=0)`` gives a Modin DataFrame's row partitions as Ray object
references (Modin on Ray), Dask futures (Modin on Dask) or pandas DataFrames (Modin's Python
engine), and ``from_partitions(parts, axis=0)`` makes a DataFrame of such partitions. A
partition held by Ray or Dask is fetched by the read task that reads it, never by the driver
first; ``to_modin`` gives Modin on Ray references to pandas partitions that Ray tasks made
from the blocks in its object store.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata, block_to_batch, to_block
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require


def _partitions_api(feature: str) -> Any:
    require("modin", "modin", feature)
    import modin.distributed.dataframe.pandas as partitions

    return partitions


class ModinDatasource(Datasource):
    """One read task per row partition of a Modin DataFrame."""

    def __init__(self, parts: list[Any]):
        self._parts = parts

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ReadTask]:
        return [ReadTask(_PartitionReader(part), BlockMetadata(None, None)) for part in self._parts]

    def get_name(self) -> str:
        return "FromModin"


class _PartitionReader:
    def __init__(self, part: Any):
        self.part = part

    def __call__(self) -> list[pa.Table]:
        from shardflow.engine.api.interop.dask import _fetch

        return [to_block(_fetch(self.part))]


def from_modin(df: Any) -> Any:
    """Create a :class:`~shardflow.Dataset` from a `Modin DataFrame`.

    Each row partition becomes a block, read by a task of its own that fetches it from
    where Modin keeps it (Ray's object store with Modin on Ray, a Dask worker with Modin on
    Dask); Ray Data takes only Modin on Ray. Columns and dtypes are those
    :func:`from_pandas` gives the partitions (the index is not kept).

    Args:
        df: A ``modin.pandas.DataFrame``.

    Returns:
        A :class:`~shardflow.Dataset` with one block per row partition.

    Examples:
        >>> import modin.pandas as mpd, shardflow as sf  # doctest: +SKIP
        >>> sf.from_modin(mpd.DataFrame({"a": [1, 2, 3]})).sum("a")  # doctest: +SKIP
        6
    """
    partitions = _partitions_api("from_modin")
    if type(df).__module__.split(".")[0] != "modin" or not hasattr(df, "_query_compiler"):
        raise TypeError(f"from_modin takes a modin.pandas.DataFrame, got {type(df).__name__}.")
    from shardflow.engine.api.create import read_datasource

    parts = list(partitions.unwrap_partitions(df, axis=0))
    return read_datasource(ModinDatasource(parts), override_num_blocks=max(1, len(parts)))


def to_modin(dataset: Any) -> Any:
    """The work of :meth:`Dataset.to_modin` (see its docstring)."""
    partitions = _partitions_api("Dataset.to_modin")
    import modin.config

    on_ray = modin.config.Engine.get() == "Ray"
    from shardflow.engine.execution.refs import RayRef
    from shardflow.engine.execution.runtime import current_backend

    backend = current_backend()
    parts: list[Any] = []
    to_pandas = None
    for ref, _ in dataset._execute():
        if on_ray and isinstance(ref, RayRef):
            import ray

            to_pandas = to_pandas or ray.remote(_block_to_frame)
            parts.append(to_pandas.remote(ref.object_ref))
            continue
        frame = block_to_batch(backend.get(ref), "pandas")
        if on_ray:
            import ray

            frame = ray.put(frame)
        parts.append(frame)
    if not parts:
        schema = dataset._arrow_schema()
        empty = pa.table({}) if schema is None else schema.empty_table()
        import modin.pandas as mpd

        return mpd.DataFrame(block_to_batch(empty, "pandas"))
    return partitions.from_partitions(parts, axis=0)


def _block_to_frame(block: Any) -> Any:
    from shardflow.engine.execution.refs import resolve

    return block_to_batch(resolve(block), "pandas")
