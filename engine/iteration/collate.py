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
