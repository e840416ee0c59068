"""``range`` and ``range_tensor``: the integers 0..n-1 in column ``id`` (or tensors filled with
them in column ``data``), generated inside the read tasks."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block, BlockMetadata, numpy_batch_to_block
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.input_identity import DoneInputs, InputItem, InputPiece, Ranges

_ROWS_PER_BLOCK = 1024 * 1024


def _make_range(
    start: int, stop: int, column: str, rows_per_block: int, shape: tuple[int, ...] | None = None
):
    for lo in range(start, stop, rows_per_block):
        values = np.arange(lo, min(stop, lo + rows_per_block), dtype=np.int64)
        if shape is not None:  # row i is a tensor of ``shape`` filled with i
            values = np.broadcast_to(
                values.reshape((-1,) + (1,) * len(shape)), (len(values),) + shape
            )
        yield numpy_batch_to_block({column: values})


class _RangeRead:
    """The body of a range read task: the rows in ``ranges``, told as input pieces so a
    resumed write skips the rows an earlier run wrote."""

    def __init__(
        self,
        n: int,
        ranges: Ranges,
        column: str,
        rows_per_block: int,
        shape: tuple[int, ...] | None,
    ):
        self.n, self.ranges, self.column = n, ranges, column
        self.rows_per_block, self.shape = rows_per_block, shape

    def __call__(self) -> Iterator[Block]:
        for lo, hi in self.ranges:
            yield from _make_range(lo, hi, self.column, self.rows_per_block, self.shape)

    def _item(self) -> InputItem:
        return InputItem(f"range({self.n})", self.n - 1)  # positions 0..n-1

    def input_pieces(self) -> list[InputPiece]:
        return [InputPiece(self._item(), self.ranges)]

    def remaining(self, done: DoneInputs) -> _RangeRead | None:
        left = done.remaining(InputPiece(self._item(), self.ranges))
        if left is None:
            return None
        if left == self.ranges:
            return self
        return _RangeRead(self.n, left, self.column, self.rows_per_block, self.shape)


class RangeDatasource(Datasource):
    """Integers ``0 .. n-1`` split into contiguous ranges, one per read task.

    With ``tensor_shape``, row i holds a tensor of that shape filled with i (``range_tensor``).
    """

    def __init__(
        self,
        n: int,
        column: str = "id",
        rows_per_block: int = _ROWS_PER_BLOCK,
        tensor_shape: tuple[int, ...] | None = None,
    ):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"range needs an int, got {n!r}.")
        if n < 0:
            raise ValueError(f"range needs n >= 0, got {n}.")
        if tensor_shape is not None:
            tensor_shape = tuple(tensor_shape)
            if not tensor_shape or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in tensor_shape
            ):
                raise ValueError(
                    f"range_tensor needs shape to be a non-empty tuple of positive ints, got "
                    f"{tensor_shape!r}."
                )
            rows_per_block = max(1, rows_per_block // int(np.prod(tensor_shape)))
        self.n = n
        self.column = column
        self.rows_per_block = rows_per_block
        self.tensor_shape = tensor_shape

    def _row_bytes(self) -> int:
        return 8 * (int(np.prod(self.tensor_shape)) if self.tensor_shape else 1)

    def estimate_inmemory_data_size(self) -> int | None:
        return self._row_bytes() * self.n

    def get_name(self) -> str:
        return "Range"

    def input_items(self) -> list[InputItem]:
        return [InputItem(f"range({self.n})", self.n - 1)]

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, **kwargs
    ) -> list[ReadTask]:
        if self.n == 0:
            return []
        parallelism = max(1, min(parallelism, self.n))
        bounds = np.linspace(0, self.n, parallelism + 1, dtype=np.int64)
        if self.tensor_shape is None:
            value_type = pa.int64()
        else:
            value_type = pa.fixed_shape_tensor(pa.int64(), list(self.tensor_shape))
        schema = pa.schema([(self.column, value_type)])
        tasks = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            lo, hi = int(lo), int(hi)
            if hi <= lo:
                continue
            tasks.append(
                ReadTask(
                    _RangeRead(
                        self.n, ((lo, hi),), self.column, self.rows_per_block, self.tensor_shape
                    ),
                    BlockMetadata(num_rows=hi - lo, size_bytes=self._row_bytes() * (hi - lo)),
                    schema,
                    per_task_row_limit,
                )
            )
        return tasks
