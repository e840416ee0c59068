"""Differential fuzzing of ``read_json`` over JSON Lines: shardflow's C parser and chunking
against Arrow.

Generated files (escapes, surrogates, raw control characters, byte order marks, NUL bytes,
invalid UTF-8, 1e309, denormals, 19+ digit integers, leading zeros, -0 and -0.0, long
strings, nested values, duplicate keys, several objects on a line, CR and CRLF line ends)
go through:

* the C parser, chunk by chunk, with the types the reader gives each chunk (and with types
  given at random), against ``pyarrow.json.read_json`` on the same bytes: the same table
  (types, values, nulls, doubles bit for bit) or a decline;
* the JSON Lines reader of one file, in one chunk and in chunks that end next to the
  interesting bytes, with the C parser and without (Arrow parses every chunk, or Python's
  json once Arrow fails, as the reader documents): the same tables or the same error;
  against a model of ``pyarrow.json.read_json`` calls, one per chunk, each with the types
  found before it; and, where every chunk parses, against Arrow's read of the whole file;
* ``sf.read_json`` for a share of the cases: Arrow's table for the whole file; where Arrow
  fails, an error naming the file or the rows of Python's json (the documented fallback,
  which parses no chunk natively: its values are Python's json's, converted by pyarrow).

Cases are seeded (see fuzz_runner.py): ``SHARDFLOW_FUZZ_CASES=200000`` for a long run.
"""

from __future__ import annotations

import io
import json
import math
import random
import struct

import pyarrow as pa
import pyarrow.json as pajson
import pytest
from fuzz_runner import PARTS, run_cases, time_limit
from table_oracle import check_same_as_arrow

import shardflow as sf
from shardflow.connectors._text_parsing import line_chunks as line_chunks_module
from shardflow.connectors._text_parsing.line_chunks import line_chunks
from shardflow.connectors.json import JSONDatasource
from shardflow.connectors.json import native as json_lines_native
from shardflow.connectors.json.datasource import _BLOCK_BYTES

pytestmark = pytest.mark.skipif(
    not json_lines_native.available(), reason="the C parser (connectors/json/_jsonl.c) is not built"
)

# cases of the default run: files through the reader; files through sf.read_json
CASES, READ_CASES = 1500, 300
BOM = b"\xef\xbb\xbf"
BOM_BYTES = (b"\xef", b"\xbb", b"\xbf")
ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)
READ = pajson.ReadOptions(use_threads=False, block_size=_BLOCK_BYTES)

# -- generated files ------------------------------------------------------------------------


def _digits(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(rng.randint(low, high)))


def number(rng: random.Random, hostile: bool) -> str:
    sign = rng.choice(["", "", "-"])
    pick = rng.randrange(11 if hostile else 9)
    if pick == 0:
        return str(rng.randint(-(10**6), 10**6))
    if pick == 1:
        return rng.choice(
            ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "0", "-0"]
            + ["-9223372036854775809", "18446744073709551615", "18446744073709551616"]
        )
    if pick == 2:
        return sign + rng.choice("123456789") + _digits(rng, 18, 30)
    if pick == 3:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        return repr(value) if math.isfinite(value) else "2.5"
    if pick == 4:
        return sign + rng.choice(
            ["5e-324", "4.9406564584124654e-324", "2.4703282292062328e-324", "1e-320"]
            + ["2.2250738585072011e-308", "2.2250738585072014e-308", "1e-400", "0e-999"]
            + ["1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308"]
            + ["1e308", "1e309", "1E309", "0e309", "1e+308", "0.0", "0.0e0", "1E5"]
        )
    if pick == 5:
        return sign + "0." + "0" * rng.randint(0, 45) + _digits(rng, 1, 25)
    if pick == 6:
        return sign + rng.choice("123456789") + _digits(rng, 0, 30) + "." + _digits(rng, 1, 30)
    if pick == 7:
        exponent = rng.choice(["e", "E"]) + rng.choice(["", "+", "-"]) + _digits(rng, 1, 3)
        return sign + rng.choice("123456789") + _digits(rng, 0, 18) + exponent
    if pick == 8:
        return f"{rng.random() * 10 ** rng.randint(-5, 20):.{rng.randint(1, 20)}f}"
    if pick == 9:  # leading zeros: not JSON
        return sign + "0" * rng.randint(1, 20) + _digits(rng, 1, 10)
    return rng.choice(["+1", ".5", "1.", "1e", "0x10", "NaN", "Infinity", "-Infinity", "1e5.5"])


