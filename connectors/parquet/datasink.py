"""Parquet writes: ``Dataset.write_parquet``, partitioned or not, one file per block or
more (shardflow's own writer of flat columns where it applies, else Arrow's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.parquet.block_writer import ParquetBlockWriter
from shardflow.sdk.block import Block
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_datasource import conform_to_schema
from shardflow.sdk.filename_provider import TaskFileNamer

_FLAVORS = ("hive", None, "filename")
# Marks a "folder" that is really a file-name prefix ("filename" partitioning flavor).
_NAME_PREFIX_MARK = "\x00"


class ParquetDatasink(BlockBasedFileDatasink):
    """Writes Parquet files. See :meth:`shardflow.Dataset.write_parquet` for the arguments.

    Files are named ``{write_uuid}_{task_index:06}-{i}.parquet`` (``i`` counts the files of
    a write task), as Ray Data names them. ``arrow_parquet_args`` (and what
    ``arrow_parquet_args_fn`` returns) go to ``pyarrow.parquet.ParquetWriter`` (the
    arguments of ``pyarrow.parquet.write_table``), except ``schema`` (every file is cast to
    it) and ``partitioning_flavor`` (``"hive"``, the default, writes ``col=value`` folders;
    None writes bare ``value`` folders; ``"filename"`` puts the values in front of the file
    name).

    Write tasks stream: each block becomes row groups of the task's open file as it arrives
    (see :mod:`shardflow.connectors.parquet.block_writer`, which also says which columns are
    dictionary-encoded when ``use_dictionary`` is not given).
    """

    def __init__(
        self,
        path: Any,
        *,
        compression: str | dict[str, str] | None = "snappy",
        arrow_parquet_args_fn: Any | None = None,
        arrow_parquet_args: dict[str, Any] | None = None,
        max_rows_per_file: int | None = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("file_format", "parquet")
        args = dict(arrow_parquet_args or {})
        open_stream_args = dict(kwargs.get("open_stream_args") or {})
        if "compression" in open_stream_args:  # the codec, not a stream compression
            args["compression"] = open_stream_args.pop("compression")
            kwargs["open_stream_args"] = open_stream_args
        super().__init__(path, **kwargs)
        if arrow_parquet_args_fn is not None and not callable(arrow_parquet_args_fn):
            raise TypeError("arrow_parquet_args_fn must be a function returning a dict.")
        if max_rows_per_file is not None and (
            isinstance(max_rows_per_file, bool)
            or not isinstance(max_rows_per_file, int)
            or max_rows_per_file < 1
        ):
            raise ValueError(
                f"max_rows_per_file must be a positive int or None, got {max_rows_per_file!r}."
            )
        if (
            max_rows_per_file is not None
            and self.min_rows_per_file is not None
            and self.min_rows_per_file > max_rows_per_file
        ):
            raise ValueError("min_rows_per_file must be less than or equal to max_rows_per_file.")
        row_group_size = args.get("row_group_size")
        if row_group_size is not None and (
            isinstance(row_group_size, bool)
            or not isinstance(row_group_size, int)
            or row_group_size < 1
        ):
            # pyarrow.ArrowInvalid (a ValueError), as Ray Data's write raises for it
            raise pa.ArrowInvalid(f"row_group_size must be a positive int, got {row_group_size!r}.")
        schema = args.get("schema")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}.")
        flavor = args.get("partitioning_flavor", "hive")
        if flavor not in _FLAVORS:
            raise ValueError(
                f"partitioning_flavor must be 'hive', None or 'filename', got {flavor!r}."
            )
        if "partitioning_flavor" in args and not self.partition_cols:
            raise ValueError("partition_cols must be provided when partitioning_flavor is set.")
        self.compression = compression
        self.arrow_parquet_args_fn = arrow_parquet_args_fn
        self.arrow_parquet_args = args
        self.max_rows_per_file = max_rows_per_file

    def get_name(self) -> str:
        return "Parquet"

    def _write_args(self) -> dict[str, Any]:
        args = dict(self.arrow_parquet_args)
        if self.arrow_parquet_args_fn is not None:
            args.update(self.arrow_parquet_args_fn())
        args.setdefault("compression", self.compression)
        return args

    def _namer(self, write_uuid: str, task_index: int) -> TaskFileNamer:
        return TaskFileNamer(self.filename_provider, write_uuid, task_index, indexed=True)

    def _split_partitions(self, block: Block) -> Iterator[tuple[str, Block]]:
        flavor = self._write_args().get("partitioning_flavor", "hive")
        for folder, part in super()._split_partitions(block):
            if flavor == "hive" or not folder:
                yield folder, part
            else:
                values = [piece.split("=", 1)[1] for piece in folder.split("/")]
                if flavor is None:
                    yield "/".join(values), part
                else:
                    yield _NAME_PREFIX_MARK + "_".join(values), part

    def _prepare_block(self, block: Block) -> Block:
        schema = self.arrow_parquet_args.get("schema")
        if schema is not None:
            block = conform_to_schema(block, schema, where=f"the data written to {self.path}")
        return block

    def _max_rows_per_file(self) -> int | None:
        return self.max_rows_per_file

    def _file_name(self, namer: TaskFileNamer, block: Block, folder: str, index: int) -> str:
        if folder.startswith(_NAME_PREFIX_MARK):  # "filename" flavor: values before the name
            prefix = folder[len(_NAME_PREFIX_MARK) :] + "_"
            return prefix + namer.block_file(block, index, "")
        return namer.block_file(block, index, folder)

    def open_block_writer(self, f: Any, block: Block) -> ParquetBlockWriter:
        args = self._write_args()
        args.pop("partitioning_flavor", None)
        args.pop("schema", None)
        return ParquetBlockWriter(f, block, args)

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        writer = self.open_block_writer(f, block)
        writer.write(block)
        writer.close()
