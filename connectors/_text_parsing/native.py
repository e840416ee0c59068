"""What shardflow's C text parsers (JSON Lines: ``_jsonl.c``, CSV: ``_csv.c``) share on the
Python side: the table of powers of ten their number parsing needs, and Arrow arrays over the
memory they return.

Both parsers are optional compiled extensions (setup.py): where one is missing, its callers
get None and Arrow parses the file. Each returns, for a chunk it parses, columns of
``(name, kind, null_count, validity, data, offsets)``; :func:`column_array` wraps those
buffers without copying them.
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

#: The ``kind`` codes both C parsers use (their modules export the same values).
NULL, BOOL, INT64, DOUBLE, STRING = 0, 1, 2, 3, 4
ARROW_TYPES = {
    NULL: pa.null(),
    BOOL: pa.bool_(),
    INT64: pa.int64(),
    DOUBLE: pa.float64(),
    STRING: pa.string(),
}
KINDS = {arrow_type: kind for kind, arrow_type in ARROW_TYPES.items() if kind != NULL}

_lock = threading.Lock()
_ready: set[int] = set()


def ready(module: Any) -> Any:
    """``module`` (a compiled parser) with its table of powers of ten loaded."""
    if id(module) not in _ready:
        with _lock:
            if id(module) not in _ready:
                module.set_powers(powers_of_ten_table())
                _ready.add(id(module))
    return module


def column_array(
    rows: int, kind: int, null_count: int, validity: Any, data: Any, offsets: Any
) -> pa.Array:
    """An Arrow array over one column a C parser returned (no copy)."""
    arrow_type = ARROW_TYPES[kind]
    if data is None:  # no value at all: nulls of the column's type
        return pa.nulls(rows, arrow_type)
    bitmap = None if validity is None else pa.py_buffer(validity)
    if kind == STRING:
        buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)]
    else:
        buffers = [bitmap, pa.py_buffer(data)]
    return pa.Array.from_buffers(arrow_type, rows, buffers, null_count=null_count)


def table(parsed: tuple[int, list[tuple]]) -> pa.Table:
    """The table of a C parser's ``(rows, columns)``."""
    rows, columns = parsed
    return pa.Table.from_arrays(
        [column_array(rows, *column[1:]) for column in columns],
        names=[column[0] for column in columns],
    )


POWERS_MIN, POWERS_MAX = -348, 347
_table: bytes | None = None


def powers_of_ten_table() -> bytes:
    """128-bit mantissas of 10**e for e in [-348, 347], rounded down, the top bit set, as
    (low 64 bits, high 64 bits) little-endian pairs: the table of the Eisel-Lemire
    algorithm. The binary exponent of each is ``(217706 * e) >> 16`` (checked here)."""
    global _table
    if _table is not None:
        return _table
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
    _table = bytes(out)
    return _table
