"""JSON Lines parsed by shardflow's own C parser (``_jsonl.c``), with Arrow's results.

Arrow's JSON reader costs about 6 CPU seconds per GB of JSON Lines on this project's
benchmark (B11-JSONL), more than Polars' whole scan. Most JSON Lines files hold flat objects
of numbers, strings, booleans and nulls; for those, :func:`read_lines` parses a chunk with
the C parser into the same table ``pyarrow.json.read_json`` returns for it (the same column
order, types, values and nulls; doubles correctly rounded), about 3.5x faster. For anything
else (nested values, strings Arrow may read as timestamps, types that conflict, invalid JSON
or UTF-8, numbers outside int64 or double range, explicit types other than int64, double,
string and bool) it returns None and the caller parses the chunk with Arrow, which then
decides, errors included. The parser is an optional compiled extension: without it (a
platform without a C compiler at install time), every chunk goes to Arrow.

The differential tests in tests/connectors/json/test_json_lines_native.py compare both parsers on
generated inputs, including every decline.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.connectors._text_parsing.native import KINDS, ready, table

try:
    from shardflow.connectors.json import _jsonl
except ImportError:  # built without the extension: Arrow parses everything
    _jsonl = None


def available() -> bool:
    """Whether the compiled parser is installed."""
    return _jsonl is not None


def read_lines(chunk: Any, schema: pa.Schema | None, max_line_bytes: int) -> pa.Table | None:
    """Parse ``chunk`` (bytes of whole JSON Lines) as ``pyarrow.json.read_json`` would with
    default options and ``explicit_schema=schema``; None when the C parser declines (or is
    not installed) and Arrow must parse it.

    Args:
        chunk: A ``pyarrow.Buffer`` or bytes-like object of whole lines.
        schema: Column types to read the named fields as (int64, float64, string, bool),
            as Arrow's ``explicit_schema``; other fields are inferred.
        max_line_bytes: Lines longer than this are declined (Arrow's block size: longer
            objects make Arrow fail, and the caller's fallback decide).

    Returns:
        The table, or None.
    """
    if _jsonl is None:
        return None
    names: list[str] = []
    kinds: list[int] = []
    if schema is not None:
        if schema.metadata:
            return None
        for field in schema:
            kind = KINDS.get(field.type)
            if kind is None or not field.nullable or field.metadata:
                return None
            names.append(field.name)
            kinds.append(kind)
    parsed = ready(_jsonl).parse(chunk, tuple(names), tuple(kinds), max_line_bytes)
    return None if isinstance(parsed, str) else table(parsed)


def decline_reason(chunk: Any, schema: pa.Schema | None, max_line_bytes: int) -> str | None:
    """Why the C parser declines ``chunk`` (None when it parses it); for tests."""
    if _jsonl is None:
        return "the C parser is not installed"
    names = tuple(schema.names) if schema is not None else ()
    kinds = tuple(KINDS.get(f.type, 0) for f in schema) if schema is not None else ()
    parsed = ready(_jsonl).parse(chunk, names, kinds, max_line_bytes)
    return parsed if isinstance(parsed, str) else None


def parse_double(text: str) -> float | None:
    """The double the JSON number ``text`` stands for, by the C parser; for tests."""
    if _jsonl is None:
        return None
    value: float | None = ready(_jsonl).parse_double(text)
    return value
