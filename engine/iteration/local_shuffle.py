"""Local shuffle buffer: batches drawn at random from a window of buffered rows.

``iter_batches(local_shuffle_buffer_size=k)`` mixes rows without a global shuffle: blocks
enter a buffer, and a batch is drawn only while the buffer holds at least ``k`` rows (and at
least ``batch_size``). When the input ends, the remaining rows are drained in random order.

The buffer works in generations so that a batch costs a gather of ``batch_size`` rows, not a
pass over the buffer: a generation is one table (the rows left from the previous generation
plus the blocks added since) with a random permutation of its rows; batches are consecutive
slices of the permutation. A new generation starts once fewer than half of ``k`` rows (or less
than a batch) are left in the current one and new blocks are waiting, so every row is copied
into O(1) generations on average.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block, concat_blocks


class LocalShuffleBuffer:
    """Collects blocks and hands out shuffled batches of ``batch_size`` rows.

    Args:
        batch_size: Rows per batch (the last batch may be smaller).
        min_rows: Rows the buffer must hold before a batch is drawn, until the input ends.
        seed: Seed of the random generator; equal seeds over equal inputs give equal batches.
    """

    def __init__(self, batch_size: int, min_rows: int, seed: int | None = None):
        self._batch_size = batch_size
        # A batch is drawn from at least one batch of rows; a smaller buffer would not mix.
        self._min_rows = max(min_rows, batch_size)
        self._rng = np.random.default_rng(seed)
        self._pending: list[Block] = []
        self._pending_rows = 0
        self._table: Block | None = None
        self._order: np.ndarray = np.empty(0, dtype=np.int64)
        self._pos = 0
        self._done = False

    def add(self, block: Block) -> None:
        """Add a block (empty blocks are ignored)."""
        if block.num_rows:
            self._pending.append(block)
            self._pending_rows += block.num_rows

    def done_adding(self) -> None:
        """No more blocks will come: the remaining rows may be drained."""
        self._done = True

    @property
    def num_rows(self) -> int:
        """Rows buffered and not handed out yet."""
        return self._left_in_generation() + self._pending_rows

    def has_batch(self) -> bool:
        """Whether a batch may be drawn now."""
        if self._done:
            return self.num_rows > 0
        return self.num_rows >= self._min_rows

    def next_batch(self) -> Block:
        """Draw the next batch; call only when ``has_batch()``."""
        left = self._left_in_generation()
        if self._pending and (self._done or left < self._batch_size or left < self._min_rows // 2):
            self._new_generation()
        take = self._order[self._pos : self._pos + self._batch_size]
        self._pos += len(take)
        return self._table.take(pa.array(take))

    def _left_in_generation(self) -> int:
        return len(self._order) - self._pos

    def _new_generation(self) -> None:
        parts = list(self._pending)
        if self._table is not None and self._left_in_generation():
            parts.insert(0, self._table.take(pa.array(self._order[self._pos :])))
        table = concat_blocks(parts).combine_chunks()
        self._table = table
        self._order = self._rng.permutation(table.num_rows).astype(np.int64, copy=False)
        self._pos = 0
        self._pending, self._pending_rows = [], 0


def shuffled_batches(
    blocks: Iterable[Block], batch_size: int, min_rows: int, seed: int | None = None
) -> Iterator[Block]:
    """Batches of ``batch_size`` rows drawn through a :class:`LocalShuffleBuffer`."""
    buffer = LocalShuffleBuffer(batch_size, min_rows, seed)
    for block in blocks:
        buffer.add(block)
        while buffer.has_batch():
            yield buffer.next_batch()
    buffer.done_adding()
    while buffer.has_batch():
        yield buffer.next_batch()
