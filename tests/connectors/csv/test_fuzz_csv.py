"""Differential fuzzing of ``read_csv``: shardflow's C parser and chunking against Arrow.

Generated files (quotes, embedded CR/LF, byte order marks, long fields, 1e309, denormals,
19+ digit integers, leading zeros, -0.0, invalid UTF-8, NUL bytes, ragged rows) go through:

* the row-end lexer that cuts chunks (C and pure Python) against a reference lexer written
  here, byte by byte, from Arrow's parsing rules;
* the CSV reader of one file, chunked at every row end, at sizes that put chunk ends next to
  the interesting bytes, and in one chunk; with the C parser and without (Arrow parses every
  chunk), against a model built of ``pyarrow.csv.read_csv`` calls, one per chunk, with the
  options the reader documents (the first chunk's header and inferred types pinned for the
  later ones). Tables must be equal (types, values, nulls, doubles bit for bit) or both
  sides raise the same type of error. Read in one chunk, the model is Arrow's read of the
  whole file; read in several with every type settled by the first, it must equal it too;
* ``sf.read_csv`` itself for a share of the cases: Arrow's table for the whole file, or an
  error of the same type naming the file;
* the C parser on each chunk with column types given at random, against Arrow.

Cases are seeded (see fuzz_runner.py): ``SHARDFLOW_FUZZ_CASES=200000`` for a long run.
"""

from __future__ import annotations

import io
import random
import struct

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from fuzz_runner import PARTS, run_cases, time_limit
from table_oracle import check_same_as_arrow

import shardflow as sf
from shardflow.connectors._text_parsing import line_chunks as line_chunks_module
from shardflow.connectors._text_parsing.line_chunks import line_chunks
from shardflow.connectors.csv import CSVDatasource
from shardflow.connectors.csv import native as csv_native
from shardflow.connectors.csv import rows as csv_rows

pytestmark = pytest.mark.skipif(
    not csv_native.available(), reason="the C parser (connectors/csv/_csv.c) is not built"
)

# cases of the default run: files through the reader; files through sf.read_csv
CASES, READ_CASES = 1500, 300
BOM = b"\xef\xbb\xbf"
# pyarrow raises UnicodeDecodeError for a column name that is not UTF-8
ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeError)
NULL_WORDS = [w.encode() for w in pacsv.ConvertOptions().null_values]
SERIAL = pacsv.ReadOptions(use_threads=False)  # faster for small inputs, the same tables

# -- the reference lexer --------------------------------------------------------------------


def reference_row_ends(data: bytes, dialect: tuple) -> list[int]:
    """The index of the last byte of every row of ``data``, lexed one byte at a time by
    Arrow's rules: a quote opens a quoted value at a field's start only; in one, a doubled
    quote (double_quote) is a quote and a single one closes it, the field going on unquoted;
    an escape character takes the next byte; "\\n", "\\r" and "\\r\\n" end a row."""
    delimiter, quote, double_quote, escape = dialect
    ends: list[int] = []
    state, i, n = "start", 0, len(data)
    while i < n:
        c = data[i]
        if state == "quoted":
            if c == escape:
                i += 2
            elif c == quote and double_quote and i + 1 < n and data[i + 1] == quote:
                i += 2
            else:
                state = "field" if c == quote else "quoted"
                i += 1
            continue
        if c == escape:
            state, i = "field", i + 2
        elif state == "start" and c == quote:
            state, i = "quoted", i + 1
        elif c == delimiter:
            state, i = "start", i + 1
        elif c == 0x0A or c == 0x0D:
            end = i + 1 if c == 0x0D and i + 1 < n and data[i + 1] == 0x0A else i
            ends.append(end)
            state, i = "start", end + 1
        else:
            state, i = "field", i + 1
    return ends


# -- generated files ------------------------------------------------------------------------


def _digits(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(rng.randint(low, high)))


