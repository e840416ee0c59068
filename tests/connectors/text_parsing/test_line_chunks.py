"""CSV and JSON Lines files read in chunks cut at line ends: chunk boundaries change nothing.

Files here span many chunks (the chunk size is made tiny); the oracle is pyarrow reading the
whole file in one call.
"""

from __future__ import annotations

import gzip
import io
import json
import random

import fsspec
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pytest

import shardflow as sf
from shardflow.connectors._text_parsing import line_chunks as line_chunks_module
from shardflow.connectors._text_parsing.line_chunks import line_chunks

ROWS = 300


@pytest.fixture
def tiny_chunks(monkeypatch):
    monkeypatch.setattr(line_chunks_module, "CHUNK_BYTES", 256)


def _csv_text(sep: str = "\n") -> str:
    lines = ["id,name,score"] + [f'{i},"n,{i % 7}",{i * 0.25}' for i in range(ROWS)]
    return sep.join(lines) + sep


@pytest.mark.parametrize("sep", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("size", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("read", [None, 1, 50, 333], ids=["read8MiB", "read1", "read50", "read333"])
def test_chunks_end_at_line_ends_and_lose_nothing(sep, size, read):
    rng = random.Random(size)
    lines = ["x" * rng.randint(0, 40) for _ in range(200)]
    lines[17] = "y" * 500  # longer than some chunks and reads
    data = sep.join(lines).encode()
    chunks = [c.to_pybytes() for c in line_chunks(io.BytesIO(data), size, read)]
    assert b"".join(chunks) == data
    for chunk in chunks[:-1]:
        assert chunk.endswith(sep[-1].encode())
        # a chunk is cut at the last line end that fits (one byte over, for a "\r\n"), or
        # after its one line
        if len(chunk) > size + 1:
            assert chunk.count(sep.encode()) == 1
    if size >= len(data):
        assert len(chunks) == 1


def test_chunks_of_a_file_without_readinto():
    class ReadOnly:
        def __init__(self, data):
            self._f = io.BytesIO(data)

        def read(self, n=-1):
            return self._f.read(n)

    data = b"a\nbb\nccc\n" * 50
    assert b"".join(c.to_pybytes() for c in line_chunks(ReadOnly(data), 10)) == data
    assert list(line_chunks(io.BytesIO(b""), 10)) == []


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_bytes"):
        list(line_chunks(io.BytesIO(b"a\n"), 0))


@pytest.mark.parametrize("sep", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_csv_across_chunks_equals_one_read(tmp_path, tiny_chunks, sep):
    path = tmp_path / "data.csv"
    path.write_bytes(_csv_text(sep).encode())
    got = sf.read_csv(str(path)).to_arrow()
    assert got.equals(pacsv.read_csv(str(path)))


@pytest.mark.parametrize("sep", ["\r", "\r\n", "\n"], ids=["cr", "crlf", "lf"])
@pytest.mark.parametrize("columns", [1, 2])
@pytest.mark.parametrize("size", [1, 5, 16, 64])
def test_csv_line_breaks_inside_quoted_values_across_chunks(
    tmp_path, monkeypatch, sep, columns, size
):
    """A chunk ends at a row's end, never at a line break inside a quoted value (with "\r"
    line ends, every quoted "\n" was taken for one and split its value in two)."""
    monkeypatch.setattr(line_chunks_module, "CHUNK_BYTES", size)
    rows = [f'"v{i}\n{i}\r\nz"' + (f",{i}" if columns == 2 else "") for i in range(40)]
    header = "a,b" if columns == 2 else "a"
    path = tmp_path / "quoted.csv"
    path.write_bytes((sep.join([header, *rows]) + sep).encode())
    got = sf.read_csv(str(path)).to_arrow()
    want = pacsv.read_csv(str(path))
    assert want.num_rows == 40
    assert got.equals(want)


@pytest.mark.parametrize("size", [1, 8, 20])
def test_csv_value_starting_with_a_byte_order_mark_at_a_chunk_start(tmp_path, monkeypatch, size):
    """Only the file's first bytes may be a byte order mark: a value that starts with U+FEFF
    at the start of a later chunk keeps it, as in Arrow's read of the whole file."""
    monkeypatch.setattr(line_chunks_module, "CHUNK_BYTES", size)
    path = tmp_path / "bom.csv"
    path.write_bytes(
        b"\xef\xbb\xbfa,b\n" + b"".join(b"\xef\xbb\xbfv%d,%d\n" % (i, i) for i in range(30))
    )
    got = sf.read_csv(str(path)).to_arrow()
    want = pacsv.read_csv(str(path))
    assert want.column_names == ["a", "b"]
    assert got.equals(want)
    assert got["a"].to_pylist() == [f"\ufeffv{i}" for i in range(30)]


def test_csv_columns_of_one_name_keep_their_own_types_across_chunks(tmp_path, tiny_chunks):
    """Types found in the first chunk are given to the later ones by column, not by name:
    two columns named "a" (int64 and double) were both read as double after the first."""
    path = tmp_path / "repeated.csv"
    path.write_text("a,a,b\n" + "".join(f"{i},{i}.5,x{i}\n" for i in range(300)))
    got = sf.read_csv(str(path)).to_arrow()
    want = pacsv.read_csv(str(path))
    assert want.schema.types == [pa.int64(), pa.float64(), pa.string()]
    assert got.equals(want)


def test_json_line_starting_with_a_byte_order_mark_at_a_chunk_start_is_an_error(
    tmp_path, monkeypatch
):
    """Arrow's read of the whole file fails at a line (not the first) that starts with a byte
    order mark; read in chunks, the mark at a chunk's start was dropped instead."""
    monkeypatch.setattr(line_chunks_module, "CHUNK_BYTES", 1)  # a chunk per line
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"".join(b'\xef\xbb\xbf{"a":%d}\n' % i for i in range(10)))
    with pytest.raises(pa.ArrowInvalid):
        pajson.read_json(str(path))
    with pytest.raises(ValueError, match="bom.jsonl"):
        sf.read_json(str(path)).to_arrow()


@pytest.mark.parametrize("start", [b"\xbf", b"\xef", b"\xbb\xbf", b"\xef\xbb"])
def test_json_line_starting_with_part_of_a_byte_order_mark_at_a_chunk_start_is_an_error(
    tmp_path, monkeypatch, start
):
    """Arrow's JSON reader drops some bytes of a byte order mark alone at the start of what
    it parses: a later chunk starting with one must keep it (and fail, as the whole file)."""
    monkeypatch.setattr(line_chunks_module, "CHUNK_BYTES", 1)  # a chunk per line
    path = tmp_path / "part.jsonl"
    path.write_bytes(b'{"a":0}\n' + start + b'{"a":1}\n')
    with pytest.raises(pa.ArrowInvalid):
        pajson.read_json(str(path))
    with pytest.raises(ValueError, match="part.jsonl"):
        sf.read_json(str(path), lines=True).to_arrow()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"convert_options": pacsv.ConvertOptions(include_columns=["score", "id"])},
        {"read_options": pacsv.ReadOptions(skip_rows=1, column_names=["a", "b", "c"])},
        {"read_options": pacsv.ReadOptions(autogenerate_column_names=True)},
        {"read_options": pacsv.ReadOptions(skip_rows_after_names=5)},
        {"convert_options": pacsv.ConvertOptions(column_types={"id": pa.float64()})},
    ],
    ids=["include_columns", "column_names", "autogenerate", "skip_after_names", "column_types"],
)
def test_csv_options_across_chunks(tmp_path, tiny_chunks, kwargs):
    path = tmp_path / "data.csv"
    path.write_bytes(_csv_text().encode())
    got = sf.read_csv(str(path), **kwargs).to_arrow()
    assert got.equals(pacsv.read_csv(str(path), **kwargs))


