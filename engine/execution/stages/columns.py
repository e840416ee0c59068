"""The stages that reshape columns: select, drop, rename, ``add_column`` and ``with_column``.

Each runs inside a fused map task (see engine/execution/stages/transforms.py). Errors name the operation and
the columns involved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.api.context import current_pandas_conversion
from shardflow.engine.execution.errors import (
    ColumnNotFoundError,
    missing_column_message,
    wrap_user_exception,
)
from shardflow.engine.execution.stages.transforms import Stage
from shardflow.sdk.block import Block, block_to_batch, to_block
from shardflow.sdk.datasink import TaskContext


def check_rename(mapping: dict[str, str], names: list[str], op_name: str) -> None:
    """Raise for a rename of a missing column, or one that would make two columns one name."""
    missing = [c for c in mapping if c not in names]
    if missing:
        raise ColumnNotFoundError(
            f"{op_name}: unknown column(s) {missing}; the data has columns {names}."
        )
    new_names = [mapping.get(c, c) for c in names]
    clashes = sorted({n for n in new_names if new_names.count(n) > 1})
    if clashes:
        raise ValueError(
            f"{op_name}: renaming would give two columns the name(s) {clashes}; the data has "
            f"columns {names}. Drop or rename the existing column first."
        )


class ProjectStage(Stage):
    """``select_columns``, ``drop_columns`` and ``rename_columns`` as one column mapping."""

    def __init__(
        self,
        name: str,
        select: list[str] | None = None,
        drop: list[str] | None = None,
        rename: dict[str, str] | None = None,
        implicit: bool = False,
    ):
        self.name, self.select, self.drop, self.rename = name, select, drop, rename
        self.implicit = implicit

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for block in blocks:
            yield self.apply(block)

    def apply(self, block: Block) -> Block:
        names = block.column_names
        if not block.num_columns and not block.num_rows:
            return block  # an empty block without a schema has nothing to check
        if self.rename is not None and self.select is None and self.drop is None:
            check_rename(self.rename, names, self.name)
            return block.rename_columns([self.rename.get(c, c) for c in names])
        wanted = self.select if self.select is not None else self.drop or []
        missing = [c for c in wanted if c not in names]
        if missing and self.implicit:
            raise ValueError(missing_column_message(missing[0], names))
        if missing:
            raise ColumnNotFoundError(
                f"{self.name}: unknown column(s) {missing}; the data has columns {names}."
            )
        if self.select is not None:
            return block.select(self.select)
        kept = block.drop_columns(self.drop or [])
        # Without columns no row remains, as in Ray Data.
        return kept if kept.num_columns else pa.table({})


class AddColumnStage(Stage):
    """``add_column``: a new (or replaced) column computed from each batch.

    The batch the function saw takes the column as Ray Data sets it, then becomes the output
    block: pandas assigns by position (a scalar fills the column), Arrow replaces the column
    in place or appends it, NumPy sets the dict entry.
    """

    def __init__(self, col: str, fn: Callable, name: str, batch_format: str):
        self.col, self.fn, self.name, self.batch_format = col, fn, name, batch_format
        self.pandas = current_pandas_conversion()

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for block in blocks:
            batch = block_to_batch(block, self.batch_format, self.pandas)
            try:
                values = self.fn(batch)
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc
            yield self._with_column(batch, values, block.num_rows)

    def _with_column(self, batch: Any, values: Any, num_rows: int) -> Block:
        if self.batch_format == "pyarrow":
            if not isinstance(values, (pa.Array, pa.ChunkedArray)):
                raise ValueError(
                    f"{self.name}: with batch_format='pyarrow' the function must return a "
                    f"pyarrow Array, got {type(values).__name__}."
                )
            self._check_length(len(values), num_rows)
            index = batch.schema.get_field_index(self.col)
            if index == -1:
                return batch.append_column(self.col, values)
            return batch.set_column(index, self.col, values)
        if self.batch_format == "numpy":
            if not isinstance(values, np.ndarray):
                raise ValueError(
                    f"{self.name}: with batch_format='numpy' the function must return a "
                    f"numpy.ndarray, got {type(values).__name__}."
                )
            self._check_length(len(values), num_rows)
            return to_block({**batch, self.col: values})
        import pandas as pd

        if isinstance(values, (pd.DataFrame, pd.Series, pd.Index)):
            self._check_length(len(values), num_rows)
            values = values.copy()
            values.index = batch.index
        elif isinstance(values, (list, tuple, np.ndarray, pa.Array, pa.ChunkedArray)):
            self._check_length(len(values), num_rows)
        batch = batch.copy(deep=False)
        batch[self.col] = values
        return to_block(batch)

    def _check_length(self, got: int, num_rows: int) -> None:
        if got != num_rows:
            raise ValueError(
                f"{self.name}: the function returned {got} values for a batch of {num_rows} "
                "rows; return one value per row."
            )
