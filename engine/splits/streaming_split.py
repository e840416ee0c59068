"""Dataset.streaming_split: n DataIterators over one execution, read by n concurrent consumers.

The coordinator (engine/splits/coordinator.py) runs in the driver on the local backend, where
consumers are threads of the driver or other processes of the machine that received a pickled
iterator (engine/splits/transport.py), and in a Ray actor on the Ray backend, where consumers
are Ray tasks or actors (engine/splits/ray_coordinator.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.iteration.data_iterator import DataIterator, Epoch
from shardflow.engine.splits.transport import EpochSession


class _SplitEpoch(Epoch):
    def __init__(self, session: EpochSession):
        self._session = session

    def items(self) -> Iterator[tuple[Any, Any]]:
        try:
            while True:
                item = self._session.get()
                if item is None:
                    return
                yield item
        finally:
            self._session.finish()
            self._session.close()

    def interrupt(self) -> None:
        self._session.finish()


class StreamSplitDataIterator(DataIterator):
    """One of the ``n`` iterators of :meth:`Dataset.streaming_split`.

    Picklable: send it to the process, thread, Ray task or actor that consumes it. Each
    iteration is one epoch; an epoch starts when all ``n`` iterators have started it.
    """

    def __init__(self, client: Any, split: int, n: int):
        self._client = client
        self._split = split
        self._n = n

    def __repr__(self) -> str:
        return f"StreamSplitDataIterator(split={self._split}, world_size={self._n})"

    def _start_epoch(self) -> Epoch:
        return _SplitEpoch(self._client.open_epoch(self._split))

    def world_size(self) -> int:
        """The number of splits."""
        return self._n

    def stats(self) -> str:
        return self._client.stats()

    def schema(self) -> Any:
        return self._client.schema()

    def get_context(self) -> DataContext:
        """The DataContext the coordinator runs the dataset under."""
        return self._client.context()


def streaming_split(
    dataset: Any, n: int, *, equal: bool = False, locality_hints: list[Any] | None = None
) -> list[StreamSplitDataIterator]:
    """Create the split iterators of ``dataset`` (see ``Dataset.streaming_split``)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int (the number of splits), got {n!r}.")
    if n < 1:
        raise ValueError(f"n must be >= 1 (the number of splits), got {n}.")
    if not isinstance(equal, bool):
        raise TypeError(f"equal must be a bool, got {equal!r}.")
    if locality_hints is not None:
        if not isinstance(locality_hints, (list, tuple)):
            raise TypeError(f"locality_hints must be a list of node ids, got {locality_hints!r}.")
        if len(locality_hints) != n:
            raise ValueError(
                f"Locality hints list must have length `n`: len({list(locality_hints)}) != {n}"
            )
    context = DataContext.get_current()
    timeout_s = context.streaming_split_timeout_s
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0
    ):
        raise ValueError(
            "DataContext.streaming_split_timeout_s must be a positive number or None, "
            f"got {timeout_s!r}."
        )
    if context.backend == "ray":
        from shardflow.engine.splits.ray_coordinator import create_ray_client

        if locality_hints is not None and not all(isinstance(h, str) for h in locality_hints):
            raise TypeError(
                "streaming_split: locality_hints must be node ids (strings, e.g. "
                f"ray.get_runtime_context().get_node_id()), got {list(locality_hints)!r}."
            )
        hints = list(locality_hints) if locality_hints is not None else None
        client: Any = create_ray_client(dataset, n, equal, timeout_s, hints)
    else:
        from shardflow.engine.splits.coordinator import SplitCoordinator
        from shardflow.engine.splits.transport import LocalCoordinatorClient

        client = LocalCoordinatorClient(SplitCoordinator(dataset, n, equal, timeout_s))
    return [StreamSplitDataIterator(client, i, n) for i in range(n)]
