"""NumPy writes: ``Dataset.write_numpy``, one ``.npy`` file per block of a column."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import block_to_batch
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.file_datasink import BlockBasedFileDatasink


class NumpyDatasink(BlockBasedFileDatasink):
    """Writes one column as ``.npy`` files, one per write task.

    See :meth:`shardflow.Dataset.write_numpy` for the arguments.
    """

    def __init__(self, path: str, *, column: str, **kwargs: Any):
        if not isinstance(column, str) or not column:
            raise TypeError(f"column must name the column to write, got {column!r}.")
        kwargs.setdefault("file_format", "npy")
        super().__init__(path, **kwargs)
        self.column = column

    def get_name(self) -> str:
        return "Numpy"

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        if schema is not None and self.column not in schema.names:
            raise ValueError(
                f"Column {self.column!r} is not in the dataset; it has {schema.names}."
            )
        super().on_write_start(schema)

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        if self.column not in block.column_names:
            raise ValueError(
                f"Column {self.column!r} is not in the data; it has {block.column_names}."
            )
        values = block_to_batch(block.select([self.column]), "numpy")[self.column]
        np.save(f, _savable(values, self.column), allow_pickle=False)


def _savable(values: np.ndarray, column: str) -> np.ndarray:
    if values.dtype != object:
        return values
    cells = list(values)
    if cells and all(isinstance(v, str) for v in cells):
        return np.array(cells, dtype=str)
    if cells and all(isinstance(v, bytes) for v in cells):
        return np.array(cells, dtype=bytes)
    if cells and all(isinstance(v, np.ndarray) for v in cells):
        shapes: tuple[Any, ...] = tuple(sorted({v.shape for v in cells}))
        raise ValueError(
            f"Column {column!r} holds arrays of different shapes {list(shapes[:4])}; a .npy file "
            "holds one rectangular array. Resize them to one shape first, or use write_parquet."
        )
    kinds = sorted({type(v).__name__ for v in cells})
    raise ValueError(
        f"Column {column!r} holds values of types {kinds} (or nulls), which a .npy file cannot "
        "hold without pickle. Convert them to numbers, strings or arrays of one shape first."
    )
