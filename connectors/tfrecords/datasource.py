"""TFRecordDatasource: TFRecord files of ``tf.train.Example`` records read as rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.tfrecords.example_proto import decode_error, example_class
from shardflow.connectors.tfrecords.features import ExampleColumns, feature_kinds, schema_of
from shardflow.connectors.tfrecords.framing import read_records
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource

RECORDS_PER_BLOCK = 8192
_BYTES_PER_BLOCK = 16 * 1024 * 1024  # of record data: a block of large records ends sooner


class TFRecordDatasource(FileBasedDatasource):
    """Reads TFRecord files of ``tf.train.Example`` records, checking every record's CRC.

    See :func:`shardflow.read_tfrecords` for the arguments. Files are read as forward-only
    streams; ``.gz`` files (and others given ``arrow_open_stream_args={"compression": ...}``)
    are decompressed on the way.
    """

    _INFER_COMPRESSION = True
    _ENCODING_RATIO = 1.5  # Arrow columns are a little larger than the varint-packed records

    def __init__(self, paths: Any, *, tf_schema: Any = None, **kwargs: Any):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_tfrecords: {sorted(self._file_args)}.")
        self._kinds = feature_kinds(tf_schema)
        example_class()  # a missing protobuf is reported here, not in the read tasks

    def get_name(self) -> str:
        return "TFRecords"

    def reads_hold_the_gil(self) -> bool:
        return True  # records are decoded one by one in Python: worker processes, locally

    def _static_schema(self) -> pa.Schema | None:
        return schema_of(self._kinds) if self._kinds is not None else None

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        parse = example_class().FromString
        invalid = decode_error()
        columns = ExampleColumns(self._kinds)
        size = 0
        for offset, data in read_records(f):
            try:
                example = parse(data)
            except invalid as exc:
                raise ValueError(
                    f"the record at byte offset {offset} is not a tf.train.Example ({exc}); "
                    "read_tfrecords reads files of Example records only."
                ) from None
            columns.add(example, offset)
            size += len(data)
            if len(columns) >= RECORDS_PER_BLOCK or size >= _BYTES_PER_BLOCK:
                yield columns.build()
                size = 0
        if len(columns) or self._kinds is not None:
            yield columns.build()
