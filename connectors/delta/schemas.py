"""Arrow schemas of Delta writes: types Delta stores, and a dataset against a table."""

from __future__ import annotations

import pyarrow as pa

_SIGNED = {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}


def _delta_type(kind: pa.DataType, column: str, where: str) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.timestamp("us", tz=None if kind.tz is None else "UTC")
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_unsigned_integer(kind):
        if kind.bit_width == 64:
            raise TypeError(
                f"{where}: column {column!r} is uint64, which Delta cannot store; cast it to "
                "int64 first."
            )
        return _SIGNED[kind.bit_width]
    if pa.types.is_float16(kind):
        return pa.float32()
    if pa.types.is_dictionary(kind):
        return _delta_type(kind.value_type, column, where)
    if pa.types.is_null(kind):
        raise TypeError(
            f"{where}: column {column!r} holds only nulls (type null), which Delta cannot "
            "store; cast it to the type it should have."
        )
    if pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return pa.list_(_delta_type(kind.value_type, column, where))
    if pa.types.is_list(kind):
        return pa.list_(_delta_type(kind.value_type, column, where))
    if pa.types.is_struct(kind):
        return pa.struct(
            [f.with_type(_delta_type(f.type, f"{column}.{f.name}", where)) for f in kind]
        )
    return kind


def delta_ready_schema(schema: pa.Schema, where: str) -> pa.Schema:
    """``schema`` with the types Delta stores (microsecond timestamps, no unsigned or large
    types); raises TypeError naming a column Delta cannot hold."""
    return pa.schema(
        [f.with_type(_delta_type(f.type, f.name, where)).remove_metadata() for f in schema]
    )


def merge_schemas(table: pa.Schema, dataset: pa.Schema, where: str) -> None:
    """Check that ``dataset`` can be appended to a table of schema ``table``."""
    extra = [n for n in dataset.names if n not in table.names]
    if extra:
        raise ValueError(
            f"{where}: column(s) {extra} are not in the table (columns: "
            f"{', '.join(table.names)}). Add them to the table first, or overwrite it "
            "(mode='overwrite' replaces the schema)."
        )
    ready = delta_ready_schema(dataset, where)
    for field in ready:
        expected = table.field(field.name).type
        if field.type != expected and not _widens(field.type, expected):
            raise TypeError(
                f"{where}: column {field.name!r} is {field.type} in the dataset but "
                f"{expected} in the table."
            )
    required = [f.name for f in table if not f.nullable and f.name not in dataset.names]
    if required:
        raise ValueError(f"{where}: the dataset lacks the required column(s) {required}.")


def _widens(source: pa.DataType, target: pa.DataType) -> bool:
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_integer(source) and pa.types.is_floating(target):
        return source.bit_width < target.bit_width
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return (source.tz is None) == (target.tz is None)
    return False


def conform(block: pa.Table, table: pa.Schema, where: str) -> pa.Table:
    """``block`` with the table's columns, order and types (absent nullable columns null)."""
    merge_schemas(table, block.schema, where)
    arrays = []
    for field in table:
        if field.name in block.column_names:
            column = block.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(block.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=table)
