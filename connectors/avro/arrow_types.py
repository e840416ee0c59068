"""Avro schemas as Arrow schemas, with the types Ray Data's reader gives.

The Arrow type of each field comes from the file's Avro schema, so every block of a file, an
empty file included, has the same schema. The types are the ones Ray Data 2.60 infers from the
values fastavro returns, where those do not depend on the data:

============================  ===============================================================
Avro                          Arrow
============================  ===============================================================
null                          null
boolean                       bool
int, long                     int64
float, double                 float64
bytes, fixed                  binary
string, enum                  string
array                         list of the items' type
record                        struct of the fields' types
union of null and one type    that type (nullable); a union of types of one Arrow type, too
date                          date32
time-millis, time-micros      time64[us]
timestamp-millis, -micros     timestamp[ms], timestamp[us] (values in UTC, as Ray Data gives)
local-timestamp-*             timestamp of the same unit
uuid                          Arrow's canonical uuid extension type
decimal(p, s)                 decimal128(p, s) (decimal256 beyond 38 digits)
map                           map<string, values' type>
============================  ===============================================================

Where Ray Data's type depends on the values (it infers a map as a struct of the keys it saw, a
decimal's precision from the values, a timestamp's unit from the finest value), the schema's
type is used. A field Arrow cannot type (a union of different types, a recursive record) is a
column of Python objects (:mod:`shardflow.sdk.object_column`), as in Ray Data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.sdk.object_column import PythonObjectType

ITEM = "item"  # the column of a file whose records are not Avro records

_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int64(),
    "long": pa.int64(),
    "float": pa.float64(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL = {
    "date": pa.date32(),
    "time-millis": pa.time64("us"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms"),
    "timestamp-micros": pa.timestamp("us"),
    "timestamp-nanos": pa.timestamp("ns"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
}


class NotArrowTypable(Exception):
    """An Avro type without an Arrow type (a union of different types, a recursive record)."""


@dataclass(frozen=True)
class RecordLayout:
    """How the records of one Avro schema become Arrow columns.

    Attributes:
        schema: The Arrow schema of the blocks.
        plain: Columns ``pyarrow.Table.from_pylist`` builds with their Arrow type.
        objects: Columns of Python objects (no Arrow type).
        wrapped: True when the file's records are not Avro records: each value is a row of
            column ``item``.
    """

    schema: pa.Schema
    plain: pa.Schema
    objects: tuple[str, ...]
    wrapped: bool


def layout_of(avro_schema: Any) -> RecordLayout:
    """The Arrow layout of records of ``avro_schema`` (a schema as ``fastavro.parse_schema``
    returns it: named types by full name in ``__named_schemas``)."""
    named = avro_schema.get("__named_schemas", {}) if isinstance(avro_schema, dict) else {}
    record = avro_schema if isinstance(avro_schema, dict) else None
    if record is not None and record.get("type") == "record":
        fields, wrapped = [(f["name"], f["type"]) for f in record["fields"]], False
    else:
        fields, wrapped = [(ITEM, avro_schema)], True
    arrow_fields, plain, objects = [], [], []
    for name, avro_type in fields:
        try:
            field = pa.field(name, arrow_type(avro_type, named))
            plain.append(field)
        except NotArrowTypable:
            field = pa.field(name, PythonObjectType())
            objects.append(name)
        arrow_fields.append(field)
    return RecordLayout(pa.schema(arrow_fields), pa.schema(plain), tuple(objects), wrapped)


def arrow_type(avro_type: Any, named: dict[str, Any], seen: tuple[str, ...] = ()) -> pa.DataType:
    """The Arrow type of one Avro type (see the module's table).

    Raises:
        NotArrowTypable: for a union of different types or a recursive record.
    """
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return _PRIMITIVES[avro_type]
        if avro_type in seen:
            raise NotArrowTypable(f"{avro_type} is recursive")
        if avro_type not in named:
            raise ValueError(f"the Avro schema names an undefined type {avro_type!r}")
        return arrow_type(named[avro_type], named, seen)
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if not branches:
            return pa.null()
        types = {arrow_type(b, named, seen) for b in branches}
        if len(types) != 1:
            raise NotArrowTypable(f"a union of {len(types)} types")
        return types.pop()
    logical = avro_type.get("logicalType")
    kind = avro_type.get("type")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(avro_type["precision"]), int(avro_type.get("scale", 0))
        return (
            pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        )
    if logical == "uuid" and kind == "string":
        return pa.uuid()
    if logical in _LOGICAL and kind in ("int", "long"):
        return _LOGICAL[logical]
    if kind == "record":
        inner = seen + (avro_type.get("name", ""),)
        return pa.struct(
            [pa.field(f["name"], arrow_type(f["type"], named, inner)) for f in avro_type["fields"]]
        )
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(arrow_type(avro_type["items"], named, seen))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(avro_type["values"], named, seen))
    return arrow_type(kind, named, seen)
