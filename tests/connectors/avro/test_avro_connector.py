"""read_avro: Avro files written by fastavro read back with the types their schema gives, every
codec, streaming from S3 and GCS, and errors naming the file."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.connectors.avro.arrow_types import arrow_type, layout_of
from shardflow.sdk.object_column import is_object_type

fastavro = pytest.importorskip("fastavro")


def _write(path, schema, records, codec="null"):
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(schema), records, codec=codec)
    return str(path)


def _record(*fields):
    return {"type": "record", "name": "Row", "fields": [{"name": n, "type": t} for n, t in fields]}


UTC = datetime.timezone.utc
ALL_TYPES = _record(
    ("i", "int"),
    ("l", "long"),
    ("f", "float"),
    ("d", "double"),
    ("b", "boolean"),
    ("s", "string"),
    ("by", "bytes"),
    ("opt", ["null", "long"]),
    ("e", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}),
    ("fx", {"type": "fixed", "name": "Pair", "size": 2}),
    ("arr", {"type": "array", "items": "string"}),
    ("m", {"type": "map", "values": "long"}),
    (
        "rec",
        {
            "type": "record",
            "name": "Inner",
            "fields": [{"name": "x", "type": "long"}, {"name": "y", "type": ["null", "string"]}],
        },
    ),
    ("same", ["int", "long"]),
    ("date", {"type": "int", "logicalType": "date"}),
    ("tms", {"type": "int", "logicalType": "time-millis"}),
    ("tus", {"type": "long", "logicalType": "time-micros"}),
    ("ts_ms", {"type": "long", "logicalType": "timestamp-millis"}),
    ("ts_us", {"type": "long", "logicalType": "timestamp-micros"}),
    ("lts", {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
    ("uid", {"type": "string", "logicalType": "uuid"}),
)
ALL_ARROW = pa.schema(
    [
        ("i", pa.int64()),
        ("l", pa.int64()),
        ("f", pa.float64()),
        ("d", pa.float64()),
        ("b", pa.bool_()),
        ("s", pa.string()),
        ("by", pa.binary()),
        ("opt", pa.int64()),
        ("e", pa.string()),
        ("fx", pa.binary()),
        ("arr", pa.list_(pa.string())),
        ("m", pa.map_(pa.string(), pa.int64())),
        ("rec", pa.struct([("x", pa.int64()), ("y", pa.string())])),
        ("same", pa.int64()),
        ("date", pa.date32()),
        ("tms", pa.time64("us")),
        ("tus", pa.time64("us")),
        ("ts_ms", pa.timestamp("ms")),
        ("ts_us", pa.timestamp("us")),
        ("lts", pa.timestamp("us")),
        ("dec", pa.decimal128(10, 2)),
        ("uid", pa.uuid()),
    ]
)


def _all_types_records(n):
    return [
        {
            "i": i,
            "l": -(2**40) * i,
            "f": i + 0.5,
            "d": i / 3,
            "b": i % 2 == 0,
            "s": f"s{i}é",
            "by": bytes([i]),
            "opt": None if i % 3 == 0 else i,
            "e": ("RED", "GREEN")[i % 2],
            "fx": b"ab",
            "arr": [f"a{j}" for j in range(i % 3)],
            "m": {f"k{j}": j for j in range(i % 2 + 1)},
            "rec": {"x": i, "y": None if i % 2 else "y"},
            "same": i * 7,
            "date": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
            "tms": datetime.time(1, 2, 3, 4000),
            "tus": datetime.time(1, 2, 3, 4005),
            "ts_ms": datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC),
            "ts_us": datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
            "lts": datetime.datetime(2024, 5, 6, 7, 8, 9, 654321),
            "dec": decimal.Decimal(f"{i}.25"),
            "uid": uuid.UUID(int=i),
        }
        for i in range(n)
    ]


def _expected(records):
    """The oracle: Arrow's own conversion of the values fastavro reads, with the schema's types
    (timestamps in UTC without a zone, as Ray Data gives them)."""
    plain = []
    for r in records:
        r = dict(r)
        for name in ("ts_ms", "ts_us"):
            r[name] = r[name].astimezone(UTC).replace(tzinfo=None)
        plain.append(r)
    return pa.Table.from_pylist(plain, schema=ALL_ARROW)


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "bzip2", "xz"])
def test_every_type_and_codec(tmp_path, codec):
    if codec == "snappy":
        pytest.importorskip("cramjam")
    records = _all_types_records(7)
    path = _write(tmp_path / f"data.{codec}.avro", ALL_TYPES, records, codec)
    table = sf.read_avro(path).to_arrow()
    assert table.schema == ALL_ARROW
    assert table.equals(_expected(records))


def test_folder_read_on_both_backends(backend, tmp_path):
    for k in range(3):
        _write(tmp_path / f"part-{k}.avro", ALL_TYPES, _all_types_records(5), "deflate")
    ds = sf.read_avro(str(tmp_path))
    assert ds.count() == 15
    assert ds.schema().base_schema == ALL_ARROW
    assert sorted(r["l"] for r in ds.take_all()) == sorted([-(2**40) * i for i in range(5)] * 3)


def test_store_streams_from_object_stores(store):
    """Local disk, S3 (moto) and GCS (emulator)."""
    import io

    records = [{"id": i, "name": f"n{i}"} for i in range(50)]
    out = io.BytesIO()
    schema = _record(("id", "long"), ("name", "string"))
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec="deflate")
    store.write_bytes("in/data.avro", out.getvalue())
    ds = sf.read_avro(store.path("in"), include_paths=True, **store.options())
    rows = ds.take_all()
    assert [{"id": r["id"], "name": r["name"]} for r in rows] == records
    assert rows[0]["path"].endswith("in/data.avro")


def test_union_of_types_is_a_column_of_python_objects(tmp_path):
    path = _write(
        tmp_path / "u.avro",
        _record(("v", ["null", "long", "string"]), ("n", "long")),
        [{"v": 1, "n": 0}, {"v": "a", "n": 1}, {"v": None, "n": 2}],
    )
    table = sf.read_avro(path).to_arrow()
    assert is_object_type(table.schema.field("v").type)
    assert table.schema.field("n").type == pa.int64()
    assert sf.read_avro(path).take_all() == [
        {"v": 1, "n": 0},
        {"v": "a", "n": 1},
        {"v": None, "n": 2},
    ]


def test_recursive_records_and_non_record_files(tmp_path):
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
    }
    path = _write(tmp_path / "r.avro", node, [{"v": 1, "next": {"v": 2, "next": None}}])
    table = sf.read_avro(path).to_arrow()
    assert table.schema.field("v").type == pa.int64()
    assert is_object_type(table.schema.field("next").type)
    assert table.column("next").to_pylist() == [{"v": 2, "next": None}]
    longs = _write(tmp_path / "longs.avro", "long", [1, 2, 3])
    assert sf.read_avro(longs).take_all() == [{"item": 1}, {"item": 2}, {"item": 3}]


def test_empty_file_reads_as_no_rows_of_its_schema(tmp_path):
    path = _write(tmp_path / "e.avro", ALL_TYPES, [])
    ds = sf.read_avro(path)
    assert ds.count() == 0
    assert ds.to_arrow().schema == ALL_ARROW


def test_large_file_is_read_in_several_blocks_of_one_schema(tmp_path):
    records = [{"id": i, "text": "x" * (i % 50)} for i in range(30_000)]
    path = _write(tmp_path / "big.avro", _record(("id", "long"), ("text", "string")), records)
    from shardflow.connectors.avro import AvroDatasource

    with open(path, "rb") as f:
        blocks = list(AvroDatasource(path)._read_stream(f, path))
    assert len(blocks) > 1 and len({b.schema for b in blocks}) == 1
    assert sum(b.num_rows for b in blocks) == 30_000
    assert pa.concat_tables(blocks).column("id").to_pylist() == list(range(30_000))


def test_corrupt_and_truncated_files_name_the_file(tmp_path):
    good = _write(tmp_path / "good.avro", _record(("id", "long")), [{"id": i} for i in range(2000)])
    data = open(good, "rb").read()
    os.remove(good)
    (tmp_path / "cut.avro").write_bytes(data[: len(data) - 700])
    with pytest.raises(Exception, match=r"cut\.avro as Avro"):
        sf.read_avro(str(tmp_path)).take_all()
    (tmp_path / "cut.avro").write_bytes(b"PAR1 not avro at all")
    with pytest.raises(Exception, match=r"cut\.avro as Avro"):
        sf.read_avro(str(tmp_path)).take_all()


def test_arguments_are_checked(tmp_path):
    from shardflow.connectors.avro import AvroDatasource

    with pytest.raises(TypeError, match="Unknown arguments for read_avro"):
        AvroDatasource(str(tmp_path), reader_schema={})
    with pytest.raises(FileNotFoundError):
        sf.read_avro(str(tmp_path / "missing.avro"))


def test_decimals_beyond_38_digits_are_decimal256():
    assert arrow_type(
        {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 3}, {}
    ) == pa.decimal256(50, 3)
    layout = layout_of(fastavro.parse_schema(_record(("a", ["null", "double", "float"]))))
    assert layout.schema == pa.schema([("a", pa.float64())]) and not layout.objects


# -- property: any records of a schema read back as Arrow converts them -----------------------

_scalars = {
    "long": st.integers(-(2**63), 2**63 - 1),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=10),
    "bytes": st.binary(max_size=10),
    "boolean": st.booleans(),
}


@st.composite
def _schemas_and_records(draw):
    names = draw(st.lists(st.sampled_from(sorted(_scalars)), min_size=1, max_size=5))
    fields = []
    strategies = {}
    for k, kind in enumerate(names):
        shape = draw(st.sampled_from(["plain", "optional", "array", "map"]))
        name = f"c{k}"
        if shape == "plain":
            fields.append((name, kind))
            strategies[name] = _scalars[kind]
        elif shape == "optional":
            fields.append((name, ["null", kind]))
            strategies[name] = st.none() | _scalars[kind]
        elif shape == "array":
            fields.append((name, {"type": "array", "items": kind}))
            strategies[name] = st.lists(_scalars[kind], max_size=3)
        else:
            fields.append((name, {"type": "map", "values": kind}))
            strategies[name] = st.dictionaries(st.text(max_size=3), _scalars[kind], max_size=3)
    records = draw(st.lists(st.fixed_dictionaries(strategies), max_size=15))
    return _record(*fields), records


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas_and_records(), st.sampled_from(["null", "deflate"]))
def test_property_records_read_as_arrow_converts_them(tmp_path_factory, schema_records, codec):
    schema, records = schema_records
    path = _write(tmp_path_factory.mktemp("avro") / "p.avro", schema, records, codec)
    table = sf.read_avro(path).to_arrow()
    arrow_schema = pa.schema([(f["name"], arrow_type(f["type"], {})) for f in schema["fields"]])
    assert table.equals(pa.Table.from_pylist(records, schema=arrow_schema))


def test_listed_by_shardflow_connectors(capsys):
    from shardflow.cli import main

    assert main(["connectors", "--json"]) == 0
    listing = {c["name"]: c for c in json.loads(capsys.readouterr().out)["connectors"]}
    assert listing["avro"]["package"] == "shardflow"
    assert listing["avro"]["capabilities"] == ["read", "projection"]


def test_every_file_is_read_unless_extensions_are_given(tmp_path):
    schema = _record(("v", "long"))
    _write(tmp_path / "part-0", schema, [{"v": 1}])
    _write(tmp_path / "part-1.avro", schema, [{"v": 2}])
    assert sorted(r["v"] for r in sf.read_avro(str(tmp_path)).take_all()) == [1, 2]
    assert sf.read_avro(str(tmp_path), file_extensions=["avro"]).take_all() == [{"v": 2}]
