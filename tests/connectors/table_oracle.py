"""Comparing a C parser's tables with Arrow's (tests/connectors/test_*_native.py)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa


def check_same_as_arrow(got: pa.Table | None, want: pa.Table | Exception, data: bytes) -> None:
    """A C parser's table ``got`` (None: it declined) against Arrow's ``want`` (or the error
    Arrow raised) for the same bytes: where the parser did not decline, Arrow must not raise,
    and the tables must have the same schema, rows, nulls and values, doubles bit for bit."""
    if got is None:
        return
    assert not isinstance(want, Exception), (data[:300], want)
    assert got.schema == want.schema, (data[:300], got.schema, want.schema)
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        mine, theirs = got[name].combine_chunks(), want[name].combine_chunks()
        assert mine.null_count == theirs.null_count, name
        if pa.types.is_floating(theirs.type):  # bit for bit, -0.0 and NaN included
            assert _bits(mine) == _bits(theirs), (name, mine, theirs)
        else:
            assert mine.equals(theirs), (name, mine, theirs)
    got.validate(full=True)


def _bits(array: pa.Array) -> list:
    return [None if v is None else struct.pack("<d", v) for v in array.to_pylist()]


def read_with_and_without(
    monkeypatch: Any, module: Any, extension: str, read: Callable[[], pa.Table]
) -> tuple[pa.Table, pa.Table]:
    """``read()`` with the C parser, then again with ``module.<extension>`` unset (every
    chunk to Arrow)."""
    with_native = read()
    monkeypatch.setattr(module, extension, None)
    try:
        arrow_only = read()
    finally:
        monkeypatch.undo()
    return with_native, arrow_only
