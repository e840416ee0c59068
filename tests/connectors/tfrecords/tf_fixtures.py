"""The TFRecord files in ``data/``, written once by TensorFlow itself, and what they hold.

``python tests/connectors/tfrecords/tf_fixtures.py`` (with tensorflow-cpu installed) writes
them again. They are committed, so that reading files written by TensorFlow is checked where
TensorFlow is not installed too; tests with TensorFlow at hand also write fresh ones.
"""

from __future__ import annotations

import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
PLAIN = os.path.join(DATA, "tensorflow_2.21.tfrecords")
GZIP = os.path.join(DATA, "tensorflow_2.21.tfrecords.gz")


def fixture_rows() -> list[dict]:
    """The rows of the fixture files, as shardflow reads them (features sorted by name)."""
    rows = []
    for i in range(6):
        rows.append(
            {
                "ids": [i * 10 + j for j in range((0, 2, 3)[i % 3])],  # never one value
                "label": i % 4,
                "name": f"example {i}".encode(),
                "score": i / 4,  # exact in float32
                "weights": [i / 2, -i / 2, 0.25],
            }
        )
    return rows


def to_example(tf, row: dict) -> bytes:
    """``row`` as a serialized tf.train.Example, built with TensorFlow's classes."""
    feature = tf.train.Feature
    features = {
        "ids": feature(int64_list=tf.train.Int64List(value=row["ids"])),
        "label": feature(int64_list=tf.train.Int64List(value=[row["label"]])),
        "name": feature(bytes_list=tf.train.BytesList(value=[row["name"]])),
        "score": feature(float_list=tf.train.FloatList(value=[row["score"]])),
        "weights": feature(float_list=tf.train.FloatList(value=row["weights"])),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_with_tensorflow(tf, rows: list[dict], path: str, compression: str = "") -> None:
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(path, options) as writer:
        for row in rows:
            writer.write(to_example(tf, row))


if __name__ == "__main__":
    import tensorflow as tf

    os.makedirs(DATA, exist_ok=True)
    write_with_tensorflow(tf, fixture_rows(), PLAIN)
    write_with_tensorflow(tf, fixture_rows(), GZIP, "GZIP")
    print(f"wrote {PLAIN} and {GZIP} with TensorFlow {tf.__version__}")
