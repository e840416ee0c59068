"""read_tfrecords / Dataset.write_tfrecords: files TensorFlow wrote (committed, and fresh ones
when TensorFlow is installed) read back as TensorFlow wrote them, files shardflow wrote read by
TensorFlow, checksums verified, errors naming the file and the record's offset."""

from __future__ import annotations

import gzip
import json
import os
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tf_fixtures import GZIP, PLAIN, fixture_rows, write_with_tensorflow

import shardflow as sf
from shardflow.connectors.tfrecords.example_proto import example_class
from shardflow.connectors.tfrecords.framing import (
    CorruptRecordError,
    frame_record,
    masked_crc,
    read_records,
)
from shardflow.sdk.schema_conflicts import ArrowConversionError

FIXTURE_SCHEMA = pa.schema(
    [
        ("ids", pa.list_(pa.int64())),
        ("label", pa.int64()),
        ("name", pa.binary()),
        ("score", pa.float32()),
        ("weights", pa.list_(pa.float32())),
    ]
)


@pytest.fixture(scope="module")
def tf():
    """TensorFlow, when installed (the test extra has tensorflow-cpu)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed")


def _visible(folder):
    return sorted(
        os.path.join(folder, name) for name in os.listdir(folder) if not name.startswith(".")
    )


def _by(rows, key):
    return sorted(rows, key=lambda r: r[key])


# -- files written by TensorFlow --------------------------------------------------------------


@pytest.mark.parametrize("path", [PLAIN, GZIP], ids=["plain", "gzip"])
def test_reads_the_files_tensorflow_wrote(path, backend):
    ds = sf.read_tfrecords(path)
    assert ds.schema().base_schema == FIXTURE_SCHEMA
    assert ds.take_all() == fixture_rows()


def test_gzip_named_otherwise_is_read_with_arrow_open_stream_args(tmp_path):
    renamed = tmp_path / "examples.data"
    renamed.write_bytes(open(GZIP, "rb").read())
    ds = sf.read_tfrecords(str(renamed), arrow_open_stream_args={"compression": "gzip"})
    assert ds.take_all() == fixture_rows()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "ids": st.lists(st.integers(-(2**63), 2**63 - 1), min_size=2, max_size=5),
                "label": st.integers(-(2**63), 2**63 - 1),
                "name": st.binary(max_size=20),
                "score": st.floats(width=32, allow_nan=False),
                "weights": st.one_of(
                    st.just([]),
                    st.lists(st.floats(width=32, allow_nan=False), min_size=2, max_size=4),
                ),
            }
        ),
        min_size=1,
        max_size=12,
    )
)
def test_property_tensorflow_writes_shardflow_reads(tf, tmp_path_factory, rows):
    path = str(tmp_path_factory.mktemp("tf") / "data.tfrecords")
    write_with_tensorflow(tf, rows, path)
    table = sf.read_tfrecords(path).to_arrow()
    expected = pa.Table.from_pylist(rows, schema=FIXTURE_SCHEMA)
    assert table.equals(expected), (table.to_pylist(), rows)


# -- files written by shardflow, read by TensorFlow -------------------------------------------


def _tf_parse(tf, path, compression=""):
    examples = []
    for record in tf.data.TFRecordDataset(path, compression_type=compression):
        example = tf.train.Example.FromString(record.numpy())
        row = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            row[name] = (kind, list(getattr(feature, kind).value) if kind else [])
        examples.append(row)
    return examples


@pytest.mark.parametrize("compression", ["", "gzip"])
def test_tensorflow_reads_what_shardflow_wrote(tf, tmp_path, compression):
    table = pa.table(
        {
            "i": pa.array([1, -(2**63), None], pa.int64()),
            "i8": pa.array([1, 2, 3], pa.int8()),
            "f": pa.array([0.5, None, -2.25], pa.float64()),
            "s": ["a", "é", None],
            "b": [b"\x00\xff", b"", None],
            "li": [[1, 2], [], None],
            "lf": [[1.5], [2.5, 3.5], []],
            "ls": [["x", "yz"], [], ["é"]],
        }
    )
    out = str(tmp_path / "out")
    args = {"arrow_open_stream_args": {"compression": compression}} if compression else {}
    sf.from_arrow(table).repartition(1).write_tfrecords(out, **args)
    (path,) = _visible(out)
    assert path.endswith(".tfrecords")
    got = _tf_parse(tf, path, compression.upper())
    assert got == [
        {
            "i": ("int64_list", [1]),
            "i8": ("int64_list", [1]),
            "f": ("float_list", [0.5]),
            "s": ("bytes_list", [b"a"]),
            "b": ("bytes_list", [b"\x00\xff"]),
            "li": ("int64_list", [1, 2]),
            "lf": ("float_list", [1.5]),
            "ls": ("bytes_list", [b"x", b"yz"]),
        },
        {
            "i": ("int64_list", [-(2**63)]),
            "i8": ("int64_list", [2]),
            "f": ("float_list", []),
            "s": ("bytes_list", ["é".encode()]),
            "b": ("bytes_list", [b""]),
            "li": ("int64_list", []),
            "lf": ("float_list", [2.5, 3.5]),
            "ls": ("bytes_list", []),
        },
        {
            "i": ("int64_list", []),
            "i8": ("int64_list", [3]),
            "f": ("float_list", [-2.25]),
            "s": ("bytes_list", []),
            "b": ("bytes_list", []),
            "li": ("int64_list", []),
            "lf": ("float_list", []),
            "ls": ("bytes_list", ["é".encode()]),
        },
    ]


def test_tensor_columns_are_serialized_tensors_tensorflow_parses(tf, tmp_path):
    images = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    out = str(tmp_path / "out")
    sf.from_numpy(images).repartition(1).write_tfrecords(out)
    (path,) = _visible(out)
    got = [row["data"] for row in _tf_parse(tf, path)]
    assert [kind for kind, _ in got] == ["bytes_list", "bytes_list"]
    for (_, (serialized,)), expected in zip(got, images):
        np.testing.assert_array_equal(tf.io.parse_tensor(serialized, tf.float32).numpy(), expected)


@pytest.mark.parametrize("compression", ["", "gzip"])
def test_round_trip_through_shardflow(backend, tmp_path, compression):
    rows = [{"id": i, "text": f"t{i}".encode(), "vec": [i / 2, i + 0.5]} for i in range(50)]
    out = str(tmp_path / "out")
    args = {"arrow_open_stream_args": {"compression": compression}} if compression else {}
    sf.from_items(rows).write_tfrecords(out, **args)
    back = sf.read_tfrecords(out, **args)
    assert back.count() == 50
    assert _by(back.take_all(), "id") == rows
    assert back.schema().base_schema == pa.schema(
        [("id", pa.int64()), ("text", pa.binary()), ("vec", pa.list_(pa.float32()))]
    )


def test_written_records_are_deterministic_and_sorted(tmp_path):
    table = pa.table({"z": [1], "a": [2.0], "m": ["x"]})
    for name in ("one", "two"):
        sf.from_arrow(table).write_tfrecords(str(tmp_path / name), mode="overwrite")
    one, two = (open(_visible(str(tmp_path / n))[0], "rb").read() for n in ("one", "two"))
    assert one == two
    assert sf.read_tfrecords(str(tmp_path / "one")).schema().names == ["a", "m", "z"]


def test_store_round_trip(store):
    """Local disk, S3 (moto) and GCS (emulator)."""
    rows = [{"id": i, "tokens": [i, i + 1, i + 2]} for i in range(20)]
    sf.from_items(rows).write_tfrecords(store.path("out"), **store.options())
    back = sf.read_tfrecords(store.path("out"), **store.options())
    assert _by(back.take_all(), "id") == rows


# -- tf_schema --------------------------------------------------------------------------------


class _SchemaFeature:
    def __init__(self, name, type_):
        self.name, self.type = name, type_


class _Schema:
    """Shaped like tensorflow_metadata's schema_pb2.Schema (BYTES=1, INT=2, FLOAT=3)."""

    def __init__(self, **features):
        self.feature = [_SchemaFeature(n, t) for n, t in features.items()]


