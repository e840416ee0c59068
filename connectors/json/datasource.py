"""JSON reads: ``read_json`` (JSON Lines or a top-level JSON array).

JSON Lines files are read in chunks of about 2 MiB cut at line ends, each parsed with
``pyarrow.json.read_json`` on Arrow's thread pool (see :mod:`shardflow.connectors._text_parsing.line_chunks`);
the chunks after the first are parsed with the types found before them. A file holding one
JSON document (an array of objects, or a single object) is parsed whole. ``lines=None``
detects which kind each file is; ``write_json`` writes JSON Lines. JSON Lines that Arrow
cannot parse (values of mixed types, objects larger than a block) are parsed with Python's
``json`` instead, as Ray Data does; mixed-type fields become columns of Python objects.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors._text_parsing.line_chunks import (
    line_chunks,
    read_bytes_for,
    without_bom_strip,
)
from shardflow.connectors.json import native as json_lines_native
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.file_reading import FileUnit
from shardflow.sdk.native_filesystems import is_arrow_file

_ROWS_PER_BLOCK = 16384
# Larger than Arrow's default of 1 MiB: objects up to this size parse with Arrow rather than
# with Python's json.
_BLOCK_BYTES = 4 * 1024 * 1024
_PEEK_BYTES = 4096
_WHITESPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


class JSONLineDecodeError(json.JSONDecodeError):
    """A line of a JSON Lines file is not valid JSON (a ``json.JSONDecodeError``).

    Unlike its base class it keeps only its message, so it pickles from workers to the
    driver.
    """

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.msg, self.doc, self.pos, self.lineno, self.colno = message, "", 0, 0, 0

    def __reduce__(self) -> tuple:
        return type(self), (str(self),)


class JSONDatasource(FileBasedDatasource):
    """Reads JSON and JSON Lines files. See :func:`shardflow.read_json` for the arguments."""

    _FILE_EXTENSIONS = [
        "json",
        "jsonl",
        "json.gz",
        "jsonl.gz",
        "json.bz2",
        "jsonl.bz2",
        "json.zst",
        "jsonl.zst",
        "json.lz4",
        "jsonl.lz4",
        "json.br",
        "jsonl.br",
    ]
    _ENCODING_RATIO = 1.0
    _INFER_COMPRESSION = True
    _PROBE_BYTES = 1024 * 1024

    def __init__(
        self,
        paths: Any,
        *,
        lines: bool | None = None,
        read_options: Any = None,
        parse_options: Any = None,
        **kwargs: Any,
    ):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(
                f"Unknown arguments for read_json: {sorted(self._file_args)}. JSON options go in "
                "read_options and parse_options (pyarrow.json classes)."
            )
        if lines not in (None, True, False):
            raise ValueError(f"lines must be None (detect), True or False, got {lines!r}.")
        import pyarrow.json as pajson

        if read_options is not None and not isinstance(read_options, pajson.ReadOptions):
            raise TypeError(
                "read_options must be a pyarrow.json.ReadOptions, got "
                f"{type(read_options).__name__}."
            )
        if parse_options is not None and not isinstance(parse_options, pajson.ParseOptions):
            raise TypeError(
                "parse_options must be a pyarrow.json.ParseOptions, got "
                f"{type(parse_options).__name__}."
            )
        if self._schema is not None:
            parse_options = parse_options or pajson.ParseOptions()
            if parse_options.explicit_schema is None:
                parse_options.explicit_schema = self._schema
        self._lines = lines
        self._read_options = read_options
        self._parse_options = parse_options

    def get_name(self) -> str:
        return "JSON"

    def _schema_of_start(self, head: bytes) -> pa.Schema | None:
        import pyarrow.json as pajson

        start = _first_byte(head, at_file_start=True)
        end = head.rfind(b"\n")
        if start != b"{" or self._lines is False or end < 0:
            return None  # a JSON document (an array) is typed row by row, in Python
        if self._native_lines():
            parse = self._parse_options
            explicit = parse.explicit_schema if parse is not None else None
            table = json_lines_native.read_lines(
                pa.py_buffer(head[: end + 1]), explicit, _BLOCK_BYTES
            )
            if table is not None:
                return table.schema
        try:
            return pajson.read_json(
                pa.BufferReader(head[: end + 1]),
                read_options=pajson.ReadOptions(block_size=_BLOCK_BYTES),
                parse_options=self._parse_options,
            ).schema
        except pa.ArrowInvalid:  # values Arrow cannot type: read with Python's json
            return None

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        return self._read_json(f, lambda: self._open_file(unit.path))

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        return self._read_json(f, None)

    def _read_json(self, f: Any, reopen: Callable[[], Any] | None) -> Iterator[Block]:
        """Read one file. Detecting the kind of file and falling back to Python's parser read
        it from its start again: by seeking, or, for a forward-only stream (a compressed file
        opened through Arrow), from a fresh handle that ``reopen`` opens."""
        opened: list[Any] = []

        def rewind(current: Any) -> Any:
            if current.seekable():
                current.seek(0)
                return current
            fresh = reopen()
            opened.append(fresh)
            return fresh

        if not f.seekable() and reopen is None:
            f = io.BytesIO(f.read())  # some decompressors cannot go back after the peek below
        try:
            yield from self._read_detected(f, rewind)
        finally:
            for extra in opened:
                extra.close()

    def _read_detected(self, f: Any, rewind: Callable[[Any], Any]) -> Iterator[Block]:
        head = f.read(_PEEK_BYTES)
        first = _first_byte(head, at_file_start=True)
        while not first and head:
            head = f.read(_PEEK_BYTES)
            first = _first_byte(head, at_file_start=False)
        if not first:
            return
        f = rewind(f)
        if self._lines is False or (self._lines is None and first == b"["):
            yield from self._read_document(f)
            return
        produced = 0
        try:
            for block in self._read_lines(f):
                produced += block.num_rows
                yield block
        except pa.ArrowInvalid:
            # Arrow cannot parse it: perhaps one (pretty-printed) JSON object, else JSON Lines
            # whose values Arrow cannot type (mixed types, an object larger than a block):
            # parse it with Python's json, as Ray Data falls back to.
            f = rewind(f)
            if self._lines is None and not produced and first == b"{":
                try:
                    blocks = list(self._read_document(f))
                except ValueError:
                    f = rewind(f)
                else:
                    yield from blocks
                    return
            yield from self._read_lines_with_python(f, skip_rows=produced)

    def _read_lines_with_python(self, f: Any, skip_rows: int) -> Iterator[Block]:
        from shardflow.sdk.block import rows_to_block

        text = io.TextIOWrapper(f, encoding="utf-8-sig")
        rows: list[dict[str, Any]] = []
        try:
            for number, line in enumerate(text, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise JSONLineDecodeError(
                        f"{exc.msg}: line {number} column {exc.colno} (char {exc.pos})"
                    ) from None
                if not isinstance(row, dict):
                    raise ValueError(f"line {number} holds a {type(row).__name__}, not an object")
                if skip_rows:
                    skip_rows -= 1
                    continue
                rows.append(row)
                if len(rows) >= _ROWS_PER_BLOCK:
                    yield rows_to_block(rows)
                    rows = []
        finally:
            text.detach()  # the caller closes the file
        if rows:
            yield rows_to_block(rows)

    def _read_lines(self, f: Any) -> Iterator[Block]:
        import pyarrow as pa
        import pyarrow.json as pajson

        parse = self._parse_options or pajson.ParseOptions()
        if parse.newlines_in_values:  # objects span lines: Arrow's streaming reader cuts
            yield from self._read_lines_streaming(f)
            return
        user = self._read_options
        read = pajson.ReadOptions(
            use_threads=self.arrow_threads_help() if user is None else user.use_threads,
            block_size=_BLOCK_BYTES if user is None else user.block_size,
        )
        # With fields inferred (the default), the chunks after the first are read with the
        # types found so far, as Arrow's streaming reader reads its blocks with the first
        # one's; a field that held only nulls so far is inferred again in the next chunk.
        pin = parse.unexpected_field_behavior == "infer"
        # shardflow's C parser gives Arrow's table for flat objects, ~4x faster; the first
        # chunk it declines (nested values, say) sends the rest of the file to Arrow.
        native = self._native_lines()
        current = parse
        first = True
        for chunk in line_chunks(f, read_bytes=read_bytes_for(self._reads_local_disk())):
            table = None
            if native and chunk.size <= _BLOCK_BYTES:
                table = json_lines_native.read_lines(chunk, current.explicit_schema, _BLOCK_BYTES)
                native = table is not None
            if table is None:
                data = chunk if first else without_bom_strip(chunk)
                table = pajson.read_json(
                    pa.BufferReader(data), read_options=read, parse_options=current
                )
                del data
            first = False
            del chunk
            if pin:
                known = current.explicit_schema
                found = [
                    field
                    for field in table.schema
                    if not pa.types.is_null(field.type)
                    and (known is None or known.get_field_index(field.name) < 0)
                ]
                if found:
                    current = _copy(parse)
                    current.explicit_schema = pa.schema([*(known or []), *found])
            yield table

    def _native_lines(self) -> bool:
        """Whether JSON Lines chunks may go to the C parser (Arrow's default read options,
        fields inferred, no line breaks inside values)."""
        parse = self._parse_options
        return (
            json_lines_native.available()
            and self._read_options is None
            and (
                parse is None
                or (parse.unexpected_field_behavior == "infer" and not parse.newlines_in_values)
            )
        )

    def _read_lines_streaming(self, f: Any) -> Iterator[Block]:
        import pyarrow as pa
        import pyarrow.json as pajson

        # Arrow's streaming reader reads ahead on its own threads: only from a file Arrow
        # owns (threads calling into a Python file object could outlive the interpreter).
        user = self._read_options
        threads = is_arrow_file(f) and (user is None or user.use_threads)
        block_size = _BLOCK_BYTES if user is None else user.block_size
        options = pajson.ReadOptions(use_threads=threads, block_size=block_size)
        reader = pajson.open_json(f, read_options=options, parse_options=self._parse_options)
        for batch in reader:
            yield pa.Table.from_batches([batch])

    def _read_document(self, f: Any) -> Iterator[Block]:
        import pyarrow as pa

        text = io.TextIOWrapper(f, encoding="utf-8-sig")
        try:
            document = json.load(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
        finally:
            text.detach()  # the caller closes the file
        rows: list[dict[str, Any]]
        if isinstance(document, dict):
            rows = [document]
        elif isinstance(document, list):
            if not all(isinstance(r, dict) for r in document):
                raise ValueError("a top-level JSON array must hold objects (one per row).")
            rows = document
        else:
            raise ValueError(
                "a JSON file must hold an object or an array of objects, not "
                f"{type(document).__name__}."
            )
        schema = self._parse_options.explicit_schema if self._parse_options is not None else None
        for start in range(0, len(rows), _ROWS_PER_BLOCK):
            yield pa.Table.from_pylist(rows[start : start + _ROWS_PER_BLOCK], schema=schema)


def _first_byte(head: bytes, at_file_start: bool) -> bytes:
    """The first byte of ``head`` that is not JSON whitespace (after a byte order mark that
    starts the file), or b"" when there is none. Only whitespace makes a file empty: other
    bytes go to the parsers, which decide (a stray byte of a byte order mark after a line
    break is an error, as in Arrow)."""
    if at_file_start and head.startswith(_BOM):
        head = head[len(_BOM) :]
    return head.lstrip(_WHITESPACE)[:1]


def _copy(options: Any) -> Any:
    """A copy of a pyarrow options object (they pickle, and do not support ``copy``)."""
    import pickle

    return pickle.loads(pickle.dumps(options))
