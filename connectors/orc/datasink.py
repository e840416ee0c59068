"""ORC writes: ``Dataset.write_orc`` through ``pyarrow.orc.ORCWriter``, streaming blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import BlockFileWriter


class ORCDatasink(BlockBasedFileDatasink):
    """Writes ORC files. See :meth:`shardflow.Dataset.write_orc` for the arguments.

    ``arrow_orc_args`` (and what ``arrow_orc_args_fn`` returns, which wins on a clash) go to
    ``pyarrow.orc.ORCWriter`` (the arguments of ``pyarrow.orc.write_table``:
    ``compression``, ``stripe_size``, ``batch_size``, ...). Each write task streams its
    blocks into its open file, one stripe group per block.
    """

    def __init__(
        self,
        path: Any,
        *,
        arrow_orc_args_fn: Callable[[], dict[str, Any]] | None = None,
        arrow_orc_args: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("file_format", "orc")
        open_stream_args = kwargs.get("open_stream_args") or {}
        if "compression" in open_stream_args:
            raise ValueError(
                "Stream compression isn't supported for ORC files. Pass the compression "
                "parameter straight to write_orc instead of via open_stream_args."
            )
        super().__init__(path, **kwargs)
        if arrow_orc_args_fn is not None and not callable(arrow_orc_args_fn):
            raise TypeError("arrow_orc_args_fn must be a function returning a dict.")
        if arrow_orc_args is not None and not isinstance(arrow_orc_args, dict):
            raise TypeError("arrow_orc_args must be a dict of pyarrow.orc.write_table arguments.")
        self.arrow_orc_args_fn = arrow_orc_args_fn
        self.arrow_orc_args = dict(arrow_orc_args or {})

    def get_name(self) -> str:
        return "ORC"

    def _write_args(self) -> dict[str, Any]:
        args = dict(self.arrow_orc_args)
        if self.arrow_orc_args_fn is not None:
            args.update(self.arrow_orc_args_fn())
        return args

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter:
        return _ORCBlockWriter(f, block.schema, self._write_args())

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        writer = _ORCBlockWriter(f, block.schema, self._write_args())
        writer.write(block)
        writer.close()


class _ORCBlockWriter(BlockFileWriter):
    """Appends blocks of one schema to one ORC file."""

    def __init__(self, f: Any, schema: pa.Schema, args: dict[str, Any]):
        import pyarrow.orc

        if not schema.names:
            raise ValueError("write_orc requires at least one column.")
        self.schema = schema
        self._writer = pyarrow.orc.ORCWriter(f, **args)

    def write(self, block: Block) -> bool:
        if not block.schema.equals(self.schema, check_metadata=False):
            if block.column_names != self.schema.names:
                return False
            try:
                block = block.cast(self.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return False
        try:
            self._writer.write(block)
        except pa.ArrowNotImplementedError as exc:
            raise _unwritable_column(block, exc) from exc
        return True

    def close(self) -> None:
        self._writer.close()


def _unwritable_column(block: Block, exc: Exception) -> Exception:
    """``exc`` (a type ORC cannot store), naming the first column of that type."""
    import pyarrow.orc

    for name in block.column_names:
        try:
            pyarrow.orc.write_table(block.select([name]).slice(0, 0), pa.BufferOutputStream())
        except pa.ArrowNotImplementedError:
            kind = block.schema.field(name).type
            return pa.ArrowNotImplementedError(
                f"write_orc cannot write column {name!r} of type {kind}: ORC has no such "
                "type. Cast or drop it first (e.g. with map_batches)."
            )
    return exc