def _double_text(rng: random.Random) -> str:
    value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    return repr(value) if value == value and abs(value) != float("inf") else "1.5"


def number_text(rng: random.Random) -> str:
    sign = rng.choice(["", "", "-"])
    pick = rng.randrange(14)
    if pick == 0:
        return str(rng.randint(-999, 999))
    if pick == 1:
        return rng.choice(
            ["9223372036854775807", "-9223372036854775808", "9223372036854775808"]
            + ["-9223372036854775809", "18446744073709551616", "0", "-0", "00", "-00"]
        )
    if pick == 2:  # 19 digits and more
        return sign + rng.choice("123456789") + _digits(rng, 18, 30)
    if pick == 3:  # leading zeros
        return sign + "0" * rng.randint(1, 25) + _digits(rng, 1, 20)
    if pick == 4:
        return _double_text(rng)
    if pick == 5:  # denormals and the ends of the double range
        return sign + rng.choice(
            ["5e-324", "4.9406564584124654e-324", "2.4703282292062328e-324", "2.47e-324"]
            + ["2.2250738585072011e-308", "2.2250738585072014e-308", "1e-320", "1e-400"]
            + ["1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308"]
            + ["1e308", "1e309", "1E309", "0e309", "0e-999", "1e+308", "9e307"]
        )
    if pick == 6:  # zeros after the point
        return sign + "0." + "0" * rng.randint(0, 45) + _digits(rng, 1, 25)
    if pick == 7:
        return rng.choice(["-0.0", "0.0", "-0", "0.000", "-0e0", "0e5", "-0.0e-5", "0.0e0"])
    if pick == 8:  # many digits on both sides
        return sign + _digits(rng, 1, 40) + "." + _digits(rng, 1, 40)
    if pick == 9:
        exponent = rng.choice(["e", "E"]) + rng.choice(["", "+", "-"]) + _digits(rng, 1, 3)
        return sign + _digits(rng, 1, 20) + rng.choice(["", "." + _digits(rng, 1, 8)]) + exponent
    if pick == 10:  # what Arrow reads otherwise, or not as a number
        return rng.choice(
            ["+1", " 2", "2 ", ".5", "1.", "-.5", "1e", "1e+", "0x10", "1_000", "inf", "-inf"]
            + ["Infinity", "-Infinity", "NaN", "nan", "1d", "\uff11", "1e5.5", "--1", "1-"]
        )
    if pick == 11:
        return f"{rng.random() * 10 ** rng.randint(-5, 20):.{rng.randint(0, 20)}f}"
    if pick == 12:
        return str(rng.randint(-(2**63), 2**63 - 1))
    return sign + _digits(rng, 1, 17)


STRANGE_TEXT = [
    b",",
    b'"',
    b"\r",
    b"\n",
    b"\r\n",
    b"\t",
    b" ",
    b"\x00",
    BOM,
    "é".encode(),
    "漢".encode(),
    "😀".encode(),
    b"\xff",
    b"\xc3",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\\",
    b"'",
    b";",
]
WORDS = [b"true", b"false", b"True", b"FALSE", b"1", b"0", b"2024-01-02", b"10:11:12"]
WORDS += [b"2024-01-02 10:11:12", b"2024-01-02T10:11:12Z", b"2024-01-02 10:11:12.123456789"]


def text_value(rng: random.Random, hostile: bool) -> bytes:
    pick = rng.randrange(8 if hostile else 6)
    if pick == 0:
        return rng.choice(NULL_WORDS)
    if pick == 1:
        return rng.choice(WORDS)
    if pick == 2:  # long: across many chunk ends
        return rng.choice([b"x", b"ab ", "é".encode()]) * rng.randint(50, 1000)
    if pick in (3, 4):
        parts = [rng.choice([b"a", b"bc", b"word", b"x y"]) for _ in range(rng.randint(1, 4))]
        return b"".join(parts)
    if pick == 5:  # valid UTF-8, and what needs quotes
        parts = [b"w", "é".encode(), "漢字".encode(), "😀".encode(), b",", b'"', b"\n", b"\r\n"]
        return b"".join(rng.choice(parts) for _ in range(rng.randint(1, 5)))
    return b"".join(
        rng.choice(STRANGE_TEXT) if rng.random() < 0.5 else rng.choice([b"a", b"z", b"7"])
        for _ in range(rng.randint(1, 6))
    )


