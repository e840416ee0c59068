"""CSV: ``read_csv`` and ``Dataset.write_csv``, streamed through ``pyarrow.csv``.

Files are parsed incrementally with ``pyarrow.csv.open_csv`` (constant memory per file);
``.gz``, ``.bz2``, ``.zst`` ... files are decompressed on the fly.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_datasource import FileBasedDatasource

_CSV_ARGS = ("read_options", "parse_options", "convert_options")


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
        if read_options is None:
            # Single-threaded, as for JSON: tasks already run in parallel, and Arrow threads
            # reading a Python file object must not outlive the interpreter.
            read_options = pacsv.ReadOptions(use_threads=False)
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
