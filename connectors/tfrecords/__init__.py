"""TFRecords: ``read_tfrecords`` and ``Dataset.write_tfrecords`` of ``tf.train.Example`` records.
Needs protobuf and google-crc32c (``pip install 'shardflow[tfrecords]'``), not TensorFlow."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.tfrecords.datasink import TFRecordDatasink
from shardflow.connectors.tfrecords.datasource import TFRecordDatasource

__all__ = ["TFRecordDatasink", "TFRecordDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector tfrecords`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.tfrecords.conformance_suite import TFRecordsSuite

        return TFRecordsSuite
    raise AttributeError(name)