ESCAPES = [r"\n", r"\"", r"\\", r"\/", r"\b", r"\f", r"\r", r"\t", r"\u00e9", r"\u0000"]
ESCAPES += [r"\ud83d\ude00", r"\u20ac", r"\uFEFF"]
BAD_ESCAPES = [r"\ud83d", r"\ude00", r"\x41", r"\u12", r"\'", "\\"]
RAW = ["é", "漢字", "😀", "\ufeff", " ", "a", "2024", "-"]
BAD_RAW = [b"\x00", b"\x01", b"\r", b"\t", b"\x7f", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x1f"]
DATES = ["2024-01-02", "2024-01-02T10:11:12Z", "2024-01-02 10:11:12", "1999-12-31T23:59:59"]
DATES += ["2024-01-02T10:11:12.123456789", "2024-13-45", "2024-1-2", "10:11:12", "2024-01-02x"]


def string(rng: random.Random, hostile: bool) -> bytes:
    pick = rng.randrange(6 if hostile else 5)
    if pick == 0:
        text = rng.choice(DATES)
    elif pick == 1:
        text = rng.choice(["x", "ab", "é"]) * rng.randint(50, 800)
    elif pick == 2:
        text = "".join(rng.choice(ESCAPES + RAW) for _ in range(rng.randint(1, 6)))
    elif pick in (3, 4):
        text = "".join(rng.choice(["w", "or", "d ", "é"]) for _ in range(rng.randint(0, 5)))
    else:
        parts = [rng.choice(BAD_RAW + [e.encode() for e in BAD_ESCAPES]) for _ in range(2)]
        return b'"' + b"a".join(parts) + b'"'
    return b'"' + text.encode() + b'"'


def value(rng: random.Random, flavor: str, hostile: bool) -> bytes:
    if rng.random() < (0.1 if hostile else 0.03):
        flavor = rng.choice(["int", "float", "str", "bool", "null", "nested"])
    if flavor == "int":
        return (number(rng, hostile) if rng.random() < 0.3 else str(rng.randint(-99, 99))).encode()
    if flavor == "float":
        return number(rng, hostile).encode()
    if flavor == "str":
        return string(rng, hostile)
    if flavor == "bool":
        return rng.choice([b"true", b"false"] * 4 + ([b"True", b"tru"] if hostile else []))
    if flavor == "nested":
        return rng.choice([b"[1,2]", b"[]", b'{"x":1}', b"{}", b'[{"a":null}]', b"[1,"])
    return b"null"


KEYS = [b'"a"', b'"b"', b'"c"', b'"long key"', '"é"'.encode(), b'""', b'"a\\u0062"']
KEYS += [b'"\\u00e9"', b'"q\\"q"']


def json_file(rng: random.Random) -> bytes:
    """Lines of objects over a few keys (one flavor of value each, with strays), blank lines,
    odd spacing, sometimes damaged: duplicate keys, two objects on a line, cut objects."""
    hostile = rng.random() < 0.5
    keys = rng.sample(KEYS, rng.randint(1, 5))
    flavors = {k: rng.choice(["int", "float", "str", "bool", "null", "mixed"]) for k in keys}
    space = [b"", b"", b" ", b"\t"] + ([b"\r", b"  \t "] if hostile else [])
    breaks = [b"\n"] if not hostile else rng.choice([[b"\n"], [b"\r\n"], [b"\r"], [b"\n", b"\r"]])
    data = b""
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4, 6, 9, 14, 30])):
        present = [k for k in keys if rng.random() < 0.8]
        if hostile and present and rng.random() < 0.05:
            present.append(rng.choice(present))  # a key twice
        members = []
        for key in present:
            flavor = flavors[key]
            if flavor == "mixed":
                flavor = rng.choice(["int", "float", "str", "bool", "null"])
            members.append(
                key + rng.choice(space) + b":" + rng.choice(space) + value(rng, flavor, hostile)
            )
        line = b"{" + rng.choice(space) + (b"," + rng.choice(space)).join(members) + b"}"
        if hostile and rng.random() < 0.06:
            line = rng.choice(
                [line + b" " + line, line[:-1], line + b",", b"[1]", b"nul", b"{,}"]
                + [BOM + line, rng.choice(BOM_BYTES) + line, b"\xef\xbb" + line]
            )
        data += rng.choice(space) + line + rng.choice(space) + rng.choice(breaks)
        if rng.random() < 0.05:
            data += rng.choice([b"", b" ", b"\t"]) + breaks[0]
    if rng.random() < 0.2 and data.endswith(breaks[0]):
        data = data[: -len(breaks[0])]
    if hostile and rng.random() < 0.2:
        data = BOM + data
    if hostile and rng.random() < 0.1 and data:
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.choice(b'"{}[],:\\\r\n\x00\xff\xef 0e-.')]) + data[at + 1 :]
    return data


