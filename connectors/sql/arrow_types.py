"""Arrow types for the columns of a query result, from the cursor's description.

PostgreSQL drivers (psycopg 3, psycopg2) give each column's type OID, and numeric's
precision and scale: columns get the matching Arrow type, the same in every block of every
task. Other drivers (sqlite3, most others) give names only: a column's type is then taken
from its first non-null values and kept for the rest of the task (a later value that does not
fit raises an error naming the column: cast it in the query).
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

# Precision and scale of NUMERIC columns declared without them: values are rounded to 18
# decimal places (cast in the query, e.g. ``avg(x)::float8``, to choose another type).
UNCONSTRAINED_NUMERIC = pa.decimal128(38, 18)

_PG_SCALARS: dict[int, pa.DataType] = {
    16: pa.bool_(),
    17: pa.binary(),
    18: pa.string(),  # "char"
    19: pa.string(),  # name
    20: pa.int64(),
    21: pa.int16(),
    23: pa.int32(),
    25: pa.string(),
    26: pa.int64(),  # oid
    114: pa.string(),  # json, kept as its text
    142: pa.string(),  # xml
    650: pa.string(),  # cidr
    700: pa.float32(),
    701: pa.float64(),
    790: pa.string(),  # money, as the server formats it
    829: pa.string(),  # macaddr
    869: pa.string(),  # inet
    1042: pa.string(),  # bpchar
    1043: pa.string(),  # varchar
    1082: pa.date32(),
    1083: pa.time64("us"),
    1114: pa.timestamp("us"),
    1184: pa.timestamp("us", tz="UTC"),
    1186: pa.duration("us"),
    1266: pa.string(),  # timetz
    2950: pa.string(),  # uuid
    3802: pa.string(),  # jsonb, kept as its text
}
_PG_NUMERIC = 1700
_PG_ARRAYS: dict[int, int] = {
    1000: 16,
    1001: 17,
    1005: 21,
    1007: 23,
    1016: 20,
    1009: 25,
    1015: 1043,
    1021: 700,
    1022: 701,
    1182: 1082,
    1115: 1114,
    1185: 1184,
    2951: 2950,
}
JSON_TYPE_NAMES = ("json", "jsonb")


def _numeric_type(precision: Any, scale: Any) -> pa.DataType:
    if not isinstance(precision, int) or precision <= 0 or not isinstance(scale, int):
        return UNCONSTRAINED_NUMERIC
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(min(precision, 76), scale)


def postgres_type(description: Sequence[Any]) -> pa.DataType | None:
    """The Arrow type of one PostgreSQL column description, or None when unknown."""
    oid = description[1]
    if not isinstance(oid, int):
        return None
    if oid == _PG_NUMERIC:
        return _numeric_type(description[4], description[5])
    if oid in _PG_SCALARS:
        return _PG_SCALARS[oid]
    if oid in _PG_ARRAYS:
        return pa.list_(_PG_SCALARS[_PG_ARRAYS[oid]])
    return None


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):  # a driver that parses JSON (psycopg2)
        return json.dumps(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _quantize(value: Any, scale: int) -> Any:
    if value is None:
        return None
    if isinstance(value, decimal.Decimal):
        return value.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_EVEN)
    return value


@dataclass
class ColumnConverter:
    """Turns one column's values (Python objects from the driver) into an Arrow array."""

    name: str
    type: pa.DataType | None  # None until the first non-null values decide it
    inferred: bool = False  # the type came from values, not from the driver

    def convert(self, values: Sequence[Any]) -> pa.Array:
        if self.type is None:
            return self._infer(values)
        target = self.type
        if pa.types.is_string(target):
            return pa.array([_as_text(v) for v in values], target)
        if self.inferred and pa.types.is_integer(target):
            # Arrow truncates floats given for an integer type: a float here (SQLite's
            # NUMERIC affinity) does not fit.
            for value in values:
                if value is not None and type(value) is not int:
                    raise self._mismatch(target, f"{value!r} is not an integer")
        if pa.types.is_list(target) and pa.types.is_string(target.value_type):
            values = [None if v is None else [_as_text(x) for x in v] for v in values]
        try:
            return pa.array(values, target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            return self._coerce(values, target, exc)

    def _coerce(self, values: Sequence[Any], target: pa.DataType, exc: Exception) -> pa.Array:
        if pa.types.is_decimal(target):
            try:
                return pa.array([_quantize(v, target.scale) for v in values], target)
            except (pa.ArrowInvalid, decimal.InvalidOperation):
                pass
        if pa.types.is_floating(target) and all(
            v is None or isinstance(v, (int, float)) for v in values
        ):
            return pa.array([None if v is None else float(v) for v in values], target)
        raise self._mismatch(target, f"{type(exc).__name__}: {exc}") from exc

    def _mismatch(self, target: pa.DataType, reason: str) -> TypeError:
        origin = "taken from its first values" if self.inferred else "given by the driver"
        return TypeError(
            f"column {self.name!r}: values do not fit the column's type {target}, {origin} "
            f"({reason}); cast the column in the query (CAST(... AS REAL), CAST(... AS TEXT)) "
            "to give it one type."
        )

    def _infer(self, values: Sequence[Any]) -> pa.Array:
        if all(v is None for v in values):
            return pa.nulls(len(values))
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            kinds = {type(v) for v in values if v is not None}
            if kinds <= {int, float, bool}:
                array = pa.array([None if v is None else float(v) for v in values], pa.float64())
            else:  # a column of mixed types (SQLite allows it): its text
                array = pa.array([_as_text(v) for v in values], pa.string())
        if pa.types.is_null(array.type):
            return array
        self.type, self.inferred = array.type, True
        return array


def converters_for(description: Sequence[Sequence[Any]], dialect: str) -> list[ColumnConverter]:
    """One converter per column of ``cursor.description``."""
    from shardflow.connectors.sql.dbapi import POSTGRES

    converters = []
    for column in description:
        known = postgres_type(column) if dialect == POSTGRES else None
        converters.append(ColumnConverter(str(column[0]), known))
    return converters


def rows_to_table(
    rows: Sequence[Sequence[Any]], names: Sequence[str], converters: Sequence[ColumnConverter]
) -> pa.Table:
    """A table from rows as the driver returns them (sequences in column order)."""
    if rows:
        columns = list(zip(*rows))
    else:
        columns = [() for _ in names]
    arrays = [conv.convert(col) for conv, col in zip(converters, columns)]
    return pa.Table.from_arrays(arrays, names=list(unique_names(names)))


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names as given; a name repeated in the result (``SELECT a.id, b.id``) gets a
    numeric suffix so every column keeps its values."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if count == 0 else f"{name}_{count}")
    return out


def empty_table(names: Sequence[str], converters: Sequence[ColumnConverter]) -> pa.Table:
    return pa.schema(
        [pa.field(n, c.type or pa.null()) for n, c in zip(unique_names(names), converters)]
    ).empty_table()
