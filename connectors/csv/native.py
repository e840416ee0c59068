"""CSV parsed by shardflow's own C parser (``_csv.c``), with Arrow's results.

Arrow's CSV reader is the whole cost of a CSV scan (B11-CSV: 0.30 s of CPU of the 0.37 s a
scan and its checksum take). For the CSV files most pipelines read (numbers and strings,
comma-separated, quoted with '"'), :func:`read_chunk` parses a chunk with the C parser into
the table ``pyarrow.csv.read_csv`` returns for it with its default options: the same columns,
the same inferred (or given) types among null, int64, float64 and string, the same values
and nulls. Whatever else a chunk holds (columns Arrow may read as bool, date, time or
timestamp; numbers written "+1", " 2", ".5", "0x10" or "1e400"; invalid UTF-8; rows of the
wrong width; a line break inside quotes) makes it return None, and the caller parses the
chunk with Arrow. The parser is an optional compiled extension.

The differential tests in tests/connectors/csv/test_csv_native.py compare both parsers on
generated inputs.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.connectors._text_parsing.native import KINDS, ready, table

try:
    from shardflow.connectors.csv import _csv
except ImportError:  # built without the extension: Arrow parses everything
    _csv = None

_INFER = -1
_words: tuple[tuple[bytes, ...], ...] | None = None


def available() -> bool:
    """Whether the compiled parser is installed."""
    return _csv is not None


def read_chunk(
    chunk: Any,
    column_names: list[str] | None = None,
    column_types: dict[str, pa.DataType] | None = None,
) -> pa.Table | None:
    """Parse ``chunk`` (bytes of whole CSV lines) as ``pyarrow.csv.read_csv`` would with its
    default options, or with ``ReadOptions(column_names=...)`` and
    ``ConvertOptions(column_types=...)``; None when the C parser declines (or is not
    installed) and Arrow must parse it.

    Args:
        chunk: A ``pyarrow.Buffer`` or bytes-like object of whole lines.
        column_names: The columns' names, when the chunk has no header line; None to take
            them from its first line.
        column_types: Types (int64, float64, string) of some columns by name; the other
            columns' types are inferred.

    Returns:
        The table, or None.
    """
    if _csv is None:
        return None
    types = column_types or {}
    if column_names is None:
        if types:
            return None  # types by name need the names before the parse
        names: tuple[str, ...] = ()
        kinds: tuple[int, ...] = ()
    else:
        if set(types) - set(column_names) or len(set(column_names)) != len(column_names):
            return None
        kind_list = []
        for name in column_names:
            arrow_type = types.get(name)
            kind = _INFER if arrow_type is None else KINDS.get(arrow_type)
            if kind is None or kind == KINDS[pa.bool_()]:
                return None
            kind_list.append(kind)
        names, kinds = tuple(column_names), tuple(kind_list)
    parsed = ready(_csv).parse(chunk, names, kinds, *_arrow_words())
    return None if isinstance(parsed, str) else table(parsed)


def decline_reason(chunk: Any) -> str | None:
    """Why the C parser declines ``chunk`` read with a header (None when it parses it)."""
    if _csv is None:
        return "the C parser is not installed"
    parsed = ready(_csv).parse(chunk, (), (), *_arrow_words())
    return parsed if isinstance(parsed, str) else None


def _arrow_words() -> tuple[tuple[bytes, ...], ...]:
    """Arrow's default null, true and false values, from this pyarrow."""
    global _words
    if _words is None:
        import pyarrow.csv as pacsv

        options = pacsv.ConvertOptions()
        _words = tuple(
            tuple(word.encode() for word in words)
            for words in (options.null_values, options.true_values, options.false_values)
        )
    return _words
