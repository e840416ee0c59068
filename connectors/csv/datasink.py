"""CSV writes: ``Dataset.write_csv`` through ``pyarrow.csv``, one file per block."""

from __future__ import annotations

from typing import Any

from shardflow.sdk.block import Block
from shardflow.sdk.block_accessor import as_table
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import BlockFileWriter


class CSVDatasink(BlockBasedFileDatasink):
    """Writes CSV files. See :meth:`shardflow.Dataset.write_csv` for the arguments."""

    def __init__(self, path: str, *, write_options: Any | None = None, **kwargs: Any):
        kwargs.setdefault("file_format", "csv")
        super().__init__(path, **kwargs)
        if write_options is not None:
            import pyarrow.csv as pacsv

            if not isinstance(write_options, pacsv.WriteOptions):
                raise TypeError(
                    "write_options must be a pyarrow.csv.WriteOptions, got "
                    f"{type(write_options).__name__}."
                )
        self.write_options = write_options

    def get_name(self) -> str:
        return "CSV"

    def write_block_to_file(self, block: Any, f: Any) -> None:
        block = as_table(block)  # a BlockAccessor from the file layer, or a table
        import pyarrow.csv as pacsv

        pacsv.write_csv(block, f, write_options=self.write_options)

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter:
        return _CSVBlockWriter(f, block.schema, self.write_options)


class _CSVBlockWriter(BlockFileWriter):
    """Appends blocks to one CSV file (one header line, at the top)."""

    def __init__(self, f: Any, schema: Any, write_options: Any):
        import pyarrow.csv as pacsv

        self.schema = schema
        self._writer = pacsv.CSVWriter(f, schema, write_options=write_options)

    def write(self, block: Block) -> bool:
        import pyarrow as pa

        if not block.schema.equals(self.schema, check_metadata=False):
            if block.column_names != self.schema.names:
                return False
            try:
                block = block.cast(self.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return False
        self._writer.write_table(block)
        return True

    def close(self) -> None:
        self._writer.close()
