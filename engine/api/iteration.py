"""The iterating half of Dataset: rows, batches, torch batches, iterators and streaming splits.

Each method delegates to a :class:`DataIterator`, as Ray Data's Dataset does, so a dataset and
its iterators batch, shuffle and convert the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from shardflow.engine.iteration.data_iterator import DataIterator, DatasetIterator


class IterationMixin:
    """Dataset methods that iterate over the data. Mixed into Dataset."""

    def iterator(self) -> DataIterator:
        """A :class:`DataIterator` over this dataset; each of its iterations runs the dataset.

        Examples:
            >>> import shardflow as sf
            >>> it = sf.range(3).iterator()
            >>> [r["id"] for r in it.iter_rows()], [r["id"] for r in it.iter_rows()]
            ([0, 1, 2], [0, 1, 2])
        """
        return DatasetIterator(self)

    def iter_rows(self) -> Iterable[dict[str, Any]]:
        """Return an iterable over rows as dicts; each ``iter()`` of it runs the dataset.

        Examples:
            >>> import shardflow as sf
            >>> [row["id"] for row in sf.range(3).iter_rows()]
            [0, 1, 2]
        """
        return self.iterator().iter_rows()

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
        """Return an iterable over batches of ``batch_size`` rows; each ``iter()`` runs the dataset.

        Args:
            prefetch_batches: Batches prepared ahead of the consumer in a background thread.
            batch_size: Rows per batch (the last may be smaller); None yields whole blocks.
            batch_format: ``"numpy"`` (also ``"default"``), ``"pandas"`` or ``"pyarrow"``.
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: When set, batches are drawn at random from a buffer of
                at least this many rows (and at least ``batch_size``), drained at the end.
                Needs a ``batch_size``.
            local_shuffle_seed: Seed of the local shuffle, for reproducible batches.

        Returns:
            An iterable over batches.

        Examples:
            >>> import shardflow as sf
            >>> [len(b["id"]) for b in sf.range(10).iter_batches(batch_size=4)]
            [4, 4, 2]
            >>> batches = sf.range(8).iter_batches(
            ...     batch_size=4, local_shuffle_buffer_size=8, local_shuffle_seed=42)
            >>> sorted(int(i) for b in batches for i in b["id"])
            [0, 1, 2, 3, 4, 5, 6, 7]
        """
        return self.iterator().iter_batches(
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            batch_format=batch_format,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
        )

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
        """Return an iterable over batches of Torch tensors (a dict of one tensor per column).

        See :meth:`DataIterator.iter_torch_batches` for every argument. Needs PyTorch
        (``pip install 'shardflow[torch]'``).

        Examples:
            >>> import shardflow as sf
            >>> for batch in sf.range(4).iter_torch_batches(batch_size=2):  # doctest: +SKIP
            ...     print(batch)
            {'id': tensor([0, 1])}
            {'id': tensor([2, 3])}
        """
        return self.iterator().iter_torch_batches(
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            dtypes=dtypes,
            device=device,
            collate_fn=collate_fn,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
            pin_memory=pin_memory,
        )

    def streaming_split(
        self, n: int, *, equal: bool = False, locality_hints: list[Any] | None = None
    ) -> list[DataIterator]:
        """Return ``n`` iterators that read disjoint parts of ONE execution, concurrently.

        The dataset runs once per epoch and its blocks go to the ``n`` iterators as their
        consumers ask for them: threads of this process, other processes (the iterators are
        picklable), or Ray tasks and actors on the Ray backend, where a coordinator actor runs
        the execution. Each iteration of an iterator is one epoch; an epoch starts when all
        ``n`` iterators have started iterating it, so every iterator must be consumed.

        Unlike Ray Data, which deals blocks out evenly by rows, shardflow gives the next block
        to whichever split asks first when ``equal=False``: a faster consumer reads more and
        no consumer waits for a slower one. A consumer that stops early or dies does not hold
        up the others; an error in the pipeline reaches every consumer. Waits for other
        consumers end with a TimeoutError after ``DataContext.streaming_split_timeout_s``.

        Args:
            n: Number of iterators.
            equal: Give every iterator exactly the same number of rows, dropping the
                remainder (fewer than ``n`` rows) as Ray Data does; blocks are cut where
                needed.
            locality_hints: One node id per iterator (``ray.get_runtime_context()
                .get_node_id()`` of its consumer). On Ray, an iterator is given blocks held
                on its node where the coordinator has one buffered (it buffers up to 2n
                blocks to find them); ignored on the local backend (one machine).

        Returns:
            ``n`` :class:`DataIterator` objects.

        Examples:
            >>> import threading
            >>> import shardflow as sf
            >>> it1, it2 = sf.range(100).streaming_split(2, equal=True)
            >>> counts = {}
            >>> def consume(name, it):
            ...     counts[name] = sum(len(b["id"]) for b in it.iter_batches())
            >>> threads = [threading.Thread(target=consume, args=(i, it))
            ...            for i, it in enumerate([it1, it2])]
            >>> for t in threads: t.start()
            >>> for t in threads: t.join()
            >>> counts[0], counts[1]
            (50, 50)
        """
        from shardflow.engine.splits.streaming_split import streaming_split

        return streaming_split(self, n, equal=equal, locality_hints=locality_hints)
