"""``BlockAccessor``: Ray Data's view of one block, as sinks receive it.

A ``BlockBasedFileDatasink`` subclass's ``write_block_to_file(block, file)`` receives a
``BlockAccessor``, as in Ray Data, so sinks written for Ray Data run unchanged:
``block.to_arrow()``, ``block.to_pandas()``, ``block.num_rows()``, ``block.iter_rows(True)`` ...
Attributes it does not define come from the underlying ``pyarrow.Table``
(``block.column("x")``, ``block.num_columns``), and ``block.num_rows`` is also the row count
itself, so code written against the table keeps working.

Examples:
    >>> import pyarrow as pa
    >>> from shardflow.sdk.block_accessor import BlockAccessor
    >>> accessor = BlockAccessor.for_block(pa.table({"x": [1, 2, 3]}))
    >>> accessor.num_rows(), accessor.to_numpy("x").tolist()
    (3, [1, 2, 3])
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import (
    Block,
    BlockMetadata,
    _column_to_numpy,
    block_to_batch,
    block_to_rows,
    to_block,
)


class _RowCount(int):
    """An int that may also be called: ``accessor.num_rows`` and ``accessor.num_rows()``."""

    def __call__(self) -> int:
        return int(self)


class BlockAccessor:
    """One block, with Ray Data's accessor methods.

    Args:
        block: The block (a ``pyarrow.Table``).
    """

    def __init__(self, block: Block):
        self._table = block

    @staticmethod
    def for_block(block: Any) -> BlockAccessor:
        """An accessor of ``block`` (a ``pyarrow.Table``, a pandas DataFrame or a dict of
        arrays; an accessor is returned as it is)."""
        if isinstance(block, BlockAccessor):
            return block
        return BlockAccessor(block if isinstance(block, pa.Table) else to_block(block))

    # -- the block in other forms ---------------------------------------------------------

    def to_arrow(self) -> pa.Table:
        """The block as a ``pyarrow.Table``."""
        return self._table

    def to_block(self) -> pa.Table:
        """The block itself (a ``pyarrow.Table``)."""
        return self._table

    def to_pandas(self) -> Any:
        """The block as a pandas DataFrame, with the dtypes pandas batches have."""
        return block_to_batch(self._table, "pandas")

    def to_numpy(self, columns: str | list[str] | None = None) -> Any:
        """One column as an array (``columns`` a name), or a dict of arrays."""
        if isinstance(columns, str):
            if columns not in self._table.column_names:
                raise ValueError(
                    f"Cannot find column {columns}, available columns: "
                    f"{set(self._table.column_names)}"
                )
            return _column_to_numpy(self._table.column(columns))
        names = self._table.column_names if columns is None else list(columns)
        return {name: _column_to_numpy(self._table.column(name)) for name in names}

    def to_batch_format(self, batch_format: str | None) -> Any:
        """The block as a batch of ``batch_format`` (None: the block itself)."""
        if batch_format in (None, "default", "native"):
            return self._table if batch_format is None else block_to_batch(self._table, "pandas")
        return block_to_batch(self._table, batch_format)

    def to_default(self) -> Any:
        """The block in the default batch format of a table block (a pandas DataFrame)."""
        return block_to_batch(self._table, "pandas")

    # -- what the block holds -------------------------------------------------------------

    @property
    def num_rows(self) -> _RowCount:
        """The number of rows (an int that may also be called, as in Ray Data)."""
        return _RowCount(self._table.num_rows)

    def size_bytes(self) -> int:
        """The block's in-memory size in bytes."""
        return int(self._table.nbytes)

    def schema(self) -> pa.Schema:
        """The block's schema."""
        return self._table.schema

    def column_names(self) -> list[str]:
        """The block's column names."""
        return list(self._table.column_names)

    def get_metadata(
        self, input_files: list[str] | None = None, exec_stats: Any = None
    ) -> BlockMetadata:
        """The block's metadata."""
        return BlockMetadata(
            num_rows=self._table.num_rows,
            size_bytes=self._table.nbytes,
            input_files=input_files,
            exec_stats=exec_stats,
        )

    def iter_rows(self, public_row_format: bool) -> Iterator[dict[str, Any]]:
        """The rows, as dicts (tensor cells as NumPy arrays)."""
        return iter(block_to_rows(self._table))

    def slice(self, start: int, end: int, copy: bool = False) -> pa.Table:
        """Rows ``start`` to ``end`` (exclusive), as a table."""
        view = self._table.slice(start, end - start)
        return view.combine_chunks() if copy else view

    def select(self, columns: list[str]) -> pa.Table:
        """Only ``columns``, as a table."""
        return self._table.select(list(columns))

    def take(self, indices: list[int]) -> pa.Table:
        """The rows at ``indices``, as a table."""
        return self._table.take(indices)

    def __getattr__(self, name: str) -> Any:  # the table's other attributes
        if name.startswith("__") or name == "_table":
            raise AttributeError(name)
        return getattr(self._table, name)

    def __len__(self) -> int:
        return self._table.num_rows

    def __repr__(self) -> str:
        return f"BlockAccessor({self._table.num_rows} rows, {self._table.column_names})"


def as_table(block: Any) -> pa.Table:
    """The table of a block given as a ``pyarrow.Table`` or a :class:`BlockAccessor`."""
    return block.to_arrow() if isinstance(block, BlockAccessor) else block


__all__ = ["BlockAccessor", "as_table"]
