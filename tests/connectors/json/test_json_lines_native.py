"""shardflow's C parser of JSON Lines against its oracles.

Whatever the C parser returns must equal what ``pyarrow.json.read_json`` returns for the same
bytes (schema, values, nulls, doubles bit for bit), and wherever Arrow raises, the C parser
must decline; its doubles must equal Python's ``float`` (correctly rounded). Inputs are
generated (hypothesis), plus the edge cases that decide how a value is typed.
"""

from __future__ import annotations

import json
import math
import random
import struct

import pyarrow as pa
import pyarrow.json as pajson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table_oracle import check_same_as_arrow, read_with_and_without

from shardflow.connectors.json import native

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the C parser (connectors/json/_jsonl.c) is not built"
)

BLOCK = 4 * 1024 * 1024


def arrow(data: bytes, schema: pa.Schema | None = None) -> pa.Table | Exception:
    options = pajson.ParseOptions(explicit_schema=schema) if schema is not None else None
    try:
        return pajson.read_json(
            pa.BufferReader(data),
            read_options=pajson.ReadOptions(block_size=BLOCK),
            parse_options=options,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        return exc


def same_as_arrow(data: bytes, schema: pa.Schema | None = None) -> pa.Table | None:
    """Parse with the C parser; when it does not decline, Arrow must give the same table."""
    got = native.read_lines(pa.py_buffer(data), schema, BLOCK)
    want = arrow(data, schema)
    check_same_as_arrow(got, want, data)
    return got


# -- numbers ------------------------------------------------------------------------------


def _same_double(text: str) -> None:
    got = native.parse_double(text)
    assert got is not None, text
    want = float(text)
    assert struct.pack("<d", got) == struct.pack("<d", want), (text, got, want)


EDGE_NUMBERS = [
    "0",
    "-0.0",
    "1",
    "0.1",
    "0.3",
    "1e23",
    "8.98846567431158e307",
    "1.7976931348623157e308",
    "2.2250738585072011e-308",  # takes some parsers forever
    "2.2250738585072014e-308",
    "4.9406564584124654e-324",
    "5e-324",
    "2.4703282292062328e-324",
    "9007199254740993",
    "9007199254740993.0",
    "9007199254740992.9999999999999999999",
    "123456789012345678901234567890",
    "0.000000000000000000000000000001",
    "1.00000000000000011102230246251565404236316680908203125",  # exactly halfway
    "1.00000000000000011102230246251565404236316680908203124",
    "1.00000000000000011102230246251565404236316680908203126",
    "7.3177701707893310e+15",
    "110.109999999999999",
    "-573.874000000000024",
    "3.14159265358979323846264338327950288",
    "1e-300",
    "1e299",
    "0.0000000000000000001",  # 18 zeros after the point: once read as 0
    "-0.00000000000000000012345678901234567890123",
    "0." + "0" * 30 + "1",
    "0." + "0" * 323 + "5",  # the smallest subnormal, written out
]


@pytest.mark.parametrize("text", EDGE_NUMBERS)
def test_edge_doubles_are_correctly_rounded(text):
    _same_double(text)


def test_random_doubles_are_correctly_rounded():
    rng = random.Random(7)
    for _ in range(60_000):
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(value) and abs(value) < 1e299 and (value == 0 or abs(value) > 1e-300):
            _same_double(repr(value))
    for _ in range(60_000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
        exponent = rng.randint(-320, 290)
        text = f"{rng.choice(['', '-'])}{digits[0]}.{digits[1:] or '0'}e{exponent}"
        _same_double(text)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e298, max_value=1e298))
def test_doubles_written_by_python_read_back_exactly(value):
    _same_double(repr(value))
    _same_double(f"{value:.17e}")
    _same_double(f"{value:.25g}")


