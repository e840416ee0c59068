"""JSON Lines parsed by shardflow's own C parser (``_jsonl.c``), with Arrow's results.

Arrow's JSON reader costs about 6 CPU seconds per GB of JSON Lines on this project's
benchmark (B11-JSONL), more than Polars' whole scan. Most JSON Lines files hold flat objects
of numbers, strings, booleans and nulls; for those, :func:`read_lines` parses a chunk with
the C parser into the same table ``pyarrow.json.read_json`` returns for it (the same column
order, types, values and nulls; doubles correctly rounded), about 3x faster. For anything
else (nested values, strings Arrow may read as timestamps, types that conflict, invalid JSON
or UTF-8, numbers outside int64 or double range, explicit types other than int64, double,
string and bool) it returns None and the caller parses the chunk with Arrow, which then
decides, errors included. The parser is an optional compiled extension: without it (a
platform without a C compiler at install time), every chunk goes to Arrow.

The differential tests in tests/connectors/test_json_lines_native.py compare both parsers on
generated inputs, including every decline.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

try:
    from shardflow.connectors import _jsonl
except ImportError:  # built without the extension: Arrow parses everything
    _jsonl = None

_KINDS: dict[Any, int] = {}
_powers_lock = threading.Lock()
_powers_ready = False


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
            kind = _kind_of(field.type)
            if kind is None or not field.nullable or field.metadata:
                return None
            names.append(field.name)
            kinds.append(kind)
    _ensure_powers()
    parsed = _jsonl.parse(chunk, tuple(names), tuple(kinds), max_line_bytes)
    if isinstance(parsed, str):
        return None
    rows, columns = parsed
    return pa.Table.from_arrays(
        [_array(rows, *column[1:]) for column in columns],
        names=[column[0] for column in columns],
    )


def decline_reason(chunk: Any, schema: pa.Schema | None, max_line_bytes: int) -> str | None:
    """Why the C parser declines ``chunk`` (None when it parses it); for tests."""
    if _jsonl is None:
        return "the C parser is not installed"
    names = tuple(schema.names) if schema is not None else ()
    kinds = tuple(_kind_of(f.type) or 0 for f in schema) if schema is not None else ()
    _ensure_powers()
    parsed = _jsonl.parse(chunk, names, kinds, max_line_bytes)
    return parsed if isinstance(parsed, str) else None


def parse_double(text: str) -> float | None:
    """The double the JSON number ``text`` stands for, by the C parser; for tests."""
    if _jsonl is None:
        return None
    _ensure_powers()
    value: float | None = _jsonl.parse_double(text)
    return value


def _kind_of(arrow_type: pa.DataType) -> int | None:
    if not _KINDS and _jsonl is not None:
        _KINDS.update(
            {
                pa.int64(): _jsonl.INT64,
                pa.float64(): _jsonl.DOUBLE,
                pa.string(): _jsonl.STRING,
                pa.bool_(): _jsonl.BOOL,
            }
        )
    return _KINDS.get(arrow_type)


def _array(rows: int, kind: int, nulls: int, validity: Any, data: Any, offsets: Any) -> pa.Array:
    assert _jsonl is not None
    arrow_type = {
        _jsonl.NULL: pa.null(),
        _jsonl.BOOL: pa.bool_(),
        _jsonl.INT64: pa.int64(),
        _jsonl.DOUBLE: pa.float64(),
        _jsonl.STRING: pa.string(),
    }[kind]
    if data is None:  # no value at all: nulls of the column's type
        return pa.nulls(rows, arrow_type)
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(data)]
    if kind == _jsonl.STRING:
        buffers = [buffers[0], pa.py_buffer(offsets), buffers[1]]
    return pa.Array.from_buffers(arrow_type, rows, buffers, null_count=nulls)


def _ensure_powers() -> None:
    global _powers_ready
    if _powers_ready:
        return
    with _powers_lock:
        if not _powers_ready:
            assert _jsonl is not None
            _jsonl.set_powers(powers_of_ten_table())
            _powers_ready = True


POWERS_MIN, POWERS_MAX = -348, 347


def powers_of_ten_table() -> bytes:
    """128-bit mantissas of 10**e for e in [-348, 347], rounded down, the top bit set, as
    (low 64 bits, high 64 bits) little-endian pairs: the table of the Eisel-Lemire
    algorithm. The binary exponent of each is ``(217706 * e) >> 16`` (checked here)."""
    out = bytearray()
    for e in range(POWERS_MIN, POWERS_MAX + 1):
        if e >= 0:
            value = 10**e
            bits = value.bit_length()
            mantissa = value >> (bits - 128) if bits > 128 else value << (128 - bits)
            exponent = bits - 1
        else:
            divisor = 10**-e
            bits = divisor.bit_length()
            mantissa = (1 << (127 + bits)) // divisor
            exponent = -bits
        if not (1 << 127) <= mantissa < (1 << 128) or (217706 * e) >> 16 != exponent:
            raise AssertionError(f"power of ten table: wrong entry for 1e{e}")
        out += (mantissa & ((1 << 64) - 1)).to_bytes(8, "little")
        out += (mantissa >> 64).to_bytes(8, "little")
    return bytes(out)
