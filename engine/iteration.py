"""Consuming a dataset: batches and rows from the stream of output blocks."""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator, Optional

from shardflow.engine.transforms import rebatch_blocks
from shardflow.sdk.block import Block, block_to_batch, block_to_rows

_DONE = object()


def validate_batch_size(batch_size: Any, *, allow_none: bool = True) -> Optional[int]:
    if batch_size is None and allow_none:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be a positive int{' or None' if allow_none else ''}, got {batch_size!r}.")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, got {batch_size}.")
    return batch_size


def iter_batches_from_blocks(
    blocks: Iterator[Block],
    *,
    on_stop: Optional[Callable[[], None]] = None,
    batch_size: Optional[int],
    batch_format: str,
    drop_last: bool,
    prefetch_batches: int,
) -> Iterator[Any]:
    """Rebatch a block stream to ``batch_size`` rows in ``batch_format``.

    With ``prefetch_batches > 0`` a background thread prepares up to that many batches ahead
    of the consumer (format conversion and concatenation overlap with the training step);
    ``on_stop`` cancels the execution feeding ``blocks`` when the consumer stops early.
    """

    def produce() -> Iterator[Any]:
        for block in rebatch_blocks(blocks, batch_size):
            if block.num_rows == 0:
                continue
            if drop_last and batch_size is not None and block.num_rows < batch_size:
                return
            yield block_to_batch(block, batch_format)

    if prefetch_batches <= 0:
        yield from produce()
        return
    yield from _prefetched(produce, prefetch_batches, on_stop)


def _prefetched(make: Callable[[], Iterator[Any]], depth: int, on_stop: Optional[Callable[[], None]] = None) -> Iterator[Any]:
    buffer: "queue.Queue" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        """Hand ``item`` to the consumer unless it stopped reading."""
        while not stop.is_set():
            try:
                buffer.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def fill() -> None:
        source = make()
        try:
            for item in source:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:
            put(exc)
        finally:
            source.close()

    thread = threading.Thread(target=fill, name="shardflow-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = buffer.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        if on_stop is not None and thread.is_alive():
            on_stop()  # the filling thread may be waiting inside the execution
        thread.join()


def iter_rows_from_blocks(blocks: Iterator[Block]) -> Iterator[dict]:
    for block in blocks:
        yield from block_to_rows(block)