@pytest.mark.parametrize(
    "tf_schema",
    [
        {"ids": "int", "label": "int", "name": "bytes", "score": "float", "weights": "float"},
        _Schema(ids=2, label=2, name=1, score=3, weights=3),
    ],
    ids=["dict", "schema_pb2"],
)
def test_tf_schema_reads_every_feature_as_a_list(tf_schema):
    ds = sf.read_tfrecords(PLAIN, tf_schema=tf_schema)
    expected_schema = pa.schema(
        [
            ("ids", pa.list_(pa.int64())),
            ("label", pa.list_(pa.int64())),
            ("name", pa.list_(pa.binary())),
            ("score", pa.list_(pa.float32())),
            ("weights", pa.list_(pa.float32())),
        ]
    )
    assert ds.schema().base_schema == expected_schema
    listed = [
        {k: v if isinstance(v, list) else [v] for k, v in row.items()} for row in fixture_rows()
    ]
    assert ds.take_all() == listed


def test_tf_schema_fills_missing_features_with_nulls_and_rejects_others(tmp_path):
    sf.from_items([{"a": 1}, {"a": 2}]).write_tfrecords(str(tmp_path / "d"))
    ds = sf.read_tfrecords(str(tmp_path / "d"), tf_schema={"b": "bytes", "a": "int"})
    assert ds.schema().names == ["b", "a"]
    assert sorted(ds.take_all(), key=lambda r: r["a"]) == [
        {"b": None, "a": [1]},
        {"b": None, "a": [2]},
    ]
    with pytest.raises(ValueError, match=r"feature 'a', which is not in tf_schema"):
        sf.read_tfrecords(str(tmp_path / "d"), tf_schema={"b": "int"}).take_all()
    with pytest.raises(ValueError, match=r"holds int values in the feature 'a'.*declares float"):
        sf.read_tfrecords(str(tmp_path / "d"), tf_schema={"a": "float"}).take_all()