def test_csv_compressed_and_through_fsspec_across_chunks(tmp_path, tiny_chunks):
    text = _csv_text().encode()
    (tmp_path / "data.csv.gz").write_bytes(gzip.compress(text))
    expected = pacsv.read_csv(io.BytesIO(text))
    assert sf.read_csv(str(tmp_path / "data.csv.gz")).to_arrow().equals(expected)
    (tmp_path / "plain.csv").write_bytes(text)
    fs = fsspec.filesystem("file")
    assert sf.read_csv(str(tmp_path / "plain.csv"), filesystem=fs).to_arrow().equals(expected)


def test_csv_column_empty_in_the_first_chunk_is_typed_by_later_ones(tmp_path, tiny_chunks):
    # Arrow's streaming reader fails here (the column is typed null by its first block).
    path = tmp_path / "late.csv"
    path.write_text("id,note\n" + "".join(f"{i},\n" for i in range(200)) + "200,late\n")
    got = sf.read_csv(str(path)).to_arrow()
    assert got.num_rows == 201
    assert got.schema.field("note").type == pa.string()
    notes = got["note"].to_pylist()
    assert notes[-1] == "late"
    assert notes[0] is None  # the first chunk's values, typed null there
    assert set(notes[:-1]) <= {None, ""}  # later chunks keep empty strings, as Arrow does
    assert got["id"].to_pylist() == list(range(201))


def test_csv_value_that_does_not_fit_the_inferred_type_names_the_file(tmp_path, tiny_chunks):
    path = tmp_path / "bad.csv"
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(200)) + "oops\n")
    with pytest.raises(Exception, match="bad.csv") as info:
        sf.read_csv(str(path)).to_arrow()
    assert "oops" in str(info.value)


def test_json_lines_across_chunks_equals_one_read(tmp_path, tiny_chunks):
    rows = [{"id": i, "name": f"n{i % 5}", "score": i / 4} for i in range(ROWS)]
    rows[250]["extra"] = "late field"
    rows[10]["score"] = None
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = sf.read_json(str(path), lines=True).to_arrow()
    expected = pajson.read_json(str(path))
    assert got.num_rows == ROWS
    assert sorted(got.column_names) == sorted(expected.column_names)
    assert got.select(expected.column_names).to_pylist() == expected.to_pylist()


def test_json_field_null_in_the_first_chunk_is_typed_by_later_ones(tmp_path, tiny_chunks):
    rows = [{"id": i, "v": None} for i in range(100)] + [{"id": 100, "v": 2.5}]
    path = tmp_path / "late.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = sf.read_json(str(path), lines=True).to_arrow()
    assert got.schema.field("v").type == pa.float64()
    assert got["v"].to_pylist() == [None] * 100 + [2.5]
