"""Collate functions for ``iter_torch_batches``: the batch format a collate function receives.

A ``collate_fn`` turns a formatted batch into what the training step takes (tensors, padded
sequences, a custom structure). Subclass the class matching the batch format you want, as in
Ray Data's ``ray.data.collate_fn``:

- :class:`ArrowBatchCollateFn`: receives a ``pyarrow.Table`` (cheapest: no conversion first);
- :class:`NumpyBatchCollateFn`: receives a ``Dict[str, np.ndarray]``;
- :class:`PandasBatchCollateFn`: receives a ``pandas.DataFrame``.

A plain function is also accepted and receives the NumPy format. Nothing here imports torch.
"""

from __future__ import annotations

import abc
from typing import Any, Generic, TypeVar

import numpy as np

BatchT = TypeVar("BatchT")


class CollateFn(Generic[BatchT], abc.ABC):
    """A callable turning one batch into the data handed to the consumer.

    Collate functions run in the background thread that prepares batches ahead of the
    consumer; keep them free of thread-unsafe state.
    """

    @abc.abstractmethod
    def __call__(self, batch: BatchT) -> Any:
        """Convert ``batch``; the result is moved to the target device when it is a tensor,
        a sequence of tensors or a mapping of names to tensors."""


class ArrowBatchCollateFn(CollateFn["pyarrow.Table"]):
    """A collate function receiving each batch as a ``pyarrow.Table``.

    Examples:
        >>> import torch  # doctest: +SKIP
        >>> from shardflow.collate_fn import ArrowBatchCollateFn
        >>> class Plus5(ArrowBatchCollateFn):
        ...     def __call__(self, batch):
        ...         return torch.as_tensor(batch["x"].to_numpy() + 5)
    """


class NumpyBatchCollateFn(CollateFn[dict[str, np.ndarray]]):
    """A collate function receiving each batch as a dict of NumPy arrays."""


class PandasBatchCollateFn(CollateFn["pandas.DataFrame"]):
    """A collate function receiving each batch as a ``pandas.DataFrame``."""


class DefaultCollateFn(ArrowBatchCollateFn):
    """The collation ``iter_torch_batches`` applies by default: one tensor per column.

    Args:
        dtypes: A torch dtype for every column, or a dict of column name to dtype; None
            infers each column's.
        combine_chunks: Accepted as Ray Data takes it; the columns of each batch are always
            one tensor each here.
        num_workers: Accepted as Ray Data takes it (its conversion thread pool's size).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.collate_fn import DefaultCollateFn
        >>> batches = sf.range(4).iter_torch_batches(batch_size=2, collate_fn=DefaultCollateFn())
        >>> next(iter(batches))  # doctest: +SKIP
        {'id': tensor([0, 1])}
    """

    def __init__(self, dtypes: Any = None, combine_chunks: bool = False, num_workers: int = 4):
        super().__init__()
        self.dtypes = dtypes
        self.combine_chunks = combine_chunks
        self.num_workers = num_workers

    def __call__(self, batch: Any) -> Any:
        from shardflow.engine.iteration.torch_batches import ArrowToTensors, import_torch

        import_torch()
        return ArrowToTensors(self.dtypes, copy=True)(batch)


def collate_batch_format(collate_fn: Any) -> str:
    """The batch format ``collate_fn`` receives; ValueError for something not callable."""
    if isinstance(collate_fn, ArrowBatchCollateFn):
        return "pyarrow"
    if isinstance(collate_fn, PandasBatchCollateFn):
        return "pandas"
    if isinstance(collate_fn, NumpyBatchCollateFn) or callable(collate_fn):
        return "numpy"
    raise ValueError(
        f"Unsupported collate function: {type(collate_fn)}. Pass a function taking a dict of "
        "NumPy arrays, or an instance of a subclass of ArrowBatchCollateFn, NumpyBatchCollateFn "
        "or PandasBatchCollateFn (shardflow.collate_fn)."
    )