def test_tf_schema_on_write_checks_columns(tmp_path):
    ds = sf.from_items([{"a": 1, "b": 2.0}])
    with pytest.raises(ValueError, match=r"\['b'\] are not features of tf_schema"):
        ds.write_tfrecords(str(tmp_path / "x"), tf_schema={"a": "int"})
    with pytest.raises(ValueError, match="tf_schema declares it bytes"):
        ds.write_tfrecords(str(tmp_path / "y"), tf_schema={"a": "bytes", "b": "float"})
    with pytest.raises(ValueError, match="'bytes', 'int' or 'float'"):
        sf.read_tfrecords(PLAIN, tf_schema={"a": "double precision"})
    with pytest.raises(TypeError, match="tf_schema must be"):
        sf.read_tfrecords(PLAIN, tf_schema=42)


# -- what cannot be read or written ----------------------------------------------------------


def _records(tmp_path, datas):
    path = tmp_path / "data.tfrecords"
    path.write_bytes(b"".join(frame_record(d) for d in datas))
    return path


def _example(**ints):
    example = example_class()()
    for name, values in ints.items():
        example.features.feature[name].int64_list.value.extend(values)
    return example.SerializeToString()


def test_corrupt_data_names_file_record_and_offset(tmp_path):
    path = _records(tmp_path, [_example(a=[1]), _example(a=[2]), _example(a=[3])])
    data = bytearray(path.read_bytes())
    first = len(frame_record(_example(a=[1])))
    data[first + 12 + 3] ^= 0x40  # a byte of the second record's data
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError) as info:
        sf.read_tfrecords(str(path)).take_all()
    message = str(info.value)
    assert "data.tfrecords" in message
    assert f"record 1 at byte offset {first}" in message
    assert "checksum of its" in message


def test_corrupt_length_and_truncation_are_reported(tmp_path):
    good = _example(a=[1, 2])
    path = _records(tmp_path, [good, good])
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(ValueError, match=r"record 1 at byte offset \d+: the file ends inside"):
        sf.read_tfrecords(str(path)).take_all()
    path.write_bytes(struct.pack("<Q", 10**6) + data[8:])
    with pytest.raises(ValueError, match="record 0 at byte offset 0: the checksum of its length"):
        sf.read_tfrecords(str(path)).take_all()
    path.write_bytes(data + b"\x01\x02")
    with pytest.raises(ValueError, match="ends inside the record's 12-byte header"):
        sf.read_tfrecords(str(path)).take_all()


def test_a_record_that_is_not_an_example_is_reported(tmp_path):
    path = _records(tmp_path, [_example(a=[1, 2]), b"\xff\xff\xff garbage"])
    offset = len(frame_record(_example(a=[1, 2])))
    with pytest.raises(ValueError, match=rf"byte offset {offset} is not a tf.train.Example"):
        sf.read_tfrecords(str(path)).take_all()