# -- the checks -----------------------------------------------------------------------------


def chunk_sizes(rng: random.Random, data: bytes) -> list[int]:
    """One chunk, and either a chunk per line or a size that ends a chunk next to an
    interesting byte (or anywhere)."""
    interesting = [i for i, b in enumerate(data) if b in b'"\r\n\x00\xef\xff\\' or b >= 0x80]
    roll = rng.random()
    if roll < 0.3:
        small = 1 if len(data) < 2000 else 16  # (reads of one byte are slow)
    elif roll < 0.8 and interesting:
        small = max(1, rng.choice(interesting) + rng.choice([-1, 0, 1, 2]))
    else:
        small = rng.randint(2, max(2, len(data)))
    return [1 << 30, small]


def arrow_json(data: bytes, schema: pa.Schema | None) -> pa.Table | Exception:
    options = pajson.ParseOptions(explicit_schema=schema) if schema is not None else None
    try:
        table = pajson.read_json(pa.BufferReader(data), read_options=READ, parse_options=options)
        table.column_names  # noqa: B018 (keys that are not UTF-8: pyarrow cannot name them)
        return table
    except (*ARROW_ERRORS, UnicodeError) as exc:
        return exc


def model_read(chunks: list[bytes]) -> list[pa.Table]:
    """The tables the JSON Lines reader documents for these chunks, each parsed by Arrow
    with the types found in the chunks before it (the explicit schema grows by the fields
    each chunk adds, in their order). A later chunk keeps a leading byte order mark (Arrow
    must reject it, as in the whole file): a line break before it stops Arrow dropping it
    (or any of its bytes alone, which Arrow's JSON reader drops too)."""
    tables: list[pa.Table] = []
    schema: pa.Schema | None = None
    for index, chunk in enumerate(chunks):
        data = b"\n" + chunk if index and chunk[:1] in BOM_BYTES else chunk
        table = arrow_json(data, schema)
        if isinstance(table, Exception):
            raise table
        found = [
            f
            for f in table.schema
            if not pa.types.is_null(f.type)
            and (schema is None or schema.get_field_index(f.name) < 0)
        ]
        if found:
            schema = pa.schema([*(schema or []), *found])
        tables.append(table)
    return tables


def outcome(read):
    try:
        return read()
    except (*ARROW_ERRORS, ValueError, TypeError) as exc:
        return exc


def reader_read(data: bytes, size: int, native: bool) -> list[pa.Table]:
    """The tables the JSON datasource yields for ``data`` in chunks of ``size`` bytes."""
    saved_size, saved_jsonl = line_chunks_module.CHUNK_BYTES, json_lines_native._jsonl
    line_chunks_module.CHUNK_BYTES = size
    if not native:
        json_lines_native._jsonl = None
    try:
        source = JSONDatasource("fuzz.jsonl", lines=True)
        return list(source._read_stream(io.BytesIO(data), "fuzz.jsonl"))
    finally:
        line_chunks_module.CHUNK_BYTES, json_lines_native._jsonl = saved_size, saved_jsonl


def same_outcome(got, want, what: str) -> None:
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert type(got) is type(want), (what, got, want)
        return
    # no rows and no columns: nothing (Arrow's table of a chunk of blank lines)
    got = [t for t in got if t.num_rows or t.num_columns]
    want = [t for t in want if t.num_rows or t.num_columns]
    assert len(got) == len(want), (what, len(got), len(want))
    for mine, theirs in zip(got, want, strict=True):
        same_table(mine, theirs, what)


def same_table(got: pa.Table, want: pa.Table, what: str) -> None:
    """Equal schemas and columns (by position: pyarrow cannot name columns whose names are
    not UTF-8), doubles bit for bit."""
    assert got.schema == want.schema, (what, got.schema, want.schema)
    assert got.num_rows == want.num_rows, what
    positions = [str(i) for i in range(got.num_columns)]
    got, want = got.rename_columns(positions), want.rename_columns(positions)
    for name, (mine, theirs) in enumerate(zip(got.columns, want.columns, strict=True)):
        mine, theirs = mine.combine_chunks(), theirs.combine_chunks()
        assert mine.null_count == theirs.null_count, (what, name)
        if pa.types.is_floating(theirs.type):
            bits = [None if v is None else struct.pack("<d", v) for v in mine.to_pylist()]
            theirs_bits = [None if v is None else struct.pack("<d", v) for v in theirs.to_pylist()]
            assert bits == theirs_bits, (what, name, mine, theirs)
        else:
            assert mine.equals(theirs), (what, name, mine, theirs)
    try:
        want.validate(full=True)
    except pa.ArrowInvalid:
        return  # Arrow's JSON reader lets invalid UTF-8 into strings: the same table
    got.validate(full=True)


