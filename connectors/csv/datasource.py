"""CSV reads: ``read_csv``, streamed through ``pyarrow.csv``.

Files are read in chunks of about 2 MiB cut at row ends (line breaks outside quoted values,
see :mod:`shardflow.connectors.csv.rows`) and each chunk is parsed with
shardflow's C parser where it gives Arrow's result (files of numbers and strings read with
the default options, see :mod:`shardflow.connectors.csv.native`), else with
``pyarrow.csv.read_csv`` on Arrow's thread pool (see :mod:`shardflow.connectors._text_parsing.line_chunks`),
so a file of any size is read in bounded memory; ``.gz``, ``.bz2``, ``.zst`` ... files are
decompressed on the fly. Column names come from the header, and column types are inferred
from a file's first chunk (a later value that does not fit its column's type is an error, as
with Arrow's streaming reader; a column empty throughout the first chunk is inferred from the
next ones, its first values null). Files read with ``newlines_in_values=True`` or that are
not UTF-8 go through ``pyarrow.csv.open_csv``.
Writes stream too: each block is appended to the task's open file as it arrives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shardflow.connectors._text_parsing.line_chunks import (
    line_chunks,
    read_bytes_for,
    without_bom_strip,
)
from shardflow.connectors.csv import native as csv_native
from shardflow.connectors.csv.rows import CsvRowEnds
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.native_filesystems import is_arrow_file

_CSV_ARGS = ("read_options", "parse_options", "convert_options")


class CSVDatasource(FileBasedDatasource):
    """Reads CSV files. See :func:`shardflow.read_csv` for the arguments."""

    _FILE_EXTENSIONS = ["csv", "csv.gz", "csv.bz2", "csv.zst", "csv.lz4", "csv.br"]
    _ENCODING_RATIO = 1.5
    _INFER_COMPRESSION = True
    _PROBE_BYTES = 1024 * 1024

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

    def _schema_of_start(self, head: bytes) -> Any | None:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        end = CsvRowEnds(self._parse_options).last(memoryview(head), len(head))
        if end < 0:
            return None
        if self._uses_default_options():
            table = csv_native.read_chunk(pa.py_buffer(head[: end + 1]))
            if table is not None:
                return table.schema
        return pacsv.read_csv(
            pa.BufferReader(head[: end + 1]),
            read_options=self._read_options,
            parse_options=self._parse_options,
            convert_options=self._convert_options,
        ).schema

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        parse, read = self._parse_options, self._read_options
        if (parse is not None and parse.newlines_in_values) or (
            read is not None and read.encoding.lower().replace("-", "") != "utf8"
        ):
            # Line ends inside values, or bytes of another encoding: chunks cannot be cut at
            # line ends, so Arrow's streaming reader cuts them.
            yield from self._read_streaming(f)
            return
        yield from self._read_chunks(f)

    def _read_chunks(self, f: Any) -> Iterator[Block]:
        """Parse the file chunk by chunk (see :mod:`shardflow.connectors._text_parsing.line_chunks`): the
        first chunk as the options say (header, skipped rows, types inferred), the following
        ones as headerless rows with the first chunk's column names and the types inferred so
        far (a column that held only nulls so far is inferred again in the next chunk)."""
        import pyarrow as pa
        import pyarrow.csv as pacsv

        first_options = _copy(self._read_options or pacsv.ReadOptions())
        if self._read_options is None:
            first_options.use_threads = self.arrow_threads_help()
        if self._parse_options is not None and self._parse_options.invalid_row_handler:
            first_options.use_threads = False  # the handler is called in file order
        later_read: Any | None = None
        later_convert: Any | None = None
        names: list[str] = []
        keys: list[str] | None = None  # unique stand-ins for repeated column names
        # shardflow's C parser gives Arrow's table for files of numbers and strings read
        # with the default options, ~3x faster; the first chunk it declines (a date column,
        # say) sends the rest of the file to Arrow.
        native = csv_native.available() and self._uses_default_options()
        ends = CsvRowEnds(self._parse_options)
        read_bytes = read_bytes_for(self._reads_local_disk())
        for chunk in line_chunks(f, read_bytes=read_bytes, row_ends=ends):
            try:
                if later_read is None:
                    table = csv_native.read_chunk(chunk) if native else None
                    if table is None:
                        native = False
                        table = pacsv.read_csv(
                            pa.BufferReader(chunk),
                            read_options=first_options,
                            parse_options=self._parse_options,
                            convert_options=self._convert_options,
                        )
                    later_read = self._later_read_options(chunk, first_options, table)
                    later_convert = _copy(self._convert_options or pacsv.ConvertOptions())
                    later_convert.column_types = {}
                    names = table.column_names
                    if len(set(names)) < len(names) and later_read.column_names == names:
                        # Types are pinned by name: columns of one name get unique stand-ins
                        # in the later chunks, so each keeps its own type.
                        keys = _unique_names(names)
                        later_read.column_names = keys
                else:
                    table = None
                    if native:
                        table = csv_native.read_chunk(
                            chunk, later_read.column_names, dict(later_convert.column_types)
                        )
                        native = table is not None
                    if table is None:
                        table = pacsv.read_csv(
                            pa.BufferReader(without_bom_strip(chunk)),
                            read_options=later_read,
                            parse_options=self._parse_options,
                            convert_options=later_convert,
                        )
            except pa.ArrowInvalid as exc:
                if "Empty CSV file" in str(exc):
                    continue
                raise
            del chunk
            known = later_convert.column_types
            found = {
                name: field.type
                for name, field in zip(keys or table.column_names, table.schema)
                if name not in known and not pa.types.is_null(field.type)
            }
            if found:
                later_convert.column_types = {
                    **{name: known[name] for name in known},
                    **found,
                }
            yield table if keys is None else table.rename_columns(names)

    def _uses_default_options(self) -> bool:
        """Whether the file is read with Arrow's default options (what the C parser does)."""
        return (
            self._read_options is None
            and self._parse_options is None
            and self._convert_options is None
        )

    def _later_read_options(self, chunk: Any, first: Any, table: Any) -> Any:
        """Read options for the chunks after the first: no header, the file's column names."""
        names = table.column_names
        if self._convert_options is not None and self._convert_options.include_columns:
            # the table has only some of the file's columns
            names = _file_column_names(chunk, first, self._parse_options)
        read = _copy(first)
        read.column_names = names
        read.autogenerate_column_names = False
        read.skip_rows = 0
        read.skip_rows_after_names = 0
        return read

    def _read_streaming(self, f: Any) -> Iterator[Block]:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        read_options = _copy(self._read_options or pacsv.ReadOptions())
        # Arrow's streaming reader reads ahead on its own threads: only from a file Arrow
        # owns (threads calling into a Python file object could outlive the interpreter),
        # never through a Python transcoder or row handler.
        read_options.use_threads = (
            is_arrow_file(f)
            and read_options.encoding.lower().replace("-", "") == "utf8"
            and (self._parse_options is None or self._parse_options.invalid_row_handler is None)
            and (self._read_options is None or self._read_options.use_threads)
        )
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


def _copy(options: Any) -> Any:
    """A copy of a pyarrow options object (they pickle, and do not support ``copy``)."""
    import pickle

    return pickle.loads(pickle.dumps(options))


def _unique_names(names: list[str]) -> list[str]:
    """``names`` with each repeat of a name made unique (a suffix no header holds)."""
    seen: set[str] = set()
    unique = []
    for name in names:
        key, count = name, 0
        while key in seen:
            count += 1
            key = f"{name}\x00{count}"
        seen.add(key)
        unique.append(key)
    return unique


def _file_column_names(chunk: Any, read_options: Any, parse_options: Any) -> list[str]:
    """All column names of the file whose first chunk is ``chunk`` (before include_columns)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    probe = _copy(read_options)
    probe.use_threads = False
    probe.block_size = min(probe.block_size, 1 << 20)
    reader = pacsv.open_csv(pa.BufferReader(chunk), read_options=probe, parse_options=parse_options)
    return list(reader.schema.names)
