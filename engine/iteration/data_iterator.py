"""DataIterator: repeatable iteration over a dataset, or over one split of a streaming split.

Every call that starts iterating (``iter(it.iter_batches())``, a ``for`` loop) is one epoch:
it runs the dataset from the start. Subclasses say where an epoch's blocks come from
(``_start_epoch``); batching, local shuffling, formatting, prefetching and torch conversion
are shared here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.api.error_boundary import iterate_at_boundary, public_methods_at_boundary
from shardflow.engine.execution.refs import resolve
from shardflow.engine.execution.stats import ConsumerTimer
from shardflow.engine.iteration.batches import (
    iter_batches_from_blocks,
    validate_batch_size,
    validate_local_shuffle,
    validate_prefetch_batches,
)
from shardflow.sdk.block import block_to_rows, validate_batch_format


class Epoch:
    """One pass over the data: the (reference, metadata) pairs of its blocks.

    ``items()`` is a generator; closing it ends the epoch. ``interrupt()`` may be called from
    another thread when the consumer stops early, to release a producer it waits for.
    """

    def items(self) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError

    def interrupt(self) -> None:
        """Stop early (idempotent; nothing to do by default)."""

    def attach_consumer(self, timer: ConsumerTimer) -> None:
        """Let the execution's statistics report how long the consumer waited."""


class EpochIterable:
    """An iterable whose every ``iter()`` starts a new epoch (as Ray Data's iterables).

    ``close()`` closes the iterators it handed out that are still open, stopping their
    executions at once instead of when they are garbage collected.
    """

    def __init__(self, make: Callable[[], Iterator[Any]]):
        self._make = make
        self._open: weakref.WeakSet = weakref.WeakSet()

    def __iter__(self) -> Iterator[Any]:
        iterator = iterate_at_boundary(self._make())
        self._open.add(iterator)
        return iterator

    def close(self) -> None:
        for iterator in list(self._open):
            iterator.close()