def check_chunks(chunks: list[bytes], rng: random.Random) -> None:
    """The C parser on every chunk, with the model's types and with types at random."""
    schema: pa.Schema | None = None
    choices = [pa.int64(), pa.float64(), pa.string(), pa.bool_()]
    for index, chunk in enumerate(chunks[:12]):
        got = json_lines_native.read_lines(pa.py_buffer(chunk), schema, _BLOCK_BYTES)
        want = arrow_json(chunk, schema)
        if index and chunk[:1] in BOM_BYTES:
            assert got is None  # the C parser declines it; Arrow would drop it
        else:
            check_same_as_arrow(got, want, chunk)
        if isinstance(want, Exception):
            return
        random_schema = pa.schema(
            [(name, rng.choice(choices)) for name in want.column_names if rng.random() < 0.5]
        )
        got = json_lines_native.read_lines(pa.py_buffer(chunk), random_schema, _BLOCK_BYTES)
        if not (index and chunk[:1] in BOM_BYTES):
            check_same_as_arrow(got, arrow_json(chunk, random_schema), chunk)
        found = [
            f
            for f in want.schema
            if not pa.types.is_null(f.type)
            and (schema is None or schema.get_field_index(f.name) < 0)
        ]
        if found:
            schema = pa.schema([*(schema or []), *found])


def check_file(data: bytes, rng: random.Random) -> None:
    for size in chunk_sizes(rng, data):
        chunks = [c.to_pybytes() for c in line_chunks(io.BytesIO(data), size)]
        assert b"".join(chunks) == data
        check_chunks(chunks, rng)
        with_c = outcome(lambda size=size: reader_read(data, size, True))
        same_outcome(outcome(lambda size=size: reader_read(data, size, False)), with_c, "C parser")
        model = outcome(lambda chunks=chunks: model_read(chunks))
        if isinstance(model, Exception) or not data.replace(BOM, b"").strip(b" \t\r\n"):
            continue  # the reader's fallback (Python's json), or nothing to read
        same_outcome(with_c, model, "model")
        whole = arrow_json(data, None)
        if not isinstance(whole, Exception) and model:
            if not whole.num_columns:  # objects without fields: rows of no column
                assert sum(t.num_rows for t in model) == whole.num_rows
                continue
            concatenated = pa.concat_tables(model, promote_options="default")
            same_table(concatenated, whole, "chunks against the whole file")


@pytest.mark.timeout(time_limit(CASES, 0.2))
@pytest.mark.parametrize("part", PARTS)
def test_fuzz_json_lines_reader_against_arrow(part):
    run_cases("json_lines", CASES, json_file, check_file, part=part)


def python_rows(data: bytes) -> list[dict] | None:
    """The rows of Python's json, line by line (None when it fails or finds no object)."""
    rows = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    for line in text.splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError:
                return None
            if not isinstance(row, dict):
                return None
            rows.append(row)
    return rows


def check_read_json(data: bytes, rng: random.Random, folder) -> None:
    """``sf.read_json`` in one chunk: Arrow's table for the whole file; where Arrow fails,
    an error naming the file, or the rows of Python's json, as the reader documents."""
    path = folder / f"case{rng.randrange(10**9)}.jsonl"
    path.write_bytes(data)
    try:
        want = arrow_json(data, None)
        try:
            got = sf.read_json(str(path), lines=True).to_arrow()
        except (*ARROW_ERRORS, ValueError, TypeError) as exc:
            assert path.name in str(exc), exc
            assert isinstance(want, Exception) or not want.num_rows, (exc, want)
            return
        if not isinstance(want, Exception):
            if want.num_rows == 0:
                assert got.num_rows == 0
                return
            same_table(got, want, "read_json")
            return
        # Arrow fails: the reader's fallback, Python's json (its rows; how values of mixed
        # types become columns is pyarrow's conversion of Python values, not checked here)
        rows = python_rows(data)
        assert rows is not None, ("Arrow and Python's json fail; shardflow read", got)
        assert got.num_rows == len(rows)
        assert sorted(got.column_names) == sorted({k for row in rows for k in row})
    finally:
        path.unlink()


@pytest.mark.timeout(time_limit(READ_CASES, 0.2))
def test_fuzz_read_json_against_arrow(tmp_path):
    run_cases(
        "read_json", READ_CASES, json_file, lambda data, rng: check_read_json(data, rng, tmp_path)
    )