def test_gzip_file_without_compression_hint_says_what_to_do(tmp_path):
    path = tmp_path / "zipped.tfrecords"
    path.write_bytes(gzip.compress(_records(tmp_path, [_example(a=[1, 2])]).read_bytes()))
    with pytest.raises(ValueError, match="compression"):
        sf.read_tfrecords(str(path)).take_all()


def test_scalar_and_list_of_one_feature_is_an_arrow_conversion_error(tmp_path):
    path = _records(tmp_path, [_example(a=[1, 2], b=[1]), _example(a=[3], b=[2])])
    with pytest.raises(ArrowConversionError, match=r"Feature 'a' holds one value in some"):
        sf.read_tfrecords(str(path)).take_all()
    rows = sf.read_tfrecords(str(path), tf_schema={"a": "int", "b": "int"}).take_all()
    assert rows == [{"a": [1, 2], "b": [1]}, {"a": [3], "b": [2]}]


def test_empty_features_are_empty_lists(tmp_path):
    empty = example_class()()
    empty.features.feature["e"].SetInParent()  # no kind at all
    empty.features.feature["a"].int64_list.value.append(5)
    kindless = empty.SerializeToString()
    path = _records(tmp_path, [kindless, kindless])
    table = sf.read_tfrecords(str(path)).to_arrow()
    assert table.schema == pa.schema([("a", pa.int64()), ("e", pa.list_(pa.null()))])
    assert table.to_pylist() == [{"a": 5, "e": []}, {"a": 5, "e": []}]
    # An empty int64_list says its kind.
    path = _records(tmp_path, [kindless, _example(a=[6], e=[])])
    table = sf.read_tfrecords(str(path)).to_arrow()
    assert table.schema == pa.schema([("a", pa.int64()), ("e", pa.list_(pa.int64()))])
    assert table.to_pylist() == [{"a": 5, "e": []}, {"a": 6, "e": []}]


def test_missing_features_are_nulls(tmp_path):
    path = _records(tmp_path, [_example(a=[1]), _example(b=[2]), _example(a=[3], b=[4])])
    assert sf.read_tfrecords(str(path)).take_all() == [
        {"a": 1, "b": None},
        {"a": None, "b": 2},
        {"a": 3, "b": 4},
    ]


@pytest.mark.parametrize(
    "column, message",
    [
        (pa.array([True, False]), "cannot hold"),
        (pa.array([{"x": 1}, {"x": 2}]), "cannot hold"),
        (pa.nulls(2), "holds only nulls"),
    ],
)
def test_columns_without_a_feature_type_are_refused(tmp_path, column, message):
    with pytest.raises(ValueError, match=message):
        sf.from_arrow(pa.table({"c": column})).write_tfrecords(str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out") or not _visible(str(tmp_path / "out"))


def test_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError, match="Unknown arguments for read_tfrecords"):
        from shardflow.connectors.tfrecords import TFRecordDatasource

        TFRecordDatasource(PLAIN, compression="gzip")
    with pytest.raises(FileNotFoundError):
        sf.read_tfrecords(str(tmp_path / "missing"))


# -- the framing -------------------------------------------------------------------------------


def test_masked_crc_matches_tensorflow_definition():
    # CRC-32C("123456789") is 0xE3069283, the standard check value; the mask is TensorFlow's.
    crc = 0xE3069283
    assert masked_crc(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked_crc(b"") == 0xA282EAD8


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=20), st.integers(1, 4096))
def test_property_framing_round_trip_in_any_read_size(datas, read_size):
    import io

    class Trickle(io.BytesIO):
        def read(self, n=-1):
            return super().read(min(n, read_size) if n and n > 0 else read_size)

    stream = Trickle(b"".join(frame_record(d) for d in datas))
    got = list(read_records(stream))
    assert [d for _, d in got] == datas
    offsets = np.cumsum([0] + [16 + len(d) for d in datas])[:-1].tolist()
    assert [o for o, _ in got] == offsets


def test_corrupt_record_error_is_a_value_error():
    assert issubclass(CorruptRecordError, ValueError)


def test_listed_by_shardflow_connectors(capsys):
    from shardflow.cli import main

    assert main(["connectors", "--json"]) == 0
    listing = {c["name"]: c for c in json.loads(capsys.readouterr().out)["connectors"]}
    assert listing["tfrecords"]["package"] == "shardflow"
    assert listing["tfrecords"]["capabilities"] == ["read", "projection", "write"]
