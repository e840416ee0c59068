"""Text: ``read_text``, one row per line in column ``text``."""

from __future__ import annotations

import codecs
import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource

_LINES_PER_BLOCK = 65536


class TextDatasource(FileBasedDatasource):
    """Reads lines of text files. See :func:`shardflow.read_text` for the arguments.

    Lines end at ``\\n``, ``\\r\\n`` or ``\\r``; the line ends are not part of the text, and a
    final line end does not start another (empty) line.
    """

    _INFER_COMPRESSION = True
    _ENCODING_RATIO = 1.2

    def __init__(
        self, paths: Any, *, encoding: str = "utf-8", drop_empty_lines: bool = True, **kwargs: Any
    ):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_text: {sorted(self._file_args)}.")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"Unknown text encoding {encoding!r}.") from None
        self._encoding = encoding
        self._drop_empty_lines = bool(drop_empty_lines)

    def get_name(self) -> str:
        return "Text"

    def _static_schema(self) -> pa.Schema | None:
        return pa.schema([("text", pa.string())])

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        text = io.TextIOWrapper(f, encoding=self._encoding, errors="strict", newline=None)
        try:
            yield from self._lines(text)
        finally:
            text.detach()  # the caller closes the file

    def _lines(self, text: Any) -> Iterator[Block]:
        lines = []
        for line in text:
            line = line[:-1] if line.endswith("\n") else line
            if self._drop_empty_lines and not line:
                continue
            lines.append(line)
            if len(lines) >= _LINES_PER_BLOCK:
                yield pa.table({"text": pa.array(lines, pa.string())})
                lines = []
        if lines:
            yield pa.table({"text": pa.array(lines, pa.string())})
