"""Comparing tables as multisets of rows, with messages that show what differs.

Read tasks may run in any order, so the conformance checks compare the rows a source
produced with the expected rows regardless of order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import pyarrow as pa


def _hashable(value: Any) -> Hashable:
    """A hashable, order-insensitive-safe stand-in for one cell value."""
    if isinstance(value, float) and math.isnan(value):
        return ("<nan>",)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _hashable(value.tolist())
    return value


def row_counter(table: pa.Table, columns: Sequence[str] | None = None) -> Counter[Hashable]:
    """Count each distinct row of ``table`` (restricted to ``columns`` when given)."""
    names = list(columns) if columns is not None else table.column_names
    if not names:
        return Counter({(): table.num_rows}) if table.num_rows else Counter()
    data = [table.column(name).to_pylist() for name in names]
    return Counter(tuple(_hashable(col[i]) for col in data) for i in range(table.num_rows))


def _sample(rows: Iterable[Any], limit: int = 5) -> str:
    shown: list[str] = []
    for i, row in enumerate(rows):
        if i == limit:
            shown.append("...")
            break
        shown.append(repr(row))
    return "[" + ", ".join(shown) + "]"


def concat(tables: Sequence[pa.Table], template: pa.Table | None = None) -> pa.Table:
    """Concatenate blocks, ignoring blocks with neither rows nor columns."""
    useful = [t for t in tables if t.num_rows or t.num_columns]
    if not useful:
        return template.slice(0, 0) if template is not None else pa.table({})
    if len(useful) == 1:
        return useful[0]
    try:
        return pa.concat_tables(useful)
    except pa.ArrowInvalid:
        return pa.concat_tables(useful, promote_options="permissive")


def assert_same_columns(
    actual: pa.Table, expected: pa.Table, what: str, check_types: bool = True
) -> None:
    """Raise AssertionError unless ``actual`` has ``expected``'s column names and types."""
    if actual.num_rows == 0 and actual.num_columns == 0 and expected.num_rows == 0:
        return  # nothing was read and nothing was expected: no schema to compare
    if actual.column_names != expected.column_names:
        raise AssertionError(
            f"{what}: columns {actual.column_names} differ from the expected "
            f"{expected.column_names}."
        )
    if check_types:
        for field in expected.schema:
            got = actual.schema.field(field.name).type
            if not got.equals(field.type):
                raise AssertionError(
                    f"{what}: column {field.name!r} has type {got}, expected {field.type}. "
                    "Set check_types = False on the conformance class if the format cannot keep it."
                )


def assert_same_rows(
    actual: pa.Table, expected: pa.Table, what: str, check_types: bool = True
) -> None:
    """Raise AssertionError unless both tables hold the same multiset of rows and columns.

    Args:
        actual: What the connector produced.
        expected: The oracle.
        what: Says which check failed, for the message.
        check_types: Also compare column types.

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.sdk.testing import assert_same_rows
        >>> assert_same_rows(pa.table({"x": [2, 1]}), pa.table({"x": [1, 2]}), "example")
    """
    assert_same_columns(actual, expected, what, check_types)
    if actual.num_rows != expected.num_rows:
        raise AssertionError(f"{what}: {actual.num_rows} rows, expected {expected.num_rows}.")
    got, want = row_counter(actual, expected.column_names), row_counter(expected)
    if got != want:
        missing, extra = want - got, got - want
        raise AssertionError(
            f"{what}: rows differ from the expected ones. Missing {sum(missing.values())} "
            f"{_sample(missing.elements())}; unexpected {sum(extra.values())} "
            f"{_sample(extra.elements())}."
        )


def assert_rows_included(actual: pa.Table, expected: pa.Table, what: str) -> None:
    """Raise AssertionError unless every row of ``expected`` is among the rows of ``actual``."""
    missing = row_counter(expected) - row_counter(actual, expected.column_names)
    if missing:
        raise AssertionError(
            f"{what}: {sum(missing.values())} expected row(s) are missing: "
            f"{_sample(missing.elements())}."
        )


def error_text(exc: BaseException) -> str:
    """The messages of an exception and of every exception it was raised from."""
    parts, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)