def cell(rng: random.Random, flavor: str, hostile: bool) -> bytes:
    if rng.random() < (0.1 if hostile else 0.02):
        flavor = rng.choice(["int", "float", "text", "null"])
    if flavor == "int":
        value = str(rng.randint(-(10**6), 10**6)).encode()
        if rng.random() < 0.3:
            value = number_text(rng).encode()
    elif flavor == "float":
        value = number_text(rng).encode()
    elif flavor == "null":
        value = rng.choice(NULL_WORDS)
    else:
        value = text_value(rng, hostile)
    return value


def quoted(rng: random.Random, value: bytes, hostile: bool) -> bytes:
    """``value`` as a field: quoted when it must be (mostly), sometimes anyway, sometimes
    damaged (unterminated, text after the closing quote, a lone quote inside)."""
    needs = any(ch in value for ch in (b",", b'"', b"\r", b"\n")) or value[:1] == b'"'
    roll = rng.random() if hostile else 0.07 + rng.random() * 0.93
    if roll < 0.03:
        return b'"' + value  # unterminated
    if roll < 0.05:
        return b'"' + value.replace(b'"', b'""') + b'"' + rng.choice([b"x", b'"', b" "])
    if roll < 0.07:
        return value + b'"' + value
    if needs and roll < 0.95 or roll < 0.25:
        return b'"' + value.replace(b'"', b'""') + b'"'
    return value


def csv_file(rng: random.Random) -> bytes:
    """A CSV file: a header, rows of cells of one flavor per column (with strays), line
    breaks of one kind or mixed, empty lines, a byte order mark, ragged rows, sometimes."""
    hostile = rng.random() < 0.5  # else the files the C parser reads: fewer strays
    ncols = rng.choice([1, 1, 2, 3, 4, 6])
    flavors = [rng.choice(["int", "float", "text", "null", "mixed"]) for _ in range(ncols)]
    names = [f"c{i}".encode() for i in range(ncols)]
    if hostile and rng.random() < 0.2:
        names[rng.randrange(ncols)] = rng.choice(
            [b"", b"c0", b'"a,b"', b"\xff", BOM + b"x", b"1", b'"q""q"', "é".encode()]
        )
    breaks = rng.choice([[b"\n"], [b"\r\n"]])
    if hostile:
        breaks = rng.choice([breaks, [b"\r"], [b"\n", b"\r\n", b"\r"]])
    lines = [b",".join(names)]
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4, 6, 9, 14, 30])):
        width = ncols
        if hostile and rng.random() < 0.05:
            width = max(0, ncols + rng.choice([-1, 1, 2]))
        row = []
        for c in range(width):
            flavor = flavors[c % ncols]
            if flavor == "mixed":
                flavor = rng.choice(["int", "float", "text", "null"])
            row.append(quoted(rng, cell(rng, flavor, hostile), hostile))
        lines.append(b",".join(row))
        if rng.random() < 0.05:
            lines.append(rng.choice([b"", b"", b" ", b"\t"]))
    data = b""
    for line in lines:
        data += line + rng.choice(breaks)
    if rng.random() < 0.2:
        data = data[: -len(breaks[0])] if data.endswith(breaks[0]) else data
    if not hostile:
        return data
    if rng.random() < 0.2:
        data = BOM + data
    if rng.random() < 0.1:
        data = b"\n" * rng.randint(1, 2) + data
    if rng.random() < 0.1 and data:  # one byte changed
        at = rng.randrange(len(data))
        data = data[:at] + bytes([rng.choice(b'",\r\n\x00\xff\xef a0.-')]) + data[at + 1 :]
    return data


