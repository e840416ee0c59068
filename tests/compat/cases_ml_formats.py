"""Differential cases: WebDataset shards, TFRecords and Avro files.

Ray Data's TFRecord functions need TensorFlow (and crc32c to write), its WebDataset decoder
Pillow, its Avro reader fastavro: the cases that need them name them in ``requires``.
"""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np
from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _by(rows, key):
    return sorted(rows, key=lambda r: r[key])


# -- WebDataset -------------------------------------------------------------------------------


def _png(array):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _npy(array):
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _shards(folder):
    """Two shards of samples with image, class, JSON, text, array and raw members."""
    os.makedirs(folder, exist_ok=True)
    for s in range(2):
        with tarfile.open(os.path.join(folder, f"shard-{s}.tar"), "w") as tar:
            for i in range(s * 3, s * 3 + 3):
                pixels = np.full((3, 4, 3), i * 20, np.uint8)
                members = [
                    ("cls", str(i % 2).encode()),
                    ("json", json.dumps({"id": i, "tags": ["a", "b"]}).encode()),
                    ("png", _png(pixels)),
                    ("txt", f"caption {i}".encode()),
                    ("emb.npy", _npy(np.arange(3, dtype=np.float32) * i)),
                    ("raw", bytes([i]) * 3),
                ]
                for suffix, data in members:
                    info = tarfile.TarInfo(f"s{i:03d}.{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return folder


@case(
    "read_webdataset",
    requires=("PIL",),
    note="default decoding: images and .npy as arrays, .cls ints, .json values, .txt strings",
)
def webdataset_default_decoding(m, tmp):
    ds = m.read_webdataset(_shards(str(tmp / "shards")))
    return [_by(ds.take_all(), "__key__"), ds.count(), sorted(ds.schema().names)]


@case("read_webdataset", requires=("PIL",))
def webdataset_selection_and_paths(m, tmp):
    """fileselect, suffixes, include_paths, decoder=None and a decoder function"""
    folder = _shards(str(tmp / "shards"))

    def label(sample):
        return {"__key__": sample["__key__"], "label": int(sample["cls"]) + 100}

    return [
        _by(m.read_webdataset(folder, fileselect=["*.cls", "*.txt"]).take_all(), "__key__"),
        _by(m.read_webdataset(folder, suffixes=["cls"], include_paths=True).take_all(), "__key__"),
        _by(m.read_webdataset(folder, decoder=None).take_all(), "__key__"),
        _by(m.read_webdataset(folder, decoder=label).take_all(), "__key__"),
    ]


@case("read_webdataset", requires=("PIL",))
def webdataset_errors(m, tmp):
    """members of a key apart in the archive, and pickled members: ValueError"""
    import pickle

    path = tmp / "bad.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in [("a.cls", b"1"), ("b.cls", b"2"), ("a.txt", b"x")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    pickled = tmp / "pickled.tar"
    with tarfile.open(pickled, "w") as tar:
        data = pickle.dumps([1])
        info = tarfile.TarInfo("a.pkl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return [
        _raises(lambda: m.read_webdataset(str(path)).take_all()),
        _raises(lambda: m.read_webdataset(str(pickled)).take_all()),
    ]


@case("Dataset.write_webdataset", requires=("PIL",))
def webdataset_write_members(m, tmp):
    """each row a sample: members encoded by their column's extension, nulls left out"""
    rows = [
        {
            "__key__": f"k{i}",
            "txt": f"text {i}",
            "cls": i,
            "json": {"i": i},
            "png": np.full((2, 3, 3), i, np.uint8),
            "raw": b"xyz" if i else None,
        }
        for i in range(3)
    ]
    out = tmp / "out"
    m.from_items(rows).write_webdataset(str(out))
    members = []
    for name in sorted(os.listdir(out)):
        if name.endswith(".tar"):
            with tarfile.open(out / name) as tar:
                members += [(i.name, tar.extractfile(i).read()) for i in tar.getmembers()]
    decoded = _by(m.read_webdataset(str(out)).drop_columns(["__url__"]).take_all(), "__key__")
    return [sorted(n for n, _ in members), sorted(d for n, d in members if "png" not in n), decoded]


# -- TFRecords --------------------------------------------------------------------------------


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    return tf


def _tf_file(path, examples):
    """A TFRecord file written by TensorFlow: ``examples`` are dicts of name -> (kind, values)."""
    tf = _tf()
    kinds = {
        "int": lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v)),
        "float": lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=v)),
        "bytes": lambda v: tf.train.Feature(bytes_list=tf.train.BytesList(value=v)),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            features = {name: kinds[kind](values) for name, (kind, values) in example.items()}
            proto = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(proto.SerializeToString())
    return str(path)


def _schema_by_name(ds):
    schema = ds.schema()
    return sorted((n, str(t)) for n, t in zip(schema.names, schema.types))


@case(
    "read_tfrecords",
    requires=("tensorflow",),
    slow=True,
    note="files written by TensorFlow: one value read as a scalar, several as a list, a missing "
    "feature as null, float32 and binary types",
)
def tfrecords_written_by_tensorflow(m, tmp):
    examples = [
        {
            "id": ("int", [i]),
            "score": ("float", [i / 4]),
            "name": ("bytes", [f"n{i}".encode()]),
            "tokens": ("int", [i, i + 1, i + 2]),
            **({"extra": ("float", [0.5, 1.5])} if i % 2 else {}),
        }
        for i in range(6)
    ]
    folder = tmp / "tfr"
    _tf_file(folder / "a.tfrecords", examples[:3])
    _tf_file(folder / "b.tfrecords", examples[3:])
    ds = m.read_tfrecords(str(folder))
    return [_by(ds.take_all(), "id"), ds.count(), _schema_by_name(ds)]