@pytest.mark.parametrize(
    "text",
    ["01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "1e309", "0e309", "NaN", "Infinity"],
)
def test_numbers_that_are_not_plain_json_are_declined(text):
    assert native.parse_double(text) is None


# -- whole lines, edge cases --------------------------------------------------------------

PARSED = [
    b'{"b":1,"a":2}\n{"a":3,"c":null}\n',
    b'{"a":1}\n\n   \n{"a":2}',
    b'{"a":1}\r\n{"a":2}\r\n',
    b'{"a":1}\n{"a":2.5}\n{"a":null}\n',
    b'{"a":null}\n{"a":null}\n',
    b'{}\n{"a":1}\n',
    b'{"":1}\n',
    b'{"a":9223372036854775807}\n{"a":-9223372036854775808}\n',
    b'{"a":true,"b":false}\n{"b":null}\n',
    b'{"s":"\\ud83d\\ude00 \\u00e9 \\" \\\\ \\/ \\b\\f\\n\\r\\t \\u0001"}\n',
    '{"s":"é ü 漢字 😀"}\n'.encode(),
    b'{"a":-0.0,"b":1e2,"c":1E-2}\n',
    b'{"s":"2024-13"}\n{"s":"10:11:12"}\n',
    b'{ "a" : 1 , "b" : "x" }\n',
    b'{"a\\u0062":1,"\\u00e9":2}\n{"ab":3,"\xc3\xa9":4}\n',  # escaped keys
]


@pytest.mark.parametrize("data", PARSED)
def test_lines_it_parses_as_arrow_does(data):
    assert same_as_arrow(data) is not None


DECLINED = [
    b'{"a":[1]}\n',  # nested: Arrow makes a list
    b'{"a":{"b":1}}\n',
    b'{"a":"2024-01-02"}\n',  # Arrow infers timestamp[s]
    b'{"a":"2024-01-02T10:11:12Z"}\n',
    b'{"a":12345678901234567890}\n',  # Arrow makes a double
    b'{"a":-0}\n',
    b'{"a":1,"a":2}\n',  # Arrow raises
    b'{"a":"x"}\n{"a":1}\n',
    b'{"a":true}\n{"a":1}\n',
    b'{"a":1} {"a":2}\n',  # Arrow reads two rows
    b'{"a":NaN}\n',
    b'{"a":"\xff"}\n',
    b'{"a":"x\x01"}\n',
    b'{"a":"\\ud83d"}\n',
    b'{"a":"\\x"}\n',
    b"[1,2]\n",
    b'\xef\xbb\xbf{"a":1}\n',
    b'{"a":01}\n',
    b'{"a":1e309}\n',
    b'{"a":1\n',
    b'{"a":1,}\n',
    b"{}\n{}\n",  # rows without columns
]


@pytest.mark.parametrize("data", DECLINED)
def test_what_arrow_may_read_differently_is_declined(data):
    assert native.decline_reason(pa.py_buffer(data), None, BLOCK) is not None
    assert same_as_arrow(data) is None


def test_explicit_types_are_kept_and_checked():
    schema = pa.schema({"z": pa.int64(), "a": pa.float64(), "s": pa.string(), "t": pa.bool_()})
    table = same_as_arrow(b'{"a":1,"s":"2024-01-02","b":7}\n{"t":true,"a":2.5}\n', schema)
    assert table is not None
    assert table.column_names == ["z", "a", "s", "t", "b"]  # explicit first, then inferred
    assert table["z"].null_count == 2
    for data in (b'{"z":1.5}\n', b'{"s":1}\n', b'{"t":1}\n', b'{"z":"1"}\n'):
        assert same_as_arrow(data, schema) is None
    assert native.read_lines(b'{"a":1}\n', pa.schema({"a": pa.int32()}), BLOCK) is None
    assert native.read_lines(b'{"a":1}\n', pa.schema({"a": pa.timestamp("s")}), BLOCK) is None


def test_a_line_longer_than_the_block_is_declined():
    data = b'{"a":"' + b"x" * 100 + b'"}\n'
    assert native.read_lines(data, None, 50) is None
    assert native.read_lines(data, None, 200) is not None


def test_column_buffers_outlive_the_parse_and_slices_work():
    data = b"".join(b'{"i":%d,"s":"v%d","n":null}\n' % (i, i) for i in range(1000))
    table = native.read_lines(pa.py_buffer(data), None, BLOCK)
    del data
    assert table["i"].to_pylist() == list(range(1000))
    assert table.slice(990)["s"].to_pylist() == [f"v{i}" for i in range(990, 1000)]
    assert table.schema.field("n").type == pa.null()


# -- generated lines ----------------------------------------------------------------------

KEYS = ["a", "b", "c", "long key", "é"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["2024-01-02", "2024-01-02 10:11:12", "1999-12-31T23:59:59", "2024-1-2"]),
)
VALUES = st.one_of(SCALARS, st.lists(st.integers(0, 9), max_size=2))


