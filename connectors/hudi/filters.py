"""Hudi's ``(column, op, value)`` filters: checked on the driver, applied to rows in tasks.

hudi prunes partitions (and, from 0.5, files by their statistics) with these tuples, but a
file it keeps may still hold rows a filter on a data column rejects; applying the filters to
the rows read makes them exact. Values are strings, as Hudi takes them, cast to the column's
type.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

OPERATORS = ("=", "!=", "<", "<=", ">", ">=")


def check_filters(filters: Any) -> list[tuple[str, str, str]]:
    """The filters as a list of ``(column, op, value)`` string tuples, or an error saying why."""
    if filters is None:
        return []
    if isinstance(filters, tuple) and len(filters) == 3 and isinstance(filters[0], str):
        raise TypeError(f"filters must be a list of (column, op, value) tuples: [{filters!r}].")
    if not isinstance(filters, (list, tuple)):
        raise TypeError(f"filters must be a list of (column, op, value) tuples, got {filters!r}.")
    checked = []
    for item in filters:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise TypeError(f"a filter must be a (column, op, value) tuple, got {item!r}.")
        column, op, value = item
        if not isinstance(column, str) or not isinstance(op, str):
            raise TypeError(f"a filter's column and op must be strings, got {item!r}.")
        if op not in OPERATORS:
            raise ValueError(f"filter {item!r}: op must be one of {', '.join(OPERATORS)}.")
        if not isinstance(value, str):
            raise TypeError(
                f"filter {item!r}: the value must be a string (Hudi casts it to the "
                f"column's type), e.g. {str(value)!r}."
            )
        checked.append((column, op, value))
    return checked


def rows_filter(filters: list[tuple[str, str, str]], schema: pa.Schema) -> Any:
    """A pyarrow compute expression every filter's rows satisfy, or None for no filters.

    Raises ValueError for a column the table lacks or a value its type cannot hold.
    """
    if not filters:
        return None
    import pyarrow.compute as pc

    expression = None
    for column, op, value in filters:
        if column not in schema.names:
            raise ValueError(
                f"filter {(column, op, value)!r}: the table has no column {column!r} "
                f"(columns: {', '.join(schema.names)})."
            )
        kind = schema.field(column).type
        try:
            literal = pa.array([value]).cast(kind)[0]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(
                f"filter {(column, op, value)!r}: {value!r} is not a value of column "
                f"{column!r} ({kind}): {exc}"
            ) from exc
        field = pc.field(column)
        term = {
            "=": field == literal,
            "!=": field != literal,
            "<": field < literal,
            "<=": field <= literal,
            ">": field > literal,
            ">=": field >= literal,
        }[op]
        expression = term if expression is None else expression & term
    return expression
