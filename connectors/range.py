"""``range``: the integers 0..n-1 in column ``id``, generated inside the read tasks."""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import BlockMetadata, numpy_batch_to_block
from shardflow.sdk.datasource import Datasource, ReadTask

_ROWS_PER_BLOCK = 1024 * 1024


def _make_range(start: int, stop: int, column: str, rows_per_block: int):
    for lo in range(start, stop, rows_per_block):
        yield numpy_batch_to_block({column: np.arange(lo, min(stop, lo + rows_per_block), dtype=np.int64)})


class RangeDatasource(Datasource):
    """Integers ``0 .. n-1`` split into contiguous ranges, one per read task."""

    def __init__(self, n: int, column: str = "id", rows_per_block: int = _ROWS_PER_BLOCK):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"range needs an int, got {n!r}.")
        if n < 0:
            raise ValueError(f"range needs n >= 0, got {n}.")
        self.n = n
        self.column = column
        self.rows_per_block = rows_per_block

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return 8 * self.n

    def get_name(self) -> str:
        return "Range"

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None, **kwargs) -> List[ReadTask]:
        if self.n == 0:
            return []
        parallelism = max(1, min(parallelism, self.n))
        bounds = np.linspace(0, self.n, parallelism + 1, dtype=np.int64)
        schema = pa.schema([(self.column, pa.int64())])
        tasks = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            lo, hi = int(lo), int(hi)
            if hi <= lo:
                continue
            column, rows_per_block = self.column, self.rows_per_block
            tasks.append(
                ReadTask(
                    lambda lo=lo, hi=hi: _make_range(lo, hi, column, rows_per_block),
                    BlockMetadata(num_rows=hi - lo, size_bytes=8 * (hi - lo)),
                    schema,
                    per_task_row_limit,
                )
            )
        return tasks
