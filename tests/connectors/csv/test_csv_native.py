"""shardflow's C parser of CSV against its oracle, ``pyarrow.csv.read_csv``.

Whatever the C parser returns must equal what Arrow returns for the same bytes with default
options (or the same column names and types), and wherever Arrow raises, the C parser must
decline. Inputs are generated (hypothesis), plus the edge cases that decide a column's type.
"""

from __future__ import annotations

import csv
import io
import random
import struct

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from table_oracle import check_same_as_arrow, read_with_and_without

from shardflow.connectors.csv import native

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the C parser (connectors/csv/_csv.c) is not built"
)


def arrow(data: bytes, names=None, types=None) -> pa.Table | Exception:
    read = pacsv.ReadOptions(column_names=names) if names is not None else None
    convert = pacsv.ConvertOptions(column_types=types) if types else None
    try:
        return pacsv.read_csv(pa.BufferReader(data), read_options=read, convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        return exc


def same_as_arrow(data: bytes, names=None, types=None) -> pa.Table | None:
    """Parse with the C parser; when it does not decline, Arrow must give the same table."""
    got = native.read_chunk(pa.py_buffer(data), names, types)
    want = arrow(data, names, types)
    check_same_as_arrow(got, want, data)
    return got


PARSED = [
    b'"id","a","label"\n0,110.11,"vwtn"\n1,-573.874,"x,y"\n',
    b"a,b\n1,x\n2,y",
    b"a,b\r\n1,x\r\n2,y\r\n",
    b"a\n1\n\n2\n\n",
    b"\n\na\n1\n",  # empty lines before the header
    b"a\n01\n007\n",  # leading zeros: int64
    b"a\n-0\n1\n",  # -0 is 0 in an int64 column
    b"a\n-0\n1.5\n",  # and -0.0 in a double one
    b"a\n9223372036854775808\n1\n",  # past int64: double
    b"a\n1\nNA\n\n2\n",
    b'a\n""\n1\n',  # a quoted empty value is null
    b'a\n"NA"\n1\n',
    b'a\n"1"\n2\n',
    b"a\nNA\nx\n",  # strings are never null
    b"a\nNA\nNA\n",  # every value null: null type
    b'a\n"x""y"\n"""z"""\n',
    b"a\n1.5\nabc\n",
    b"a,b\ntrue,x\nabc,1\n",  # a true value among strings: a string
    "a\né\n漢字\n".encode(),
    b"a\n1e5\n1E+05\n2.5e-3\n",
    b"a\nx y \n z\n",
    b",b\n1,2\n",
    b"a,b\n,\n1,x\n",
]


@pytest.mark.parametrize("data", PARSED)
def test_files_it_parses_as_arrow_does(data):
    assert same_as_arrow(data) is not None


@pytest.mark.parametrize(
    ("late", "type_"),
    [("2.5", pa.float64()), ("abc", pa.string()), ("", pa.int64()), ("-0", pa.int64())],
)
def test_a_value_after_the_first_rows_can_change_the_guessed_type(late, type_):
    """Types are guessed from the first rows and the chunk read in one pass; a later value
    that does not fit sends the chunk to the full inference, which must agree with Arrow."""
    rows = [f"{i},{i % 7}" for i in range(300)]
    rows[250] = f"250,{late}"
    table = same_as_arrow(("id,v\n" + "\n".join(rows) + "\n").encode())
    assert table is not None
    assert table.schema.field("v").type == type_


def test_a_late_value_of_unclear_type_is_declined():
    rows = [f"{i}" for i in range(300)] + ["2024-01-02"]
    assert same_as_arrow(("v\n" + "\n".join(rows) + "\n").encode()) is None


DECLINED = [
    b"a\ntrue\nfalse\n",  # bool
    b"a\n2024-01-02\n",  # date32
    b"a\n10:11:12\n",  # time32
    b"a\n2024-01-02 10:11:12\n",  # timestamp
    b"a\n+2\n1\n",
    b"a\n 2\n1\n",
    b"a\n.5\n",
    b"a\n1.\n",
    b"a\ninf\n",
    b"a\n0x10\n",
    b"a\n1e400\n",
    b"a\n\xff\nx\n",  # binary
    b"a,b\n1,2\n3\n",  # Arrow raises
    b"a,b\n1,2,3\n",
    b'a\n"x"y\n',
    b'a\nx"y\n',
    b'a\n"x\ny"\n',
    b"a\r1\r2\r",
    b"a,a\n1,2\n",
    b"a\n",  # no data row
    b"",
    b"\xef\xbb\xbfa\n1\n",
]


@pytest.mark.parametrize("data", DECLINED)
def test_what_arrow_may_read_differently_is_declined(data):
    assert native.decline_reason(pa.py_buffer(data)) is not None
    assert same_as_arrow(data) is None


def test_named_columns_and_given_types():
    names = ["i", "x", "s", "free"]
    types = {"i": pa.int64(), "x": pa.float64(), "s": pa.string()}
    table = same_as_arrow(b"1,2,NA,4\nNA,3.5,x,\n", names, types)
    assert table is not None
    assert table.schema.types == [pa.int64(), pa.float64(), pa.string(), pa.int64()]
    assert table["s"].to_pylist() == ["NA", "x"]
    for data in (b"1.5,2,a,4\n", b"x,2,a,4\n", b"1,abc,a,4\n"):
        assert same_as_arrow(data, names, types) is None
    assert native.read_chunk(b"1\n", ["a"], {"a": pa.bool_()}) is None
    assert native.read_chunk(b"1\n", ["a"], {"a": pa.int32()}) is None
    assert native.read_chunk(b"1\n", ["a"], {"zz": pa.int64()}) is None


def test_doubles_are_correctly_rounded():
    rng = random.Random(11)
    values = []
    for _ in range(20_000):
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if value == value and abs(value) < 1e300 and (value == 0 or abs(value) > 1e-300):
            values.append(repr(value))
    values += [f"{rng.random() * 1000:.3f}" for _ in range(20_000)]
    data = ("x\n" + "\n".join(values) + "\n").encode()
    table = same_as_arrow(data)
    assert table is not None and table.schema.types == [pa.float64()]


@pytest.mark.parametrize("zeros", [1, 17, 18, 19, 20, 30, 320])
@pytest.mark.parametrize("digits", ["1", "5", "123456789012345678901234567"])
def test_zeros_after_the_point_are_not_significant_digits(zeros, digits):
    """Leading zeros of a fraction take no room among the 19 digits the parser keeps: with
    18 or more of them the value was read as 0 (a zero mantissa whose digits were dropped)."""
    text = "0." + "0" * zeros + digits
    for sign in ("", "-"):
        table = same_as_arrow(f"x\n{sign}{text}\n1.5\n".encode())
        assert table is not None
        got, want = table["x"][0].as_py(), float(sign + text)
        assert struct.pack("<d", got) == struct.pack("<d", want), (sign + text, got, want)


@pytest.mark.parametrize(
    "text",
    ["0000000000000000000000.5", "000000000000000000000000000012", "-00000000000000000000007"],
)
def test_leading_zeros_of_an_integer_part_are_not_significant_digits(text):
    table = same_as_arrow(f"x\n{text}\n".encode())
    assert table is not None
    assert table["x"][0].as_py() == float(text)


# -- generated files ----------------------------------------------------------------------

CELLS = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda v: f"{v:.4f}"),
    st.sampled_from(["", "NA", "null", "NaN", "nan", "N/A", "-", "+1", " 2", "1.", ".5"]),
    st.sampled_from(["true", "False", "1", "0", "2024-01-02", "10:11:12", "inf", "1e5"]),
    st.text(max_size=8),
    st.text(alphabet="abc xyz,\"'", max_size=6),
)


