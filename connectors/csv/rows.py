"""Where the rows of a CSV file end: the chunk boundaries of :func:`read_csv`.

A CSV file is parsed in chunks cut at row ends (:mod:`shardflow.connectors._text_parsing.line_chunks`). A
line break inside a quoted value does not end a row, so the cut is found by lexing the chunk
from its first byte (always a row's first byte) as Arrow's CSV parser lexes it: a quote opens
a quoted value only at a field's start; inside one, a doubled quote stands for a quote and a
single one closes it; an escape character takes the next byte literally. Cutting at the last
line break instead would split a quoted value that holds one (with ``\\r`` line ends, every
quoted ``\\n``) into two rows.

The lexer is in the compiled CSV parser (``_csv.row_end``); without it, a regular expression
does the same work, more slowly, for chunks that hold a quote or an escape character.
"""

from __future__ import annotations

import re
from typing import Any

from shardflow.connectors._text_parsing.line_chunks import LineEnds, find_byte

try:
    from shardflow.connectors.csv import _csv
except ImportError:  # built without the extension
    _csv = None


class CsvRowEnds(LineEnds):
    """Row ends of CSV text in one dialect (a ``pyarrow.csv.ParseOptions``)."""

    def __init__(self, parse_options: Any = None):
        delimiter = ","
        quote: Any = '"'
        double_quote, escape = True, False
        if parse_options is not None:
            delimiter = parse_options.delimiter
            quote = parse_options.quote_char
            double_quote = parse_options.double_quote
            escape = parse_options.escape_char
        self._delimiter = ord(delimiter)
        self._quote = ord(quote) if quote else -1
        self._double_quote = bool(double_quote)
        self._escape = ord(escape) if escape else -1
        self._pattern: re.Pattern[bytes] | None = None

    def last(self, view: memoryview, stop: int) -> int:
        if _csv is not None:
            return _csv.row_end(view, stop, -1, *self._dialect())
        if not self._may_quote(view[:stop]):
            return super().last(view, stop)
        return self._python_row_end(view, stop, -1)

    def first(self, view: memoryview, start: int) -> int:
        if _csv is not None:
            return _csv.row_end(view, len(view), start, *self._dialect())
        if not self._may_quote(view):
            return super().first(view, start)
        return self._python_row_end(view, len(view), start)

    def _dialect(self) -> tuple[int, int, bool, int]:
        return self._delimiter, self._quote, self._double_quote, self._escape

    def _may_quote(self, view: memoryview) -> bool:
        """Whether ``view`` holds a byte that can put a line break inside a value."""
        return any(
            byte >= 0 and find_byte(view, bytes([byte]), 0) >= 0
            for byte in (self._quote, self._escape)
        )

    def _python_row_end(self, view: memoryview, stop: int, first_from: int) -> int:
        """``_csv.row_end`` in Python: the fields matched one by one."""
        pattern = self._field_pattern()
        data = bytes(view)
        found, pos = -1, 0
        while pos < stop:
            field = pattern.match(data, pos, stop)
            assert field is not None  # every part of the pattern may be empty
            pos = field.end()
            if pos >= stop:
                break
            byte = data[pos]
            if byte == self._delimiter:
                pos += 1
                continue
            if byte not in (0x0A, 0x0D):
                break  # an escape character at the end: its byte is not here yet
            end = pos
            if byte == 0x0D:
                if pos + 1 < stop and data[pos + 1] == 0x0A:
                    end = pos + 1
                elif pos + 1 >= stop and first_from < 0:
                    break  # perhaps the first half of "\r\n"
            if first_from >= 0 and end >= first_from:
                return end
            found, pos = end, end + 1
        return -1 if first_from >= 0 else found

    def _field_pattern(self) -> re.Pattern[bytes]:
        """A field (perhaps empty) at a field's start: a quoted part, if the field starts
        with a quote, then unquoted text."""
        if self._pattern is None:
            delimiter = re.escape(bytes([self._delimiter]))
            escape = re.escape(bytes([self._escape])) if self._escape >= 0 else b""
            escaped = escape + rb"[\s\S]|" if escape else b""
            text = rb"(?:" + escaped + rb"[^" + delimiter + escape + rb"\r\n])*"
            if self._quote >= 0:
                quote = re.escape(bytes([self._quote]))
                doubled = quote + quote + b"|" if self._double_quote else b""
                inside = rb"(?:" + escaped + doubled + rb"[^" + quote + escape + rb"])*"
                # unterminated: the rest is inside the quotes (a last escape waits for its byte)
                unterminated = (escape + b"?" if escape else b"") + rb"\Z"
                quoted = quote + inside + rb"(?:" + quote + b"|" + unterminated + b")"
                self._pattern = re.compile(rb"(?:" + quoted + b")?" + text)
            else:
                self._pattern = re.compile(text)
        return self._pattern
