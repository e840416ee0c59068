"""Parquet reads through shardflow's page decoder (connectors/parquet/page_decoding.py):
the tables and errors are Arrow's, the decoder only decodes the columns it handles."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.connectors.parquet import page_decoding
from shardflow.connectors.parquet.reading import open_parquet_fragment, read_parquet_fragment

pytestmark = pytest.mark.skipif(
    not page_decoding.available(),
    reason="the compiled module (connectors/parquet/_parquet_decode.c) or cramjam is missing",
)

N = 3000


def mixed_table() -> pa.Table:
    rng = np.random.default_rng(5)
    values = rng.random(N)
    return pa.table(
        {
            "s": pa.array([f"s{i % 13}" for i in range(N)]),
            "i": pa.array(rng.integers(-5, 5, N), mask=rng.random(N) < 0.1),
            "v": pa.array(values, pa.float64()),
            "l": pa.array([[i, i + 1] for i in range(N)], pa.list_(pa.int32())),
            "d": pa.array(rng.integers(0, 20000, N).astype(np.int32)).view(pa.date32()),
            "b": pa.array(rng.integers(0, 100, N).astype(np.int8)),
            "t": pa.array(rng.integers(0, 10**12, N), pa.timestamp("ms")),
            "f": pa.array(rng.random(N).astype(np.float32)),
        },
        metadata={b"origin": b"test"},
    ).cast(
        pa.schema(
            [
                pa.field("s", pa.string()),
                pa.field("i", pa.int64()),
                pa.field("v", pa.float64(), nullable=False),
                pa.field("l", pa.list_(pa.int32())),
                pa.field("d", pa.date32()),
                pa.field("b", pa.int8()),
                pa.field("t", pa.timestamp("ms")),
                pa.field("f", pa.float32()),
            ],
            metadata={b"origin": b"test"},
        )
    )


@pytest.fixture
def mixed_file(tmp_path):
    table = mixed_table()
    path = str(tmp_path / "mixed.parquet")
    pq.write_table(table, path, row_group_size=1000, data_page_size=4096)
    return path, table


@pytest.fixture
def decoded_columns(monkeypatch):
    """The names of the columns the page decoder decoded, per call."""
    seen: list[str] = []
    original = page_decoding.decode_column_chunk

    def spy(source, metadata, row_group, column, arrow_type, dictionary=False):
        array = original(source, metadata, row_group, column, arrow_type, dictionary)
        if array is not None:
            seen.append(metadata.schema.column(column).name)
        return array

    monkeypatch.setattr(page_decoding, "decode_column_chunk", spy)
    return seen


def _read(path, **kwargs) -> pa.Table:
    return pa.concat_tables(read_parquet_fragment(open_parquet_fragment(path), **kwargs))


@pytest.mark.parametrize("columns", [None, ["v", "s", "i"], ["f", "d"], ["l", "t", "b", "v"]])
def test_reads_equal_arrows_with_the_decoded_columns_in_place(mixed_file, decoded_columns, columns):
    path, table = mixed_file
    got = _read(path, columns=columns)
    want = pq.read_table(path, columns=columns)
    assert got.schema == want.schema and got.schema.metadata == want.schema.metadata
    assert got.equals(want)
    # "s" (dictionary-encoded strings) as a dictionary, expanded after; the others (lists,
    # int8, timestamps) are Arrow's
    handled = {"i", "v", "d", "f", "s"} & set(columns or table.column_names)
    assert set(decoded_columns) == handled
    assert len(decoded_columns) == 3 * len(handled)  # every row group


def test_the_environment_turns_the_decoder_off(mixed_file, decoded_columns, monkeypatch):
    path, _ = mixed_file
    monkeypatch.setenv(page_decoding.ENV_SWITCH, "0")
    assert _read(path).equals(pq.read_table(path))
    assert decoded_columns == []


def test_other_codecs_and_encodings_are_arrows(tmp_path, decoded_columns):
    table = pa.table({"x": np.arange(500, dtype=np.int64), "y": np.linspace(0, 1, 500)})
    path = str(tmp_path / "z.parquet")
    pq.write_table(table, path, compression={"x": "zstd", "y": "snappy"}, use_dictionary=False,
                   column_encoding={"x": "PLAIN", "y": "BYTE_STREAM_SPLIT"})  # fmt: skip
    assert _read(path).equals(table)
    assert decoded_columns == []


def _dictionary_index_out_of_range(path: str) -> None:
    """Overwrites the dictionary indices of the file's data page with all ones (indices past
    a dictionary of 3 values)."""
    metadata = pq.ParquetFile(path).metadata
    chunk = metadata.row_group(0).column(0)
    data = bytearray(open(path, "rb").read())
    start = chunk.data_page_offset
    from shardflow.connectors.parquet import _parquet_decode

    header = _parquet_decode.page_header(bytes(data), start)
    body = start + header[0]
    # [4-byte levels length][levels][bit width][runs]: a bit-packed run of 1s after the width
    levels = int.from_bytes(data[body : body + 4], "little")
    values = body + 4 + levels
    width = data[values]
    end = body + header[3]
    data[values + 1] = 0x03  # one bit-packed group of 8
    data[values + 2 : min(end, values + 2 + width)] = b"\xff" * (
        min(end, values + 2 + width) - values - 2
    )
    open(path, "wb").write(bytes(data))


def test_a_corrupt_chunk_fails_as_arrow_fails_naming_the_file(tmp_path, decoded_columns):
    path = str(tmp_path / "bad.parquet")
    pq.write_table(pa.table({"x": [1.5, 2.5, 3.5] * 4}), path, compression="none")
    _dictionary_index_out_of_range(path)
    with pytest.raises(Exception) as arrow_error:
        pq.read_table(path)
    with pytest.raises(Exception, match="bad.parquet") as error:
        sf.read_parquet(path).to_arrow()
    assert str(arrow_error.value) in str(error.value)
    assert decoded_columns == []  # declined


def test_datasets_on_both_backends(tmp_path, backend):
    rng = np.random.default_rng(3)
    tables = []
    for i in range(3):
        table = pa.table(
            {
                "g": pa.array(rng.integers(0, 4, 800), mask=rng.random(800) < 0.2),
                "v": rng.random(800),
                "s": [f"k{j % 5}" for j in range(800)],
            }
        )
        pq.write_table(table, str(tmp_path / f"part-{i}.parquet"), row_group_size=300)
        tables.append(table)
    got = sf.read_parquet(str(tmp_path)).to_arrow()
    assert got.equals(pa.concat_tables(tables))
    by_group = sf.read_parquet(str(tmp_path)).groupby("g").sum("v").to_pandas()
    want = pa.concat_tables(tables).to_pandas().groupby("g", dropna=False)["v"].sum()
    assert by_group["sum(v)"].tolist() == pytest.approx(want.tolist())
