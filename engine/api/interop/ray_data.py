"""Ray Data and Ray Train: ``Dataset.to_ray_data`` and ``from_ray_data``.

A ``ray.data.Dataset`` is what Ray Train's ``TorchTrainer(datasets=...)`` takes; its training
loop then reads its shard with ``ray.train.get_dataset_shard``. On the Ray backend a
shardflow dataset's blocks are already Arrow tables in Ray's object store, so
``to_ray_data`` hands their references to ``ray.data.from_arrow_refs`` and no row passes
through the driver; on the local backend each block is put into the object store as the
dataset produces it. ``from_ray_data`` takes the blocks of a Ray Data dataset by reference
the same way.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.optional import require


def _ray(feature: str) -> Any:
    ray = require("ray", "ray", feature)
    if not ray.is_initialized():
        raise RuntimeError(
            f"{feature} needs a running Ray: call ray.init() or "
            "shardflow.init(backend='ray') first."
        )
    return ray


def to_ray_data(dataset: Any) -> Any:
    """The work of :meth:`Dataset.to_ray_data` (see its docstring)."""
    ray = _ray("Dataset.to_ray_data")
    ray_data = require("ray.data", "ray", "Dataset.to_ray_data")

    from shardflow.engine.execution.refs import PicklingBlock, RayRef
    from shardflow.engine.execution.runtime import current_backend
    from shardflow.sdk.object_column import is_object_type

    known = dataset._arrow_schema(fetch_if_missing=False)
    if known is not None and any(is_object_type(t) for t in known.types):
        raise TypeError(_OBJECTS)
    backend = current_backend()
    refs = []
    for ref, _ in dataset._execute():
        if isinstance(ref, RayRef):
            refs.append(ref.object_ref)
            continue
        block = backend.get(ref)
        if isinstance(block, PicklingBlock) or any(is_object_type(t) for t in block.schema.types):
            raise TypeError(_OBJECTS)
        refs.append(ray.put(block))
    if not refs:
        schema = dataset._arrow_schema()
        refs = [ray.put(pa.table({}) if schema is None else schema.empty_table())]
    try:
        return ray_data.from_arrow_refs(refs)
    except Exception as exc:
        if "PicklingBlock" in str(exc):
            raise TypeError(_OBJECTS) from exc
        raise


_OBJECTS = (
    "to_ray_data: the dataset has a column of Python objects, which shardflow keeps in a type "
    "of its own that Ray Data cannot read; convert it to an Arrow type (map_batches) first."
)


def from_ray_data(ray_dataset: Any) -> Any:
    """Create a :class:`~shardflow.Dataset` from a ``ray.data.Dataset``.

    The Ray Data dataset runs (``materialize()``) and its blocks stay in Ray's object store:
    the shardflow dataset holds their references, with their row counts, so nothing passes
    through the driver on the Ray backend (on the local backend a block is fetched where it
    is used). Blocks Ray Data keeps as pandas DataFrames are turned into Arrow tables by Ray
    tasks, as ``ray.data.Dataset.to_arrow_refs`` does.

    Args:
        ray_dataset: A ``ray.data.Dataset``.

    Returns:
        A materialized :class:`~shardflow.Dataset` over the blocks.

    Examples:
        >>> import ray, shardflow as sf  # doctest: +SKIP
        >>> sf.from_ray_data(ray.data.range(3)).take_all()  # doctest: +SKIP
        [{'id': 0}, {'id': 1}, {'id': 2}]
    """
    ray = _ray("from_ray_data")
    ray_data = require("ray.data", "ray", "from_ray_data")
    if not isinstance(ray_dataset, ray_data.Dataset):
        raise TypeError(
            f"from_ray_data takes a ray.data.Dataset, got {type(ray_dataset).__name__}."
        )
    from shardflow.engine.api.dataset import Dataset
    from shardflow.engine.execution.refs import RayRef, SliceRef
    from shardflow.engine.plan.logical import BlocksSource, LogicalPlan

    materialized = ray_dataset.materialize()
    to_arrow = None
    blocks, metas = [], []
    for bundle in materialized.iter_internal_ref_bundles():
        arrow = bundle.schema is None or isinstance(_base_schema(bundle.schema), pa.Schema)
        for entry, piece in zip(bundle.blocks, bundle.slices):
            object_ref = entry.ref
            if not arrow:
                to_arrow = to_arrow or ray.remote(_block_to_arrow)
                object_ref = to_arrow.remote(object_ref)
            ref: Any = RayRef(object_ref)
            rows = entry.metadata.num_rows
            size = entry.metadata.size_bytes
            if piece is not None:
                ref = SliceRef(ref, piece.start_offset, piece.num_rows)
                if rows:
                    size = None if size is None else int(size * piece.num_rows / rows)
                rows = piece.num_rows
            blocks.append(ref)
            metas.append(BlockMetadata(rows, size))
    return Dataset(LogicalPlan(BlocksSource(tuple(blocks), "FromRayData", tuple(metas))))


def _base_schema(schema: Any) -> Any:
    return getattr(schema, "base_schema", schema)


def _block_to_arrow(block: Any) -> pa.Table:
    from ray.data.block import BlockAccessor

    return BlockAccessor.for_block(block).to_arrow()