@st.composite
def json_lines(draw, uniform: bool):
    """Lines of objects over a few keys; ``uniform`` keeps each key's values of one JSON type
    (as real files mostly have), otherwise any value goes anywhere."""
    kinds = {key: draw(st.sampled_from(["int", "float", "str", "bool", "any"])) for key in KEYS}
    by_kind = {
        "int": st.one_of(st.none(), st.integers(-(10**15), 10**15)),
        "float": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        "str": st.one_of(st.none(), st.text(max_size=10)),
        "bool": st.one_of(st.none(), st.booleans()),
        "any": VALUES,
    }
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS)))
        row = {k: draw(by_kind[kinds[k]] if uniform else VALUES) for k in keys}
        text = json.dumps(row, ensure_ascii=draw(st.booleans()))
        if draw(st.integers(0, 9)) == 0:
            text = text.replace(":", " : ").replace(",", " ,\t")
        lines.append(text)
        if draw(st.integers(0, 19)) == 0:
            lines.append("")
    return ("\n".join(lines) + draw(st.sampled_from(["", "\n"]))).encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_lines(uniform=True))
def test_generated_files_of_uniform_columns(data):
    same_as_arrow(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_lines(uniform=False))
def test_generated_files_of_mixed_values(data):
    same_as_arrow(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_lines(uniform=True), json_lines(uniform=True))
def test_generated_chunks_read_with_the_types_of_an_earlier_one(first, later):
    """As read_json reads the chunks after a file's first: with the types found so far."""
    head = arrow(first)
    if isinstance(head, Exception):
        return
    schema = pa.schema([f for f in head.schema if not pa.types.is_null(f.type)])
    same_as_arrow(later, schema)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_and_never_differ(data):
    same_as_arrow(data)


@settings(max_examples=300, deadline=None)
@given(json_lines(uniform=True), st.data())
def test_damaged_lines_never_crash_and_never_differ(data, draw):
    position = draw.draw(st.integers(0, max(0, len(data) - 1)))
    byte = draw.draw(st.integers(0, 255))
    damaged = data[:position] + bytes([byte]) + data[position + 1 :]
    same_as_arrow(damaged)
    same_as_arrow(data[:position])


def test_most_common_files_are_not_declined():
    rng = random.Random(3)
    rows = [
        {"id": i, "x": rng.random() * 1000, "n": rng.randint(-5, 5), "s": f"w{i}", "f": i % 2 == 0}
        for i in range(5000)
    ]
    data = "\n".join(json.dumps(r) for r in rows).encode()
    table = same_as_arrow(data)
    assert table is not None and table.num_rows == 5000


# -- through read_json --------------------------------------------------------------------


@pytest.fixture
def read_both(monkeypatch):
    import shardflow as sf

    def read(path):
        return read_with_and_without(
            monkeypatch, native, "_jsonl", lambda: sf.read_json(str(path)).to_arrow()
        )

    return read


def test_read_json_gives_the_same_table_with_and_without_the_c_parser(tmp_path, read_both):
    rng = random.Random(5)
    lines = []
    for i in range(60_000):  # several 2 MiB chunks
        row = {"id": i, "x": rng.random(), "s": f"name-{i}", "flag": i % 3 == 0}
        if i % 7 == 0:
            row["x"] = None
        if i > 40_000:
            row["late"] = rng.randint(0, 9)  # a field that appears in a later chunk
        lines.append(json.dumps(row))
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with_native, arrow_only = read_both(path)
    assert with_native.num_rows == 60_000
    assert with_native.equals(arrow_only)
    assert with_native.schema.field("late").type == pa.int64()


def test_a_chunk_it_declines_midway_is_read_by_arrow(tmp_path, read_both):
    lines = [json.dumps({"id": i, "v": i * 0.5, "tags": None}) for i in range(50_000)]
    lines += [json.dumps({"id": 50_000 + i, "v": 1.0, "tags": [i, i + 1]}) for i in range(10)]
    path = tmp_path / "nested_late.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with_native, arrow_only = read_both(path)
    assert with_native.equals(arrow_only)
    assert with_native.num_rows == 50_010
    assert with_native["tags"].to_pylist()[-1] == [9, 10]


@pytest.mark.parametrize(
    ("data", "rows"), [(b"\r\xbb\xbf", None), (b"\xef\xbb\xbf\n \n", 0), (b"\xbb\xbf", 0)]
)
def test_only_whitespace_makes_a_file_empty(tmp_path, data, rows):
    """Bytes of a byte order mark after a line break are not whitespace: Arrow fails on
    them (the file was read as empty); at the file's start Arrow drops them."""
    import shardflow as sf

    path = tmp_path / "odd.jsonl"
    path.write_bytes(data)
    if rows is None:
        with pytest.raises(pa.ArrowInvalid):
            pajson.read_json(str(path))
        with pytest.raises(ValueError, match="odd.jsonl"):
            sf.read_json(str(path), lines=True).to_arrow()
    else:
        assert pajson.read_json(str(path)).num_rows == rows
        assert sf.read_json(str(path), lines=True).to_arrow().num_rows == rows
