"""Collate function base classes for ``iter_torch_batches`` (as ``ray.data.collate_fn``)."""

from shardflow.engine.iteration.collate import (
    ArrowBatchCollateFn,
    CollateFn,
    DefaultCollateFn,
    NumpyBatchCollateFn,
    PandasBatchCollateFn,
)

__all__ = [
    "ArrowBatchCollateFn",
    "CollateFn",
    "DefaultCollateFn",
    "NumpyBatchCollateFn",
    "PandasBatchCollateFn",
]