@public_methods_at_boundary
class DataIterator:
    """An iterator over a dataset's rows and batches, repeatable for several epochs.

    Get one from :meth:`Dataset.iterator` or :meth:`Dataset.streaming_split`; each call that
    starts iterating reads the whole dataset (or, for a split, this split's share of one
    execution shared with the other splits).

    Examples:
        >>> import shardflow as sf
        >>> it = sf.range(6).iterator()
        >>> [len(b["id"]) for b in it.iter_batches(batch_size=4)]
        [4, 2]
        >>> [len(b["id"]) for b in it.iter_batches(batch_size=4)]  # a second epoch
        [4, 2]
    """

    def _start_epoch(self) -> Epoch:
        raise NotImplementedError

    # -- iteration --------------------------------------------------------------------

    def iter_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        batch_format: str | None = "default",
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> Iterable[Any]:
        """Return an iterable over batches; each ``iter()`` of it is one epoch.

        Args:
            prefetch_batches: Batches prepared ahead of the consumer in a background thread
                (reading, concatenation, format conversion); 0 prepares them on demand.
            batch_size: Rows per batch (the last may be smaller unless ``drop_last``); None
                yields whole blocks.
            batch_format: ``"numpy"`` (also ``"default"``) for a dict of arrays, ``"pandas"``
                or ``"pyarrow"``.
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: When set, batches are drawn at random from a buffer
                holding at least this many rows (and at least ``batch_size``); when no more
                rows come, the buffer is drained. Larger buffers mix better and take longer
                to give the first batch. Needs a ``batch_size``.
            local_shuffle_seed: Seed of the local shuffle: equal seeds give equal batches
                over the same input order.

        Returns:
            An iterable over batches.

        Examples:
            >>> import shardflow as sf
            >>> batches = sf.range(10).iterator().iter_batches(
            ...     batch_size=5, local_shuffle_buffer_size=10, local_shuffle_seed=0)
            >>> sorted(int(v) for b in batches for v in b["id"])
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """
        options = _batch_options(
            prefetch_batches,
            batch_size,
            batch_format,
            drop_last,
            local_shuffle_buffer_size,
            local_shuffle_seed,
        )
        return EpochIterable(lambda: self._epoch_batches(**options))

    def iter_rows(self) -> Iterable[dict[str, Any]]:
        """Return an iterable over rows as dicts; each ``iter()`` of it is one epoch.

        Examples:
            >>> import shardflow as sf
            >>> next(iter(sf.range(10).iterator().iter_rows()))
            {'id': 0}
        """
        return EpochIterable(self._epoch_rows)

    def iter_torch_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        dtypes: Any | dict[str, Any] | None = None,
        device: Any = "auto",
        collate_fn: Callable[[Any], Any] | None = None,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
        pin_memory: bool = False,
    ) -> Iterable[Any]:
        """Return an iterable over batches of Torch tensors; each ``iter()`` is one epoch.

        Without ``collate_fn`` every batch is a dict of one tensor per column. Tensors on
        the CPU are the consumer's own: they never share memory with the dataset's blocks.
        Needs PyTorch (``pip install 'shardflow[torch]'``).

        Args:
            prefetch_batches: Batches prepared ahead in a background thread (conversion to
                tensors and the device transfer included).
            batch_size: Rows per batch, or None for whole blocks.
            dtypes: A torch dtype for every column, or a dict of column name to dtype
                (columns left out keep the dtype inferred from the data). Not with
                ``collate_fn``.
            device: Where tensors are placed: ``"auto"`` (the CPU; shardflow has no
                trainer to ask for a device), ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a
                ``torch.device``. Applies to what ``collate_fn`` returns when it is a
                tensor, a sequence or a dict of tensors.
            collate_fn: Turns each batch into what the training step takes. A subclass
                instance of ``shardflow.collate_fn.ArrowBatchCollateFn`` receives a
                ``pyarrow.Table``, of ``NumpyBatchCollateFn`` a dict of NumPy arrays, of
                ``PandasBatchCollateFn`` a DataFrame; a plain function receives a dict of
                NumPy arrays. Runs in the prefetch thread.
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: Rows in the local shuffle buffer (see
                :meth:`iter_batches`).
            local_shuffle_seed: Seed of the local shuffle.
            pin_memory: Pin tensors in page-locked memory before the device transfer (only
                where CUDA is available; ignored on CPU-only machines).

        Returns:
            An iterable over tensor batches.

        Examples:
            >>> import shardflow as sf
            >>> it = sf.range(4).iterator()
            >>> for batch in it.iter_torch_batches(batch_size=2):  # doctest: +SKIP
            ...     print(batch)
            {'id': tensor([0, 1])}
            {'id': tensor([2, 3])}
        """
        from shardflow.engine.iteration.torch_batches import torch_batch_steps

        options = _batch_options(
            prefetch_batches,
            batch_size,
            "pyarrow",
            drop_last,
            local_shuffle_buffer_size,
            local_shuffle_seed,
        )
        batch_format, collate, finalize = torch_batch_steps(dtypes, device, collate_fn, pin_memory)
        options.update(batch_format=batch_format, collate_fn=collate, finalize_fn=finalize)
        return EpochIterable(lambda: self._epoch_batches(**options))

    def iter_tf_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        dtypes: Any = None,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> Iterable[Any]:
        """Return an iterable over batches of TensorFlow tensors; each ``iter()`` is one
        epoch. See :meth:`Dataset.iter_tf_batches`."""
        from shardflow.engine.api.interop.tensorflow import iter_tf_batches

        return iter_tf_batches(
            self,
            dtypes=dtypes,
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
        )

    def to_tf(
        self,
        feature_columns: str | list[str],
        label_columns: str | list[str],
        *,
        additional_columns: str | list[str] | None = None,
        prefetch_batches: int = 1,
        batch_size: int = 1,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
        feature_type_spec: Any = None,
        label_type_spec: Any = None,
        additional_type_spec: Any = None,
    ) -> Any:
        """Return a ``tf.data.Dataset`` over this iterator's rows; see :meth:`Dataset.to_tf`."""
        from shardflow.engine.api.interop.tensorflow import to_tf

        return to_tf(
            self,
            feature_columns,
            label_columns,
            additional_columns=additional_columns,
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
            feature_type_spec=feature_type_spec,
            label_type_spec=label_type_spec,
            additional_type_spec=additional_type_spec,
        )

    def to_torch(self, **options: Any) -> Any:
        """Return a ``torch.utils.data.IterableDataset`` of ``(features, label)`` batches;
        see :meth:`Dataset.to_torch` for the arguments (all keyword-only)."""
        from shardflow.engine.api.dataset import Dataset

        source = getattr(self, "_dataset", None)
        if isinstance(source, Dataset):
            return source.to_torch(**options)
        from shardflow.sdk.optional import require

        require("torch", "torch", "DataIterator.to_torch")
        from shardflow.engine.api.interop.torch_dataset import to_torch

        defaults = {
            "label_column": None,
            "feature_columns": None,
            "label_column_dtype": None,
            "feature_column_dtypes": None,
            "batch_size": 1,
            "prefetch_batches": 1,
            "drop_last": False,
            "local_shuffle_buffer_size": None,
            "local_shuffle_seed": None,
            "unsqueeze_label_tensor": True,
            "unsqueeze_feature_tensors": True,
        }
        unknown = sorted(set(options) - set(defaults))
        if unknown:
            raise TypeError(f"to_torch() got unexpected keyword arguments {unknown}.")
        return to_torch(self, **{**defaults, **options})

    def _epoch_batches(self, **options: Any) -> Iterator[Any]:
        epoch = self._start_epoch()
        blocks = _resolved(epoch.items())
        timer = ConsumerTimer()
        batches = iter_batches_from_blocks(
            blocks, on_stop=epoch.interrupt, pandas=_pandas_conversion(), **options
        )
        try:
            for batch in timer.timed(batches):
                epoch.attach_consumer(timer)
                yield batch
        finally:
            epoch.attach_consumer(timer)
            batches.close()
            blocks.close()
            epoch.interrupt()

    def _epoch_rows(self) -> Iterator[dict[str, Any]]:
        blocks = self._epoch_batches(
            batch_size=None, batch_format="pyarrow", drop_last=False, prefetch_batches=1
        )
        try:
            for block in blocks:
                yield from block_to_rows(block)
        finally:
            blocks.close()

    # -- whole results and metadata ----------------------------------------------------

    def materialize(self) -> Any:
        """Run one epoch and keep its blocks: a Dataset that reads them without re-running.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(5).iterator().materialize().count()
            5
        """
        from shardflow.engine.api.dataset import Dataset
        from shardflow.engine.plan.logical import BlocksSource, LogicalPlan

        epoch = self._start_epoch()
        items = epoch.items()
        refs, metas = [], []
        try:
            for ref, meta in items:
                refs.append(ref)
                metas.append(meta)
        finally:
            items.close()
            epoch.interrupt()
        return Dataset(LogicalPlan(BlocksSource(tuple(refs), "Materialized", tuple(metas))))

    def stats(self) -> str:
        """Statistics of the last execution this iterator read from."""
        raise NotImplementedError

    def schema(self) -> Any:
        """The Arrow schema of the rows, or None when unknown for an empty dataset."""
        raise NotImplementedError

    def get_context(self) -> DataContext:
        """The DataContext the dataset runs under."""
        raise NotImplementedError


