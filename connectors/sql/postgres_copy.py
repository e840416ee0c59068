"""PostgreSQL's fast path: a query's rows as CSV through ``COPY (query) TO STDOUT``, parsed
by Arrow's CSV reader into typed columns, a block at a time.

Used with psycopg 3 when every column of the result has a type whose CSV text Arrow parses
exactly (integers, floats, booleans, text, fixed-precision numeric, dates, timestamps with
or without time zone, JSON and UUIDs as text); other results go through the cursor. The
server streams the rows; the reader holds one block of text and one Arrow block at a time.
Timestamps with time zone are sent in UTC (``AT TIME ZONE 'UTC'``) and read as UTC instants.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from shardflow.connectors.sql.arrow_types import postgres_type, unique_names

_TEXT_OIDS = {18, 19, 25, 114, 1042, 1043, 2950, 3802}
_PLAIN_OIDS = {16, 20, 21, 23, 26, 700, 701, 1082, 1114} | _TEXT_OIDS
_TIMESTAMPTZ, _NUMERIC = 1184, 1700
_BLOCK_BYTES = 8 * 1024 * 1024


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def copy_columns(description: Sequence[Any]) -> list[tuple[str, pa.DataType, str]] | None:
    """(name, Arrow type, select expression) of each column, or None when a column's text
    cannot be parsed exactly by Arrow's CSV reader (the cursor reads those)."""
    columns = []
    names = [str(d[0]) for d in description]
    if len(set(names)) != len(names):
        return None  # a repeated name cannot be selected from the subquery by name
    for column in description:
        oid, name = column[1], str(column[0])
        kind = postgres_type(column)
        if kind is None:
            return None
        if oid in _PLAIN_OIDS:
            columns.append((name, kind, _quote(name)))
        elif oid == _TIMESTAMPTZ:
            columns.append((name, kind, f"({_quote(name)} AT TIME ZONE 'UTC')"))
        elif oid == _NUMERIC and isinstance(column[4], int) and column[4] > 0:
            columns.append((name, kind, _quote(name)))
        else:
            return None
    return columns


def _segments(rows: Iterator[Any], size: int) -> Iterator[bytearray]:
    """COPY's rows joined into pieces of about ``size`` bytes. libpq returns COPY data a
    whole row at a time, so every piece is a complete CSV text (quoted newlines included).
    Each row is copied at once: holding on to psycopg's row buffers is many times slower."""
    piece = bytearray()
    for row in rows:
        piece += row
        if len(piece) >= size:
            yield piece
            piece = bytearray()
    if piece:
        yield piece


def copy_blocks(
    connection: Any, query: str, params: Any, columns: list[tuple[str, pa.DataType, str]]
) -> Iterator[pa.Table]:
    """The rows of ``query`` as Arrow blocks, through COPY ... TO STDOUT (FORMAT csv)."""
    import pyarrow.csv as pacsv

    names = [name for name, _, _ in columns]
    select = ", ".join(expr for _, _, expr in columns)
    statement = f"COPY (SELECT {select} FROM ({query}) AS shardflow_copy) TO STDOUT (FORMAT csv)"
    parse_types = {
        name: pa.timestamp("us") if pa.types.is_timestamp(kind) else kind
        for name, kind, _ in columns
    }
    aware = [name for name, kind, _ in columns if pa.types.is_timestamp(kind) and kind.tz]
    output = pa.schema([pa.field(n, k) for n, (_, k, _) in zip(unique_names(names), columns)])
    read_options = pacsv.ReadOptions(column_names=names, use_threads=True)
    parse_options = pacsv.ParseOptions(newlines_in_values=True)
    convert_options = pacsv.ConvertOptions(
        column_types=parse_types,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        true_values=["t"],
        false_values=["f"],
    )
    with connection.cursor() as cursor, cursor.copy(statement, params) as copy:
        for piece in _segments(iter(copy), _BLOCK_BYTES):
            table = pacsv.read_csv(
                pa.py_buffer(piece),
                read_options=read_options,
                parse_options=parse_options,
                convert_options=convert_options,
            )
            for name in aware:
                index = table.schema.get_field_index(name)
                table = table.set_column(
                    index, name, table.column(index).cast(pa.timestamp("us", tz="UTC"))
                )
            yield table.rename_columns(output.names)
