"""TFRecordDatasink: rows written as ``tf.train.Example`` records in TFRecord files."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.connectors.tfrecords.example_proto import example_class
from shardflow.connectors.tfrecords.features import examples_of_block, feature_kinds
from shardflow.connectors.tfrecords.framing import crc32c_function, frame_record
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import AppendingWriter, BlockFileWriter


class TFRecordDatasink(BlockBasedFileDatasink):
    """Writes one TFRecord file per write task, one ``tf.train.Example`` per row.

    See :meth:`shardflow.Dataset.write_tfrecords` for the arguments.
    """

    def __init__(self, path: Any, *, tf_schema: Any = None, **kwargs: Any):
        self._kinds = feature_kinds(tf_schema)
        example_class()  # a missing protobuf is reported here, not in the write tasks
        crc32c_function()
        kwargs.setdefault("file_format", "tfrecords")
        super().__init__(path, **kwargs)

    def get_name(self) -> str:
        return "TFRecords"

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        if schema is not None and self._kinds is not None:
            extra = [name for name in schema.names if name not in self._kinds]
            if extra:
                raise ValueError(
                    f"Column(s) {extra} are not features of tf_schema (it declares "
                    f"{sorted(self._kinds)})."
                )
        super().on_write_start(schema)

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter:
        return AppendingWriter(self.write_block_to_file, f)

    def write_block_to_file(self, block: Block, f: Any) -> None:
        crc32c = crc32c_function()
        records = [
            frame_record(example, crc32c)
            for example in examples_of_block(block, self._kinds, example_class())
        ]
        f.write(b"".join(records))