class _DatasetEpoch(Epoch):
    def __init__(self, dataset: Any):
        from shardflow.engine.api.consumption import ExecutionHandle

        self._dataset = dataset
        self._handle = ExecutionHandle()

    def items(self) -> Iterator[tuple[Any, Any]]:
        yield from self._dataset._execute(handle=self._handle)

    def attach_consumer(self, timer: ConsumerTimer) -> None:
        stats = getattr(self._dataset, "_last_stats", None)
        if stats is not None:
            stats.consumer = timer

    def interrupt(self) -> None:
        # The consumer stopped (break, an exception, Ctrl-C) while a prefetching thread may
        # wait inside the execution: cancel it so that thread returns at once.
        self._handle.cancel()


class DatasetIterator(DataIterator):
    """The DataIterator of one Dataset: each epoch executes the dataset anew."""

    def __init__(self, dataset: Any):
        self._dataset = dataset

    def __repr__(self) -> str:
        return f"DataIterator({self._dataset!r})"

    def _start_epoch(self) -> Epoch:
        return _DatasetEpoch(self._dataset)

    def materialize(self) -> Any:
        return self._dataset.materialize()

    def stats(self) -> str:
        return self._dataset.stats()

    def schema(self) -> Any:
        return self._dataset.schema()

    def get_context(self) -> DataContext:
        return DataContext.get_current()


def _resolved(items: Iterator[tuple[Any, Any]]) -> Iterator[Any]:
    try:
        for ref, _ in items:
            yield resolve(ref)
    finally:
        items.close()


def _batch_options(
    prefetch_batches: Any,
    batch_size: Any,
    batch_format: Any,
    drop_last: Any,
    local_shuffle_buffer_size: Any,
    local_shuffle_seed: Any,
) -> dict[str, Any]:
    batch_size = validate_batch_size(batch_size)
    validate_local_shuffle(local_shuffle_buffer_size, local_shuffle_seed, batch_size)
    if not isinstance(drop_last, bool):
        raise TypeError(f"drop_last must be a bool, got {drop_last!r}.")
    return {
        "prefetch_batches": validate_prefetch_batches(prefetch_batches),
        "batch_size": batch_size,
        "batch_format": validate_batch_format(batch_format),
        "drop_last": drop_last,
        "local_shuffle_buffer_size": local_shuffle_buffer_size,
        "local_shuffle_seed": local_shuffle_seed,
    }


def _pandas_conversion() -> Any:
    """How this epoch's pandas batches get their dtypes: the settings current when it starts."""
    from shardflow.engine.api.context import DataContext

    return DataContext.get_current().pandas_conversion()
