"""``from_torch``: the items of a PyTorch dataset, streamed by one read task in column ``item``.

Map-style datasets are read by index (``dataset[i]`` for i below ``len(dataset)``), iterable
ones by iterating them; items are gathered into blocks of 32 rows. torch is never imported
here: the dataset is duck-typed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardflow.sdk.block import Block, BlockMetadata, rows_to_block
from shardflow.sdk.datasource import Datasource, ReadTask

ITEMS_PER_BLOCK = 32


def _items(dataset: Any) -> Iterator[Any]:
    if hasattr(dataset, "__iter__") and not hasattr(dataset, "__getitem__"):
        yield from dataset
        return
    if hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
        for i in range(len(dataset)):
            yield dataset[i]
        return
    yield from dataset


def _read(dataset: Any) -> Iterator[Block]:
    batch: list[Any] = []
    for item in _items(dataset):
        batch.append({"item": item})
        if len(batch) == ITEMS_PER_BLOCK:
            yield rows_to_block(batch)
            batch = []
    if batch:
        yield rows_to_block(batch)


class TorchDatasource(Datasource):
    """A PyTorch ``Dataset`` or ``IterableDataset`` read in order by a single task.

    Args:
        dataset: The torch dataset (anything with ``__len__`` and ``__getitem__``, or
            iterable).
    """

    def __init__(self, dataset: Any):
        module = type(dataset).__module__ or ""
        is_torch = any(
            (getattr(base, "__module__", "") or "").startswith("torch.utils.data")
            for base in type(dataset).__mro__
        )
        if not is_torch and not module.startswith("torch"):
            raise TypeError(
                "from_torch takes a torch.utils.data.Dataset or IterableDataset, got "
                f"{type(dataset).__name__}."
            )
        self._dataset = dataset

    def get_name(self) -> str:
        return "Torch"

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, **kwargs: Any) -> list[ReadTask]:
        dataset = self._dataset
        # len() is not asked: an IterableDataset may have to be iterated to answer it.
        return [ReadTask(lambda: _read(dataset), BlockMetadata(num_rows=None, size_bytes=None))]
