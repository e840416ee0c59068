"""CSV: ``read_csv`` and ``Dataset.write_csv``, streamed through ``pyarrow.csv``.

Files are parsed incrementally with ``pyarrow.csv.open_csv`` in blocks of 16 MiB (bounded
memory per file); ``.gz``, ``.bz2``, ``.zst`` ... files are decompressed on the fly. Column
types are inferred from a file's first block. Files opened through Arrow's own filesystem
(local disk, S3, GCS) are parsed on Arrow's thread pool; files opened through fsspec are
parsed in the read task's thread (Arrow threads must not call into Python file objects).
Writes stream too: each block is appended to the task's open file as it arrives.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import BlockFileWriter
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.native_filesystems import is_arrow_file

_CSV_ARGS = ("read_options", "parse_options", "convert_options")
# Arrow's default of 1 MiB spends a noticeable share of the parse on per-block work.
_BLOCK_BYTES = 16 * 1024 * 1024


class CSVDatasource(FileBasedDatasource):
    """Reads CSV files. See :func:`shardflow.read_csv` for the arguments."""

    _FILE_EXTENSIONS = ["csv", "csv.gz", "csv.bz2", "csv.zst", "csv.lz4", "csv.br"]
    _ENCODING_RATIO = 1.5
    _INFER_COMPRESSION = True

    def __init__(
        self,
        paths: Any,
        *,
        read_options: Any = None,
        parse_options: Any = None,
        convert_options: Any = None,
        **kwargs: Any,
    ):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(
                f"Unknown arguments for read_csv: {sorted(self._file_args)}. CSV options go in "
                "read_options, parse_options and convert_options (pyarrow.csv classes)."
            )
        import pyarrow.csv as pacsv

        for name, value, cls in (
            ("read_options", read_options, pacsv.ReadOptions),
            ("parse_options", parse_options, pacsv.ParseOptions),
            ("convert_options", convert_options, pacsv.ConvertOptions),
        ):
            if value is not None and not isinstance(value, cls):
                raise TypeError(
                    f"{name} must be a pyarrow.csv.{cls.__name__}, got {type(value).__name__}."
                )
        if self._schema is not None:
            convert_options = convert_options or pacsv.ConvertOptions()
            if not convert_options.column_types:
                convert_options.column_types = {f.name: f.type for f in self._schema}
        self._read_options = read_options
        self._parse_options = parse_options
        self._convert_options = convert_options

    def get_name(self) -> str:
        return "CSV"

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        read_options = self._read_options
        # Arrow's threads may read a file Arrow owns, but not call into Python: not a Python
        # file object, a transcoder from another encoding (a Python codec), nor a Python
        # invalid_row_handler.
        threads_safe = (
            is_arrow_file(f)
            and (read_options is None or read_options.encoding.lower().replace("-", "") == "utf8")
            and (self._parse_options is None or self._parse_options.invalid_row_handler is None)
        )
        if read_options is None:
            read_options = pacsv.ReadOptions(use_threads=threads_safe, block_size=_BLOCK_BYTES)
        elif read_options.use_threads and not threads_safe:
            read_options = _copy_read_options(read_options)
            read_options.use_threads = False
        try:
            reader = pacsv.open_csv(
                f,
                read_options=read_options,
                parse_options=self._parse_options,
                convert_options=self._convert_options,
            )
        except pa.ArrowInvalid as exc:
            if "Empty CSV file" in str(exc):
                return
            raise
        for batch in reader:
            yield pa.Table.from_batches([batch])


def _copy_read_options(options: Any) -> Any:
    import pyarrow.csv as pacsv

    return pacsv.ReadOptions(
        use_threads=options.use_threads,
        block_size=options.block_size,
        skip_rows=options.skip_rows,
        skip_rows_after_names=options.skip_rows_after_names,
        column_names=options.column_names,
        autogenerate_column_names=options.autogenerate_column_names,
        encoding=options.encoding,
    )


class CSVDatasink(BlockBasedFileDatasink):
    """Writes CSV files. See :meth:`shardflow.Dataset.write_csv` for the arguments."""

    def __init__(self, path: str, *, write_options: Optional[Any] = None, **kwargs: Any):
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

    def write_block_to_file(self, block: Block, f: Any) -> None:
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
