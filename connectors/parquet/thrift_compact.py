"""Thrift's compact protocol, write side only: what Parquet's metadata is serialized with.

A struct is written from a list of ``(field_id, kind, value)`` fields in increasing id
order; fields whose value is None are left out. Values by kind: ``BOOL`` a bool, ``I8``,
``I16``, ``I32`` and ``I64`` an int, ``BINARY`` bytes (or str, written as UTF-8), ``STRUCT``
the bytes :func:`struct` returned, ``LIST`` a ``(element_kind, items)`` pair. A union is a
struct with one field.

Examples:
    >>> from shardflow.connectors.parquet.thrift_compact import I32, BINARY, struct
    >>> struct([(1, I32, 3), (4, BINARY, "x")]).hex()
    '150638017800'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Compact protocol type codes (BOOL is written as TRUE or FALSE in a field header).
BOOL = 1
I8 = 3
I16 = 4
I32 = 5
I64 = 6
BINARY = 8
LIST = 9
STRUCT = 12
_FALSE = 2

Field = tuple[int, int, Any]


def varint(value: int) -> bytes:
    """``value`` (not negative) as an unsigned LEB128 varint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag(value: int) -> bytes:
    return varint((value << 1) ^ (value >> 63))


def _value(kind: int, value: Any) -> bytes:
    if kind in (I16, I32, I64):
        return _zigzag(int(value))
    if kind == I8:
        return bytes([int(value) & 0xFF])
    if kind == BINARY:
        raw = value.encode() if isinstance(value, str) else bytes(value)
        return varint(len(raw)) + raw
    if kind == STRUCT:
        return bytes(value)
    if kind == LIST:
        element_kind, items = value
        return list_of(element_kind, items)
    raise ValueError(f"unsupported Thrift kind {kind}")


def list_of(element_kind: int, items: Iterable[Any]) -> bytes:
    """A list's encoding: header, then its elements (bools as one byte each)."""
    items = list(items)
    header = (
        bytes([(len(items) << 4) | element_kind])
        if len(items) < 15
        else bytes([0xF0 | element_kind]) + varint(len(items))
    )
    if element_kind == BOOL:
        return header + bytes(BOOL if item else _FALSE for item in items)
    return header + b"".join(_value(element_kind, item) for item in items)


def struct(fields: Iterable[Field]) -> bytes:
    """A struct's encoding: its fields, then the stop byte."""
    out = bytearray()
    last = 0
    for field_id, kind, value in fields:
        if value is None:
            continue
        if field_id <= last:
            raise ValueError(f"Thrift field ids must increase; {field_id} follows {last}")
        header_kind = (BOOL if value else _FALSE) if kind == BOOL else kind
        delta = field_id - last
        if delta <= 15:
            out.append((delta << 4) | header_kind)
        else:
            out.append(header_kind)
            out += _zigzag(field_id)
        if kind != BOOL:
            out += _value(kind, value)
        last = field_id
    out.append(0)
    return bytes(out)