@case("read_tfrecords", requires=("tensorflow",), slow=True)
def tfrecords_scalar_and_list_of_one_feature(m, tmp):
    """a feature with one value in a record and two in another: ArrowConversionError"""
    path = _tf_file(tmp / "mixed.tfrecords", [{"a": ("int", [1, 2])}, {"a": ("int", [3])}])
    return _raises(lambda: m.read_tfrecords(path).take_all())


@case("Dataset.write_tfrecords", requires=("tensorflow", "crc32c"), slow=True)
def tfrecords_write_read_by_tensorflow(m, tmp):
    """ints, floats, strings, bytes and lists as Example features; a null as an empty list"""
    import pyarrow as pa

    tf = _tf()
    table = pa.table(
        {
            "id": [0, 1, 2],
            "x": [0.5, None, 2.5],
            "s": ["a", "b", None],
            "b": [b"\x00", b"\x01", b"\x02"],
            "tokens": [[1, 2], [], [3, 4, 5]],
        }
    )
    out = tmp / "out"
    m.from_arrow(table).write_tfrecords(str(out))
    examples = []
    for name in sorted(os.listdir(out)):
        if name.startswith((".", "_")):
            continue
        for record in tf.data.TFRecordDataset(str(out / name)):
            features = tf.train.Example.FromString(record.numpy()).features.feature
            examples.append(
                {
                    key: (f.WhichOneof("kind"), list(getattr(f, f.WhichOneof("kind")).value))
                    for key, f in features.items()
                }
            )
    return sorted(examples, key=lambda e: e["id"][1])


# -- Avro -------------------------------------------------------------------------------------


def _avro(path, schema, records):
    import fastavro

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records, codec="deflate")
    return str(path)


@case(
    "read_avro",
    requires=("fastavro",),
    note="Avro primitive, complex and logical types whose Arrow types do not depend on the values",
)
def avro_types(m, tmp):
    import datetime
    import uuid

    schema = {
        "type": "record",
        "name": "Row",
        "fields": [
            {"name": "i", "type": "int"},
            {"name": "l", "type": "long"},
            {"name": "f", "type": "float"},
            {"name": "d", "type": "double"},
            {"name": "flag", "type": "boolean"},
            {"name": "s", "type": "string"},
            {"name": "b", "type": "bytes"},
            {"name": "opt", "type": ["null", "string"]},
            {"name": "color", "type": {"type": "enum", "name": "C", "symbols": ["R", "G"]}},
            {"name": "tags", "type": {"type": "array", "items": "long"}},
            {
                "name": "inner",
                "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "long"}]},
            },
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "t", "type": {"type": "long", "logicalType": "time-micros"}},
            {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        ],
    }
    utc = datetime.timezone.utc
    records = [
        {
            "i": i,
            "l": 2**40 + i,
            "f": i + 0.5,
            "d": i / 8,
            "flag": bool(i % 2),
            "s": f"s{i}",
            "b": bytes([i]),
            "opt": None if i == 1 else f"o{i}",
            "color": "RG"[i % 2],
            "tags": list(range(i)),
            "inner": {"x": i * 3},
            "day": datetime.date(2024, 1, 1 + i),
            "at": datetime.datetime(2024, 2, 3, 4, 5, 6, 123456 + i, tzinfo=utc),
            "t": datetime.time(1, 2, 3, 456789),
            "uid": uuid.UUID(int=i + 1),
        }
        for i in range(4)
    ]
    folder = tmp / "avro"
    _avro(folder / "a.avro", schema, records[:2])
    _avro(folder / "b.avro", schema, records[2:])
    ds = m.read_avro(str(folder))
    return [_by(ds.take_all(), "i"), ds.count(), _schema_by_name(ds)]


@case("read_avro", requires=("fastavro",))
def avro_paths_and_bad_files(m, tmp):
    """include_paths; a file that is not Avro raises"""
    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": "long"}]}
    path = _avro(tmp / "ok" / "v.avro", schema, [{"v": 1}, {"v": 2}])
    (tmp / "bad").mkdir()
    (tmp / "bad" / "x.avro").write_bytes(b"not avro at all")
    return [
        m.read_avro(path, include_paths=True).take_all(),
        _raises(lambda: m.read_avro(str(tmp / "bad")).take_all()),
    ]


@case("from_items", "Dataset.map")
def rows_with_arrays_keep_bytes_and_strings_ending_in_nul(m, tmp):
    """rows holding arrays and bytes/str ending in NUL keep every byte (as WebDataset rows do)"""
    rows = [
        {"a": np.zeros(2), "b": b"\x00\x00", "s": "x\x00"},
        {"a": np.ones(2), "b": b"", "s": ""},
    ]
    mapped = m.range(2).map(lambda r: {"a": np.zeros(1), "b": b"\x01\x00", "s": "\x00"})
    return [m.from_items(rows).take_all(), mapped.take_all()]
