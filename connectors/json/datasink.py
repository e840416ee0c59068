"""JSON writes: ``Dataset.write_json`` (JSON Lines), one file per block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardflow.sdk.block import Block
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import AppendingWriter, BlockFileWriter


class JSONDatasink(BlockBasedFileDatasink):
    """Writes JSON Lines files. See :meth:`shardflow.Dataset.write_json` for the arguments."""

    def __init__(
        self,
        path: str,
        *,
        pandas_json_args_fn: Callable[[], dict[str, Any]] | None = None,
        pandas_json_args: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("file_format", "json")
        super().__init__(path, **kwargs)
        if pandas_json_args_fn is not None and not callable(pandas_json_args_fn):
            raise TypeError("pandas_json_args_fn must be a function returning a dict.")
        self.pandas_json_args_fn = pandas_json_args_fn
        self.pandas_json_args = dict(pandas_json_args or {})

    def get_name(self) -> str:
        return "JSON"

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter:
        return AppendingWriter(self.write_block_to_file, f)  # JSON Lines append

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        from shardflow.sdk.block import block_to_batch

        args = dict(self.pandas_json_args)
        if self.pandas_json_args_fn is not None:
            args.update(self.pandas_json_args_fn())
        args.setdefault("orient", "records")
        args.setdefault("lines", True)
        text = block_to_batch(block, "pandas").to_json(**args)
        f.write(text.encode("utf-8"))
        if text and not text.endswith("\n"):
            f.write(b"\n")
