"""Consuming a dataset: batches and rows from the stream of output blocks.

One pipeline serves ``iter_batches``, ``iter_rows`` and ``iter_torch_batches`` of datasets and
data iterators: blocks are rebatched (or drawn through a local shuffle buffer), converted to
the batch format, then collated and finalized (tensors, device moves) when asked, all ahead of
the consumer in a background thread when prefetching.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from shardflow.engine.execution.stages.transforms import rebatch_blocks
from shardflow.engine.iteration.local_shuffle import shuffled_batches
from shardflow.sdk.block import Block, block_to_batch, block_to_rows

_DONE = object()


def validate_batch_size(batch_size: Any, *, allow_none: bool = True) -> int | None:
    if batch_size is None and allow_none:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(
            f"batch_size must be a positive int{' or None' if allow_none else ''}, "
            f"got {batch_size!r}."
        )
    if batch_size <= 0:
        # Ray Data's words first: code matches them with pytest.raises(match=...).
        raise ValueError(
            f"Batch size can't be negative or 0: batch_size must be > 0, got {batch_size}."
        )
    return batch_size


def validate_prefetch_batches(prefetch_batches: Any) -> int:
    if (
        isinstance(prefetch_batches, bool)
        or not isinstance(prefetch_batches, int)
        or prefetch_batches < 0
    ):
        raise ValueError(f"prefetch_batches must be an int >= 0, got {prefetch_batches!r}.")
    return prefetch_batches


def validate_local_shuffle(buffer_size: Any, seed: Any, batch_size: int | None) -> None:
    """Check ``local_shuffle_buffer_size`` and ``local_shuffle_seed`` (with Ray's error types)."""
    if buffer_size is not None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise TypeError(
                "local_shuffle_buffer_size must be an int (a number of rows) or None, "
                f"got {buffer_size!r}."
            )
        if buffer_size < 0:
            raise ValueError(f"local_shuffle_buffer_size must be >= 0, got {buffer_size}.")
        if batch_size is None:
            raise ValueError(
                "Must specify a batch_size if using a local shuffle: pass batch_size=<rows> "
                "together with local_shuffle_buffer_size."
            )
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"local_shuffle_seed must be an int or None, got {seed!r}.")
        if seed < 0:
            raise ValueError(f"local_shuffle_seed must be >= 0, got {seed}.")


def iter_batches_from_blocks(
    blocks: Iterator[Block],
    *,
    batch_size: int | None,
    batch_format: str,
    drop_last: bool,
    prefetch_batches: int,
    local_shuffle_buffer_size: int | None = None,
    local_shuffle_seed: int | None = None,
    collate_fn: Callable[[Any], Any] | None = None,
    finalize_fn: Callable[[Any], Any] | None = None,
    on_stop: Callable[[], None] | None = None,
    pandas: Any = None,
) -> Iterator[Any]:
    """Rebatch a block stream to ``batch_size`` rows in ``batch_format``.

    With ``local_shuffle_buffer_size`` the batches are drawn at random from a buffer of at
    least that many rows (see engine/iteration/local_shuffle.py). ``collate_fn`` then ``finalize_fn``
    are applied to each formatted batch. With ``prefetch_batches > 0`` a background thread
    prepares up to that many batches ahead of the consumer (reading, concatenation, format
    conversion and collation overlap with the training step); ``on_stop`` is called from the
    consumer's thread when it stops early, before that thread is joined, so a source blocked
    on a remote producer can be released.
    """

    def produce() -> Iterator[Any]:
        if local_shuffle_buffer_size is not None:
            pieces = shuffled_batches(
                blocks, batch_size, local_shuffle_buffer_size, local_shuffle_seed
            )
        else:
            pieces = rebatch_blocks(blocks, batch_size)
        for block in pieces:
            if block.num_rows == 0:
                continue
            if drop_last and batch_size is not None and block.num_rows < batch_size:
                return
            batch = block_to_batch(block, batch_format, pandas)
            if collate_fn is not None:
                batch = collate_fn(batch)
            if finalize_fn is not None:
                batch = finalize_fn(batch)
            yield batch

    if prefetch_batches <= 0:
        yield from produce()
        return
    yield from _prefetched(produce, prefetch_batches, on_stop)


def _prefetched(
    make: Callable[[], Iterator[Any]], depth: int, on_stop: Callable[[], None] | None = None
) -> Iterator[Any]:
    buffer: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    finished = threading.Event()

    def fill() -> None:
        source = make()
        try:
            for item in source:
                while not stop.is_set():
                    try:
                        buffer.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            buffer.put(_DONE)
        except BaseException as exc:
            buffer.put(exc)
        finally:
            source.close()
            finished.set()

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
        if on_stop is not None and not finished.is_set():
            on_stop()
        # The filler may be blocked putting an exception or _DONE into a full queue.
        while thread.is_alive():
            try:
                buffer.get_nowait()
            except queue.Empty:
                pass
            thread.join(timeout=0.05)


def iter_rows_from_blocks(blocks: Iterator[Block]) -> Iterator[dict]:
    for block in blocks:
        yield from block_to_rows(block)
