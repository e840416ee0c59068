"""``tf.train.Example`` features as Arrow columns, and rows as Examples, with Ray Data's rules.

Reading: an ``int64_list`` becomes ``int64``, a ``float_list`` ``float32``, a ``bytes_list``
``binary``. Without a schema, a feature holding exactly one value is that value (a scalar
column); any other count is a list (``list<int64>``, ...; a feature whose records are all
empty is ``list<null>``), and columns are sorted by feature name. With a schema, every
feature is a list of its declared type, in the schema's order.

Writing: integer columns become ``int64_list``, floating ones ``float_list``, binary and
string ones ``bytes_list`` (strings as UTF-8); lists of those become lists; a null is an empty
list; tensor columns become one serialized ``TensorProto`` per row (what
``tf.io.serialize_tensor`` writes, read back with ``tf.io.parse_tensor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.tfrecords.example_proto import TF_DTYPES, tensor_proto_class
from shardflow.sdk.block import Block, block_to_batch
from shardflow.sdk.schema_conflicts import ArrowConversionError

BYTES, INT, FLOAT = "bytes", "int", "float"
_LIST_FIELDS = {"bytes_list": BYTES, "float_list": FLOAT, "int64_list": INT}
_ARROW_TYPES = {BYTES: pa.binary(), INT: pa.int64(), FLOAT: pa.float32()}
# tensorflow_metadata's schema_pb2.FeatureType values.
_SCHEMA_FEATURE_TYPES = {1: BYTES, 2: INT, 3: FLOAT}
_SCHEMA_NAMES = {"bytes": BYTES, "int": INT, "int64": INT, "float": FLOAT, "float32": FLOAT}


def feature_kinds(tf_schema: Any) -> dict[str, str] | None:
    """``{feature name: "bytes" | "int" | "float"}`` from a ``tf_schema`` argument.

    Accepts a ``tensorflow_metadata`` ``schema_pb2.Schema`` (its ``feature`` entries' ``name``
    and ``type``), or a dict of feature name to ``"bytes"``, ``"int"`` or ``"float"``.
    """
    if tf_schema is None:
        return None
    if isinstance(tf_schema, dict):
        kinds = {}
        for name, kind in tf_schema.items():
            if not isinstance(name, str) or _SCHEMA_NAMES.get(str(kind).lower()) is None:
                raise ValueError(
                    "tf_schema as a dict maps feature names to 'bytes', 'int' or 'float'; got "
                    f"{name!r}: {kind!r}."
                )
            kinds[name] = _SCHEMA_NAMES[str(kind).lower()]
        return kinds
    features = getattr(tf_schema, "feature", None)
    if features is None:
        raise TypeError(
            "tf_schema must be a tensorflow_metadata schema_pb2.Schema or a dict of feature name "
            f"to 'bytes', 'int' or 'float'; got {type(tf_schema).__name__}."
        )
    kinds = {}
    for feature in features:
        kind = _SCHEMA_FEATURE_TYPES.get(int(feature.type))
        if kind is None:
            raise ValueError(
                f"Feature {feature.name!r} of tf_schema has type {feature.type}; TFRecords "
                "hold BYTES (1), INT (2) or FLOAT (3) features."
            )
        kinds[feature.name] = kind
    return kinds


def schema_of(kinds: dict[str, str]) -> pa.Schema:
    """The Arrow schema of features read with a schema: lists of their declared types."""
    return pa.schema([(name, pa.list_(_ARROW_TYPES[kind])) for name, kind in kinds.items()])


class _Column:
    """The values of one feature in the records of a block, and what they looked like."""

    __slots__ = ("values", "kind", "other_kind", "scalar_at", "list_at", "list_len")

    def __init__(self, missing: int):
        self.values: list[Any] = [None] * missing  # records before its first one lack it
        self.kind: str | None = None
        self.other_kind: str | None = None
        self.scalar_at: int | None = None  # byte offset of a record with one value
        self.list_at: int | None = None  # ... and of one with another count
        self.list_len = 0


class ExampleColumns:
    """Gathers the features of parsed Examples into the columns of one block.

    Args:
        kinds: The features' declared kinds (``tf_schema``), or None to infer them.
    """

    def __init__(self, kinds: dict[str, str] | None):
        self._declared = kinds
        self._columns: dict[str, _Column] = {}
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, example: Any, offset: int) -> None:
        """Add the features of one parsed Example (the record at byte ``offset``)."""
        row = self._rows
        columns, declared = self._columns, self._declared
        features = example.features.feature
        for name in features:
            feature = features[name]
            column = columns.get(name)
            if column is None:
                if declared is not None and name not in declared:
                    raise ValueError(
                        f"the record at byte offset {offset} has the feature {name!r}, which is "
                        f"not in tf_schema (it declares {sorted(declared)})."
                    )
                column = columns[name] = _Column(row)
            elif len(column.values) < row:
                column.values.extend([None] * (row - len(column.values)))
            field = feature.WhichOneof("kind")
            if field is None:
                values: Any = []
            else:
                kind = _LIST_FIELDS[field]
                if kind != column.kind:
                    self._new_kind(column, name, kind, offset)
                values = getattr(feature, field).value
            if declared is None and len(values) == 1:
                column.values.append(values[0])
                if column.scalar_at is None:
                    column.scalar_at = offset
            else:
                column.values.append(list(values))
                if column.list_at is None:
                    column.list_at, column.list_len = offset, len(values)
        self._rows = row + 1

    def _new_kind(self, column: _Column, name: str, kind: str, offset: int) -> None:
        declared = self._declared
        if declared is not None and declared[name] != kind:
            raise ValueError(
                f"the record at byte offset {offset} holds {kind} values in the feature "
                f"{name!r}, which tf_schema declares {declared[name]}."
            )
        if column.kind is None:
            column.kind = kind
        else:
            column.other_kind = kind

    def build(self) -> Block:
        """The block of the Examples added since the last call."""
        columns, rows = self._columns, self._rows
        self._columns, self._rows = {}, 0
        for column in columns.values():
            if len(column.values) < rows:
                column.values.extend([None] * (rows - len(column.values)))
        if self._declared is not None:
            arrays = {
                name: (
                    pa.array(columns[name].values, pa.list_(_ARROW_TYPES[kind]))
                    if name in columns
                    else pa.nulls(rows, pa.list_(_ARROW_TYPES[kind]))
                )
                for name, kind in self._declared.items()
            }
            return pa.table(arrays, schema=schema_of(self._declared))
        if not columns:
            return pa.table({"_": pa.nulls(rows)}).select([])
        # Sorted: protobuf iterates a parsed map in an order that changes from process to process.
        return pa.table({name: _inferred_column(name, columns[name]) for name in sorted(columns)})


def _inferred_column(name: str, column: _Column) -> pa.Array:
    if column.other_kind is not None:
        raise ArrowConversionError(
            f"Feature {name!r} holds {column.kind} values in some records and "
            f"{column.other_kind} values in others; pass tf_schema= to read it as one type."
        )
    if column.scalar_at is not None and column.list_at is not None:
        raise ArrowConversionError(
            f"Feature {name!r} holds one value in some records (the record at byte offset "
            f"{column.scalar_at}) and {column.list_len} in others (the record at byte offset "
            f"{column.list_at}): it cannot be both a scalar and a list column. Pass tf_schema= "
            "to read it as lists."
        )
    value_type = _ARROW_TYPES[column.kind] if column.kind is not None else pa.null()
    return pa.array(
        column.values, pa.list_(value_type) if column.list_at is not None else value_type
    )


# -- writing --------------------------------------------------------------------------------


def _kind_of_type(arrow_type: pa.DataType) -> str | None:
    if pa.types.is_integer(arrow_type):
        return INT
    if pa.types.is_floating(arrow_type):
        return FLOAT
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return BYTES
    if pa.types.is_fixed_size_binary(arrow_type):
        return BYTES
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    return None


def _is_tensor(arrow_type: pa.DataType) -> bool:
    if isinstance(arrow_type, pa.FixedShapeTensorType):
        return True
    return isinstance(arrow_type, pa.BaseExtensionType) and "tensor" in str(
        getattr(arrow_type, "extension_name", "")
    )


def _column_writer(
    name: str, arrow_type: pa.DataType, declared: str | None
) -> tuple[str, Callable[[Any], list[Any]]]:
    """``(list field, cell -> values)`` for the column ``name`` of type ``arrow_type``."""
    convert: Callable[[Any], list[Any]]
    if _is_tensor(arrow_type):
        kind, convert = BYTES, _tensor_cell
    else:
        is_list = (
            pa.types.is_list(arrow_type)
            or pa.types.is_large_list(arrow_type)
            or pa.types.is_fixed_size_list(arrow_type)
        )
        value_type = arrow_type.value_type if is_list else arrow_type
        found = _kind_of_type(value_type)
        if found is None and not (pa.types.is_null(value_type) and declared is not None):
            if pa.types.is_null(value_type):
                raise ValueError(
                    f"Column {name!r} holds only nulls, so the kind of its feature is unknown: "
                    "cast it to an integer, floating or binary type, or pass tf_schema=."
                )
            raise ValueError(
                f"Column {name!r} has type {arrow_type}, which a tf.train.Feature cannot hold: "
                "it holds int64, float and bytes lists (cast booleans to integers, encode "
                "other values to bytes)."
            )
        string = found == "string"
        kind = BYTES if string else (found or declared or BYTES)
        convert = _list_cell(string) if is_list else _scalar_cell(string)
    if declared is not None:
        if declared != kind:
            raise ValueError(
                f"Column {name!r} has type {arrow_type}, but tf_schema declares it {declared}."
            )
    field = {BYTES: "bytes_list", INT: "int64_list", FLOAT: "float_list"}[kind]
    return field, convert


def _scalar_cell(string: bool) -> Callable[[Any], list[Any]]:
    if string:
        return lambda v: [] if v is None else [v.encode("utf-8")]
    return lambda v: [] if v is None else [v]


def _list_cell(string: bool) -> Callable[[Any], list[Any]]:
    if string:
        return lambda v: [] if v is None else [s.encode("utf-8") for s in v if s is not None]
    return lambda v: [] if v is None else [x for x in v if x is not None]


def _tensor_cell(value: Any) -> list[bytes]:
    if value is None:
        return []
    return [serialize_tensor(np.asarray(value))]


def serialize_tensor(array: np.ndarray) -> bytes:
    """``array`` as a serialized ``TensorProto``, as ``tf.io.serialize_tensor`` writes it."""
    dtype = TF_DTYPES.get(array.dtype.name)
    if dtype is None:
        raise ValueError(
            f"tensors of dtype {array.dtype} cannot be written as TensorProto; supported: "
            f"{sorted(TF_DTYPES)}."
        )
    proto = tensor_proto_class()(
        dtype=dtype,
        tensor_content=np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes(),
    )
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    return proto.SerializeToString()


def examples_of_block(
    block: Block, kinds: dict[str, str] | None, example_class: Any
) -> Iterator[bytes]:
    """The serialized Examples of ``block``'s rows, in order."""
    if kinds is not None:
        extra = [name for name in block.column_names if name not in kinds]
        if extra:
            raise ValueError(
                f"Column(s) {extra} are not features of tf_schema (it declares {sorted(kinds)})."
            )
    writers = []
    for name in block.column_names:
        arrow_type = block.schema.field(name).type
        declared = kinds.get(name) if kinds is not None else None
        field, convert = _column_writer(name, arrow_type, declared)
        column = block.column(name)
        if _is_tensor(arrow_type):
            cells = list(block_to_batch(block.select([name]), "numpy")[name])
            nulls = column.is_null().to_pylist() if column.null_count else None
            if nulls:
                cells = [None if null else cell for cell, null in zip(cells, nulls)]
        else:
            cells = column.to_pylist()
        writers.append((name, field, convert, cells))
    for i in range(block.num_rows):
        example = example_class()
        features = example.features.feature
        for name, field, convert, cells in writers:
            values = getattr(features[name], field)
            values.SetInParent()
            values.value.extend(convert(cells[i]))
        yield example.SerializeToString(deterministic=True)  # features sorted by name