DIALECTS = [
    # (ParseOptions arguments, (delimiter, quote, double_quote, escape) as bytes for the lexer)
    ({}, (0x2C, 0x22, True, None)),
    ({"delimiter": ";"}, (0x3B, 0x22, True, None)),
    ({"quote_char": "'"}, (0x2C, 0x27, True, None)),
    ({"quote_char": False}, (0x2C, None, True, None)),
    ({"double_quote": False}, (0x2C, 0x22, False, None)),
    ({"escape_char": "\\"}, (0x2C, 0x22, True, 0x5C)),
    ({"escape_char": "\\", "double_quote": False}, (0x2C, 0x22, False, 0x5C)),
    ({"delimiter": "\t", "escape_char": "^"}, (0x09, 0x22, True, 0x5E)),
]


def generate(rng: random.Random) -> tuple[bytes, int]:
    dialect = 0 if rng.random() < 0.8 else rng.randrange(1, len(DIALECTS))
    return csv_file(rng), dialect


# -- the checks -----------------------------------------------------------------------------


def chunk_sizes(rng: random.Random, data: bytes) -> list[int]:
    """One chunk, and either a chunk per row or a size that ends a chunk next to an
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


def check_row_ends(
    data: bytes, dialect: tuple, parse_options: pacsv.ParseOptions, rng: random.Random
) -> None:
    """The chunk cutter's row ends, by the C lexer and without it, are the reference
    lexer's, from the file's start and from later rows' starts, at every stop (or a
    sample of them in a long file)."""
    ends = reference_row_ends(data, dialect)
    cutter = csv_rows.CsvRowEnds(parse_options)
    view = memoryview(data)
    starts = [0] + [e + 1 for e in ends if e + 1 < len(data)]
    for start in {0, *rng.sample(starts, min(2, len(starts)))}:
        window = view[start:]
        own = [e - start for e in ends if e >= start]
        stops = range(len(window) + 1)
        if len(window) > 120:
            stops = sorted({len(window), *rng.sample(range(len(window)), 40)})
        for compiled in (True, False):
            saved = csv_rows._csv
            if not compiled:  # the regular expressions: slower, a few stops
                csv_rows._csv = None
                stops = sorted(rng.sample(stops, min(len(stops), 8)))
            try:
                for stop in stops:
                    want = max(
                        (e for e in own if e < stop - 1 or (e == stop - 1 and window[e] == 0x0A)),
                        default=-1,
                    )
                    got = cutter.last(window, stop)
                    assert got == want, ("last", compiled, start, stop, got, want)
                for first in stops[:: max(1, len(stops) // 10)]:
                    want = min((e for e in own if e >= first), default=-1)
                    got = cutter.first(window, first)
                    assert got == want, ("first", compiled, start, first, got, want)
            finally:
                csv_rows._csv = saved


def model_read(chunks: list[bytes], parse_options: pacsv.ParseOptions) -> list[pa.Table]:
    """The tables the CSV reader documents for these chunks, each parsed by Arrow: the first
    with a header and inferred types; later ones with its names and the types found so far
    (column by column: names may repeat);
    a chunk Arrow finds empty yields nothing. A later chunk keeps a leading byte order mark
    (as part of its first value): an empty line before it stops Arrow from dropping it."""
    tables: list[pa.Table] = []
    names: list[str] | None = None
    pinned: dict[str, pa.DataType] = {}  # by position, as "0", "1", ...
    for chunk in chunks:
        try:
            if names is None:
                table = pacsv.read_csv(
                    pa.BufferReader(chunk), read_options=SERIAL, parse_options=parse_options
                )
                names = table.column_names
            else:
                table = pacsv.read_csv(
                    pa.BufferReader(b"\n" + chunk if chunk.startswith(BOM) else chunk),
                    read_options=pacsv.ReadOptions(
                        column_names=[str(i) for i in range(len(names))]
                    ),
                    parse_options=parse_options,
                    convert_options=pacsv.ConvertOptions(column_types=dict(pinned)),
                ).rename_columns(names)
        except pa.ArrowInvalid as exc:
            if "Empty CSV file" in str(exc):
                continue
            raise
        for position, field in enumerate(table.schema):
            if str(position) not in pinned and not pa.types.is_null(field.type):
                pinned[str(position)] = field.type
        tables.append(table)
    return tables


def outcome(read) -> list[pa.Table] | Exception:
    """The tables ``read()`` returns, or the error it raises. A column name that is not
    UTF-8 counts as an error: Arrow returns such a table, but pyarrow cannot name its
    columns (``column_names`` raises UnicodeDecodeError), and the reader raises that."""
    try:
        tables = read()
        for table in tables:
            table.column_names  # noqa: B018
        return tables
    except ARROW_ERRORS as exc:
        return exc


def reader_read(data: bytes, size: int, parse_options, native: bool) -> list[pa.Table]:
    """The tables the CSV datasource yields for ``data`` in chunks of ``size`` bytes."""
    saved_size, saved_csv = line_chunks_module.CHUNK_BYTES, csv_native._csv
    line_chunks_module.CHUNK_BYTES = size
    if not native:
        csv_native._csv = None
    try:
        kwargs = {"parse_options": parse_options} if parse_options is not None else {}
        source = CSVDatasource("fuzz.csv", **kwargs)
        return list(source._read_stream(io.BytesIO(data), "fuzz.csv"))
    finally:
        line_chunks_module.CHUNK_BYTES, csv_native._csv = saved_size, saved_csv


def error_kind(exc: Exception) -> type:
    """The kind of error: the first of ARROW_ERRORS ``exc`` is one of."""
    return next(kind for kind in ARROW_ERRORS if isinstance(exc, kind))


def same_outcome(got, want, what: str) -> None:
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert isinstance(got, Exception) and isinstance(want, Exception), (what, got, want)
        assert error_kind(got) is error_kind(want), (what, got, want)
        return
    assert len(got) == len(want), (what, len(got), len(want))
    for mine, theirs in zip(got, want, strict=True):
        same_table(mine, theirs, what)


def same_table(got: pa.Table, want: pa.Table, what: str) -> None:
    """Equal schemas and columns (by position: names may repeat), doubles bit for bit."""
    assert got.schema == want.schema, (what, got.schema, want.schema)
    assert got.num_rows == want.num_rows, what
    for index, (mine, theirs) in enumerate(zip(got.columns, want.columns, strict=True)):
        mine, theirs = mine.combine_chunks(), theirs.combine_chunks()
        assert mine.null_count == theirs.null_count, (what, index)
        if pa.types.is_floating(theirs.type):
            assert float_bits(mine) == float_bits(theirs), (what, index, mine, theirs)
        else:
            assert mine.equals(theirs), (what, index, mine, theirs)
    got.validate(full=True)


def float_bits(array: pa.Array) -> list:
    return [None if v is None else struct.pack("<d", v) for v in array.to_pylist()]


def check_file(case: tuple[bytes, int], rng: random.Random) -> None:
    data, dialect_index = case
    arguments, dialect = DIALECTS[dialect_index]
    parse_options = pacsv.ParseOptions(**arguments)
    check_row_ends(data, dialect, parse_options, rng)
    row_ends = csv_rows.CsvRowEnds(parse_options)
    reference = set(reference_row_ends(data, dialect))
    given = parse_options if arguments else None
    for size in chunk_sizes(rng, data):
        chunks = [c.to_pybytes() for c in line_chunks(io.BytesIO(data), size, row_ends=row_ends)]
        assert b"".join(chunks) == data
        offset = 0
        for chunk in chunks[:-1]:
            offset += len(chunk)
            assert offset - 1 in reference, ("a chunk ends inside a row", offset)
        want = outcome(lambda chunks=chunks: model_read(chunks, parse_options))
        for native in (True, False) if len(chunks) > 1 else (True,):
            got = outcome(lambda size=size, native=native: reader_read(data, size, given, native))
            same_outcome(got, want, "C parser" if native else "Arrow")
        if isinstance(want, list) and len(chunks) > 1 and want and want[0].num_rows:
            settled = not any(pa.types.is_null(t) for t in want[0].schema.types)
            whole = outcome(
                lambda: [pacsv.read_csv(pa.BufferReader(data), parse_options=parse_options)]
            )
            if settled and isinstance(whole, list):
                same_table(pa.concat_tables(want), whole[0], "chunks against the whole file")
        if given is None and len(chunks) > 1:
            check_chunks_with_given_types(chunks, want, rng)


def check_chunks_with_given_types(chunks: list[bytes], want, rng: random.Random) -> None:
    """The C parser on every chunk (also those the reader sent to Arrow once the C parser
    declined one before): the first with its header, the later ones with the first's names
    and types given at random, against Arrow."""
    first = chunks[0]
    check_same_as_arrow(csv_native.read_chunk(pa.py_buffer(first)), arrow_csv(first), first)
    if not isinstance(want, list) or not want:
        return
    names = want[0].column_names
    if len(set(names)) < len(names):
        return  # types are given by name
    choices = [None, pa.int64(), pa.float64(), pa.string()]
    for chunk in chunks[1:5]:
        types = {n: t for n in names if (t := rng.choice(choices)) is not None}
        got = csv_native.read_chunk(pa.py_buffer(chunk), names, types)
        check_same_as_arrow(got, arrow_csv(chunk, names, types), chunk)


def arrow_csv(data: bytes, names=None, types=None) -> pa.Table | Exception:
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(use_threads=False, column_names=names),
            convert_options=pacsv.ConvertOptions(column_types=types or {}),
        )
        table.column_names  # noqa: B018 (raises for names that are not UTF-8)
        return table
    except ARROW_ERRORS as exc:
        return exc


@pytest.mark.timeout(time_limit(CASES, 0.2))
@pytest.mark.parametrize("part", PARTS)
def test_fuzz_csv_reader_against_arrow(part):
    run_cases("csv", CASES, generate, check_file, part=part)


def check_read_csv(case: tuple[bytes, int], rng: random.Random, folder) -> None:
    """``sf.read_csv`` in one chunk: Arrow's table for the whole file, or an error of the
    same type naming the file (no rows where Arrow finds the file empty, as in Ray Data)."""
    data, _ = case
    path = folder / f"case{rng.randrange(10**9)}.csv"
    path.write_bytes(data)
    try:
        want = outcome(lambda: [pacsv.read_csv(pa.BufferReader(data))])
        try:
            got = outcome(lambda: [sf.read_csv(str(path)).to_arrow()])
            if isinstance(got, Exception):
                raise got
        except ARROW_ERRORS as exc:
            assert isinstance(want, Exception), (exc, want)
            assert error_kind(exc) is error_kind(want), (exc, want)
            assert path.name in str(exc), exc
            return
        if isinstance(want, Exception):
            # Arrow finds no header (an empty file, or one line without its line break):
            # no rows, as Ray Data reads it
            assert "Empty CSV file" in str(want), want
            assert got[0].num_rows == 0
            return
        if want[0].num_rows == 0:  # no rows: a table without rows, of either schema
            assert got[0].num_rows == 0
            return
        same_table(got[0], want[0], "read_csv")
    finally:
        path.unlink()


@pytest.mark.timeout(time_limit(READ_CASES, 0.2))
def test_fuzz_read_csv_against_arrow(tmp_path):
    run_cases(
        "read_csv", READ_CASES, generate, lambda case, rng: check_read_csv(case, rng, tmp_path)
    )
