"""TensorFlow's ``Example`` and ``TensorProto`` messages, defined with protobuf's own machinery.

The message types are those of TensorFlow's ``example.proto``, ``feature.proto``,
``tensor.proto`` and ``tensor_shape.proto`` (same package, names, field numbers and types),
built here as descriptors in a pool of their own, so TensorFlow is not needed and a
TensorFlow imported in the same process keeps its own definitions. Messages serialized with
one parse with the other.

Only the fields shardflow reads or writes are declared; protobuf keeps unknown fields of a
parsed message as they are.
"""

from __future__ import annotations

import functools
from typing import Any

from shardflow.sdk.optional import require

_PACKAGE = "tensorflow"

# TensorFlow's DataType enum values of the NumPy dtypes a tensor column may hold.
TF_DTYPES = {
    "float32": 1,
    "float64": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 5,
    "int8": 6,
    "int64": 9,
    "bool": 10,
    "uint16": 17,
    "float16": 19,
    "uint32": 22,
    "uint64": 23,
}


def _protobuf() -> Any:
    return require("google.protobuf", "tfrecords", "Reading and writing TFRecords")


def _file_descriptor() -> Any:
    descriptor_pb2 = require(
        "google.protobuf.descriptor_pb2", "tfrecords", "Reading and writing TFRecords"
    )
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="shardflow/tfrecords/tensorflow_example.proto", package=_PACKAGE, syntax="proto3"
    )

    def message(name: str, *fields: Any) -> Any:
        msg = proto.message_type.add(name=name)
        msg.field.extend(fields)
        return msg

    def repeated(name: str, number: int, kind: Any, type_name: str = "") -> Any:
        made = field(name=name, number=number, label=field.LABEL_REPEATED, type=kind)
        if type_name:
            made.type_name = type_name
        return made

    def single(name: str, number: int, kind: Any, type_name: str = "", oneof: int = -1) -> Any:
        made = field(name=name, number=number, label=field.LABEL_OPTIONAL, type=kind)
        if type_name:
            made.type_name = type_name
        if oneof >= 0:
            made.oneof_index = oneof
        return made

    message("BytesList", repeated("value", 1, field.TYPE_BYTES))
    message("FloatList", repeated("value", 1, field.TYPE_FLOAT))
    message("Int64List", repeated("value", 1, field.TYPE_INT64))
    feature = message(
        "Feature",
        single("bytes_list", 1, field.TYPE_MESSAGE, ".tensorflow.BytesList", oneof=0),
        single("float_list", 2, field.TYPE_MESSAGE, ".tensorflow.FloatList", oneof=0),
        single("int64_list", 3, field.TYPE_MESSAGE, ".tensorflow.Int64List", oneof=0),
    )
    feature.oneof_decl.add(name="kind")
    features = message(
        "Features",
        repeated("feature", 1, field.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry"),
    )
    entry = features.nested_type.add(name="FeatureEntry")
    entry.field.extend(
        [
            single("key", 1, field.TYPE_STRING),
            single("value", 2, field.TYPE_MESSAGE, ".tensorflow.Feature"),
        ]
    )
    entry.options.map_entry = True
    message("Example", single("features", 1, field.TYPE_MESSAGE, ".tensorflow.Features"))

    shape = message(
        "TensorShapeProto",
        repeated("dim", 2, field.TYPE_MESSAGE, ".tensorflow.TensorShapeProto.Dim"),
        single("unknown_rank", 3, field.TYPE_BOOL),
    )
    dim = shape.nested_type.add(name="Dim")
    dim.field.extend([single("size", 1, field.TYPE_INT64), single("name", 2, field.TYPE_STRING)])
    # dtype is TensorFlow's DataType enum: an int32 on the wire.
    message(
        "TensorProto",
        single("dtype", 1, field.TYPE_INT32),
        single("tensor_shape", 2, field.TYPE_MESSAGE, ".tensorflow.TensorShapeProto"),
        single("version_number", 3, field.TYPE_INT32),
        single("tensor_content", 4, field.TYPE_BYTES),
    )
    return proto


@functools.cache
def _messages() -> dict[str, Any]:
    _protobuf()
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    names = ("Example", "Feature", "TensorProto")
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in names
    }


def example_class() -> Any:
    """The ``tensorflow.Example`` message class."""
    return _messages()["Example"]


def tensor_proto_class() -> Any:
    """The ``tensorflow.TensorProto`` message class (what ``tf.io.serialize_tensor`` writes)."""
    return _messages()["TensorProto"]


def decode_error() -> type[Exception]:
    """The exception protobuf raises for bytes that are not a valid message."""
    _protobuf()
    from google.protobuf.message import DecodeError

    return DecodeError