@st.composite
def csv_files(draw, uniform: bool):
    """Files of a few columns; ``uniform`` draws each column's cells from one kind."""
    ncols = draw(st.integers(1, 4))
    kinds = [
        draw(
            st.sampled_from(
                [
                    st.integers(-(10**12), 10**12).map(str),
                    st.floats(allow_nan=False, allow_infinity=False).map(repr),
                    st.text(alphabet="abcdef ghé", min_size=1, max_size=6),
                    st.sampled_from(["", "NA", "7", "x"]),
                ]
            )
        )
        for _ in range(ncols)
    ]
    rows = []
    for _ in range(draw(st.integers(1, 10))):
        rows.append([draw(kinds[c] if uniform else CELLS) for c in range(ncols)])
    out = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_NONNUMERIC, csv.QUOTE_ALL]))
    writer = csv.writer(out, quoting=quoting, lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    names = [f"c{i}" for i in range(ncols)]
    writer.writerow(names)
    for row in rows:
        if any("\n" in cell or "\r" in cell for cell in row):
            continue
        writer.writerow(row)
    return out.getvalue().encode()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files(uniform=True))
def test_generated_files_of_uniform_columns(data):
    same_as_arrow(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files(uniform=False))
def test_generated_files_of_mixed_values(data):
    same_as_arrow(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(csv_files(uniform=True), csv_files(uniform=True))
def test_generated_chunks_read_with_the_types_of_an_earlier_one(first, later):
    """As read_csv reads the chunks after a file's first: no header, the types found so far."""
    head = arrow(first)
    if isinstance(head, Exception):
        return
    body = later.split(b"\n", 1)[1] if b"\n" in later else b""
    if not body.strip():
        return
    types = {f.name: f.type for f in head.schema if not pa.types.is_null(f.type)}
    width = len(later.split(b"\n", 1)[0].split(b","))
    if width != head.num_columns:
        return
    same_as_arrow(body, head.column_names, types)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_arbitrary_bytes_never_crash_and_never_differ(data):
    same_as_arrow(data)


@settings(max_examples=300, deadline=None)
@given(csv_files(uniform=True), st.data())
def test_damaged_files_never_crash_and_never_differ(data, draw):
    position = draw.draw(st.integers(0, max(0, len(data) - 1)))
    byte = draw.draw(st.sampled_from([0, 9, 10, 13, 32, 34, 44, 46, 48, 65, 0xC3, 0xFF]))
    same_as_arrow(data[:position] + bytes([byte]) + data[position + 1 :])
    same_as_arrow(data[:position])


# -- through read_csv ---------------------------------------------------------------------


@pytest.fixture
def read_both(monkeypatch):
    import shardflow as sf

    def read(path):
        return read_with_and_without(
            monkeypatch, native, "_csv", lambda: sf.read_csv(str(path)).to_arrow()
        )

    return read


def test_read_csv_gives_the_same_table_with_and_without_the_c_parser(tmp_path, read_both):
    rng = random.Random(9)
    lines = ["id,x,name,maybe,empty"]
    for i in range(120_000):  # several 2 MiB chunks
        x = "NA" if i % 11 == 0 else repr(rng.random() * 1e4)
        maybe = "" if i < 70_000 else str(i % 5)  # only nulls in the first chunks
        lines.append(f'{i},{x},"name {i}, the {i % 7}th",{maybe},')
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    with_native, arrow_only = read_both(path)
    assert with_native.num_rows == 120_000
    assert with_native.equals(arrow_only)
    assert with_native.schema.field("x").type == pa.float64()


def test_a_chunk_it_declines_midway_is_read_by_arrow(tmp_path, read_both):
    lines = ["id,x"] + [f"{i},{i * 0.25}" for i in range(150_000)] + ["150000,1e400"]
    path = tmp_path / "late_infinity.csv"
    path.write_text("\n".join(lines) + "\n")
    with_native, arrow_only = read_both(path)
    assert with_native.equals(arrow_only)
    assert with_native["x"][-1].as_py() == float("inf")
