"""shardflow's Parquet writer of flat columns (connectors/parquet/flat_writer.py). The oracle
is Arrow: its reader reads our files back into the table written, and a file Arrow's writer
writes of the same table with the same options has the same Parquet schema, key-value
metadata and column statistics."""

from __future__ import annotations

import io
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardflow.connectors.parquet import flat_writer as parquet_flat_writer
from shardflow.connectors.parquet.flat_writer import FlatParquetWriter, handles
from shardflow.connectors.parquet.thrift_compact import I32, LIST, STRUCT, list_of, struct

needs_module = pytest.mark.skipif(
    parquet_flat_writer._parquet_encode is None,
    reason="the compiled module (connectors/parquet/_parquet_encode.c) is not built",
)
pytestmark = needs_module

TYPES = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "uint8": (pa.uint8(), st.integers(0, 255)),
    "uint16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1) | st.integers(0, 5)),
    "float32": (pa.float32(), st.floats(width=32) | st.sampled_from([0.0, -0.0, 1.5])),
    "float64": (pa.float64(), st.floats() | st.sampled_from([0.0, -0.0, 2.5])),
    "date32": (pa.date32(), st.integers(-100_000, 100_000)),
    "ts_ms": (pa.timestamp("ms"), st.integers(-(2**45), 2**45)),
    "ts_us_utc": (pa.timestamp("us", "UTC"), st.integers(-(2**55), 2**55)),
    "ts_ns_tz": (pa.timestamp("ns", "Europe/Paris"), st.integers(-(2**62), 2**62)),
    "string": (pa.string(), st.text(max_size=12) | st.sampled_from(["a", "b", "é"])),
    "large_string": (pa.large_string(), st.text(max_size=5)),
    "binary": (pa.binary(), st.binary(max_size=10) | st.sampled_from([b"", b"\xff", b"\x00"])),
    "large_binary": (pa.large_binary(), st.binary(max_size=4)),
}


def _write_ours(table: pa.Table, **options) -> bytes:
    f = io.BytesIO()
    row_group_size = options.pop("row_group_size", None)
    writer = FlatParquetWriter(f, table.schema, **options)
    writer.write_table(table, row_group_size=row_group_size)
    writer.close()
    return f.getvalue()


def _write_arrows(table: pa.Table, **options) -> bytes:
    f = io.BytesIO()
    pq.write_table(table, f, **options)
    return f.getvalue()


def _column(kind: pa.DataType, values: list) -> pa.Array:
    if pa.types.is_date(kind) or pa.types.is_timestamp(kind):
        storage = pa.int32() if pa.types.is_date(kind) else pa.int64()
        return pa.array(values, storage).view(kind)
    return pa.array(values, kind)


def _same_floats(a: pa.Table, b: pa.Table) -> bool:
    """Table equality where NaN equals NaN and -0.0 differs from 0.0 (bit patterns)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for left, right in zip(a.columns, b.columns, strict=True):
        if pa.types.is_floating(left.type):
            x, y = left.to_pylist(), right.to_pylist()
            for p, q in zip(x, y, strict=True):
                if (p is None) != (q is None):
                    return False
                if p is not None and np.array(p).tobytes() != np.array(q).tobytes():
                    if not (math.isnan(p) and math.isnan(q)):
                        return False
        elif not left.equals(right):
            return False
    return True


def _statistics(data: bytes) -> list:
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    found = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            stats = group.column(c).statistics
            if stats is None:  # a column chunk of no values
                found.append(None)
                continue
            entry = (stats.null_count, stats.has_min_max)
            if stats.has_min_max:
                low, high = stats.min, stats.max
                entry += (repr(low), repr(high))
            found.append(entry)
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(TYPES)),
    data=st.data(),
    nullable=st.booleans(),
    dictionary=st.booleans(),
    codec=st.sampled_from(["snappy", "none", "zstd", "gzip"]),
    start=st.integers(0, 9),
    row_group_size=st.sampled_from([None, 1, 7, 64]),
)
def test_round_trip_schema_and_statistics_match_arrows_writer(
    name, data, nullable, dictionary, codec, start, row_group_size
):
    kind, values = TYPES[name]
    rows = data.draw(st.lists(values | st.none() if nullable else values, max_size=150))
    column = _column(kind, rows).slice(min(start, len(rows)))
    schema = pa.schema([pa.field("v", kind, nullable=nullable), pa.field("i", pa.int64())])
    table = pa.table([column, pa.array(range(len(column)))], schema=schema)
    options = {"use_dictionary": dictionary, "compression": codec}
    ours = _write_ours(table, row_group_size=row_group_size, **options)
    arrows = _write_arrows(table, row_group_size=row_group_size, **options)

    back = pq.read_table(io.BytesIO(ours))
    assert _same_floats(back, table)
    ours_file, arrows_file = pq.ParquetFile(io.BytesIO(ours)), pq.ParquetFile(io.BytesIO(arrows))
    assert ours_file.schema.equals(arrows_file.schema)
    assert ours_file.metadata.metadata == arrows_file.metadata.metadata
    assert ours_file.metadata.num_rows == table.num_rows
    assert ours_file.metadata.num_row_groups == arrows_file.metadata.num_row_groups
    assert _statistics(ours) == _statistics(arrows)


def test_dictionary_and_plain_pages_read_back_with_nulls_across_row_groups():
    rng = np.random.default_rng(0)
    n = 300_000
    words = np.array([f"word-{i}" for i in range(500)], dtype=object)
    labels = pa.array(words[rng.integers(0, 500, n)].tolist(), pa.string())
    mask = rng.random(n) < 0.1
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "x": pa.array(rng.random(n), mask=mask),
            "c": pa.array(rng.integers(0, 1000, n).astype(np.int32)),
            "label": labels,
            "unique": pa.array([f"u{i}" * 3 for i in range(n)], pa.large_string()),
            "run": pa.array(np.repeat(np.arange(30), n // 30).astype(np.int64)),
        }
    )
    ours = _write_ours(table, use_dictionary=["c", "label", "unique", "run"], compression="snappy")
    back = pq.read_table(io.BytesIO(ours))
    assert back.equals(table)
    metadata = pq.ParquetFile(io.BytesIO(ours)).metadata
    encodings = {
        metadata.row_group(0).column(i).path_in_schema: metadata.row_group(0).column(i).encodings
        for i in range(metadata.num_columns)
    }
    assert "RLE_DICTIONARY" in encodings["label"] and "RLE_DICTIONARY" in encodings["c"]
    assert "RLE_DICTIONARY" not in encodings["unique"]  # its dictionary would pass 1 MiB
    assert "RLE_DICTIONARY" not in encodings["id"]
    x = metadata.row_group(0).column(1).statistics
    present = table["x"].drop_null().to_numpy()
    assert (x.null_count, x.min, x.max) == (int(mask.sum()), present.min(), present.max())
    label = metadata.row_group(0).column(3).statistics
    assert (label.min, label.max) == (min(words), max(words))
    # Runs of one value are RLE runs: the repeated column is a few bytes a page.
    assert metadata.row_group(0).column(5).total_compressed_size < 2000


def test_chunked_columns_and_several_write_calls():
    a = pa.table(
        {"x": pa.chunked_array([[1, 2], [3]]), "s": pa.chunked_array([["a"], ["b", None]])}
    )
    b = pa.table({"x": [4], "s": ["c"]})
    f = io.BytesIO()
    writer = FlatParquetWriter(f, a.schema, use_dictionary=True, compression="snappy")
    writer.write_table(a)
    writer.write_table(b, row_group_size=1)
    writer.close()
    parquet = pq.ParquetFile(io.BytesIO(f.getvalue()))
    assert parquet.metadata.num_row_groups == 2
    assert parquet.read().to_pylist() == pa.concat_tables([a, b]).to_pylist()


def test_handles_flat_common_types_and_plain_options_only():
    flat = pa.schema([("x", pa.int64()), ("s", pa.string())])
    assert handles(flat, {"compression": {"x": "none", "s": "snappy"}, "use_dictionary": ["s"]})
    assert not handles(pa.schema([("l", pa.list_(pa.int64()))]), {})
    assert not handles(pa.schema([("b", pa.bool_())]), {})
    assert not handles(pa.schema([("u", pa.uint64())]), {})
    assert not handles(flat, {"compression": "lz4"})
    assert not handles(flat, {"version": "1.0"})
    with_id = pa.schema([pa.field("x", pa.int64(), metadata={b"PARQUET:field_id": b"1"})])
    assert not handles(with_id, {})


def test_codecs_by_column_leave_the_others_uncompressed_as_arrow_does():
    table = pa.table({"a": list(range(1000)), "b": list(range(1000))})
    for data in (
        _write_ours(table, compression={"a": "zstd"}),
        _write_arrows(table, compression={"a": "zstd"}),
    ):
        group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
        assert (group.column(0).compression, group.column(1).compression) == (
            "ZSTD",
            "UNCOMPRESSED",
        )


def test_row_group_size_must_be_positive():
    table = pa.table({"a": [1, 2]})
    writer = FlatParquetWriter(io.BytesIO(), table.schema)
    with pytest.raises(ValueError, match="row_group_size must be a positive int"):
        writer.write_table(table, row_group_size=0)


def test_nulls_in_a_non_nullable_field_are_refused():
    schema = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    table = pa.table({"x": pa.array([1, None])}).cast(pa.schema([("x", pa.int64())]))
    writer = FlatParquetWriter(io.BytesIO(), schema)
    with pytest.raises(pa.ArrowInvalid, match="non-nullable"):
        writer.write_table(pa.Table.from_arrays(table.columns, schema=schema))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 7), max_size=300) | st.lists(st.integers(0, 2**20), max_size=60),
    start=st.integers(0, 20),
)
def test_rle_hybrid_decodes_to_the_values(values, start):
    """Decode the RLE / bit-packing hybrid with a small reader of the format."""
    start = min(start, len(values))
    bit_width = max(1, max(values, default=0).bit_length())
    raw = np.array(values, np.uint32).tobytes()
    encoded = parquet_flat_writer._parquet_encode.rle_hybrid(
        raw, start, len(values) - start, bit_width
    )
    assert _decode_hybrid(encoded, bit_width, len(values) - start) == values[start:]


def _decode_hybrid(data: bytes, bit_width: int, count: int) -> list[int]:
    out: list[int] = []
    at = 0
    while len(out) < count:
        header = shift = 0
        while True:
            byte = data[at]
            at += 1
            header |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if header & 1:
            groups = header >> 1
            size = groups * bit_width
            bits = int.from_bytes(data[at : at + size], "little")
            at += size
            out += [(bits >> (i * bit_width)) & ((1 << bit_width) - 1) for i in range(groups * 8)]
        else:
            width = (bit_width + 7) // 8
            out += [int.from_bytes(data[at : at + width], "little")] * (header >> 1)
            at += width
    assert at == len(data)
    return out[:count]


def test_thrift_lists_and_long_field_gaps():
    assert list_of(I32, [1, 2]) == bytes([0x25, 2, 4])
    assert list_of(I32, range(15))[:2] == bytes([0xF5, 15])
    assert struct([(20, I32, 1)]) == bytes([0x05, 40, 2, 0])
    assert struct([(1, LIST, (STRUCT, [struct([])]))]) == bytes([0x19, 0x1C, 0, 0])


def test_polars_and_duckdb_read_the_files_back(tmp_path):
    """Two Parquet readers other than Arrow's (installed with the benchmark extra)."""
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(1)
    n = 20_000
    mask = rng.random(n) < 0.2
    table = pa.table(
        {
            "i8": pa.array(rng.integers(-100, 100, n).astype(np.int8), mask=mask),
            "i32": pa.array(rng.integers(0, 50, n).astype(np.int32), mask=mask),
            "i64": pa.array(rng.integers(-(2**40), 2**40, n)),
            "f32": pa.array(rng.random(n).astype(np.float32), mask=mask),
            "f64": pa.array(rng.standard_normal(n)),
            "d": pa.array(rng.integers(0, 20_000, n).astype(np.int32)).view(pa.date32()),
            "ts": pa.array(rng.integers(0, 2**50, n)).view(pa.timestamp("us", "UTC")),
            "s": pa.array([f"w{i % 300}" for i in range(n)], mask=mask),
            "ls": pa.array([f"unique-{i}-" * 5 for i in range(n)], pa.large_string()),
            "b": pa.array([bytes([i % 256]) * (i % 7) for i in range(n)], pa.binary()),
        }
    )
    path = tmp_path / "flat.parquet"
    with open(path, "wb") as f:
        writer = FlatParquetWriter(
            f,
            table.schema,
            use_dictionary=["i32", "s", "ls", "d"],
            compression={"f64": "none", "i64": "zstd", "b": "gzip"},
        )
        writer.write_table(table, row_group_size=7_000)
        writer.close()
    assert polars.read_parquet(path).equals(polars.from_arrow(table))
    with duckdb.connect() as con:
        back = con.sql(f"SELECT * FROM read_parquet('{path}')").to_arrow_table()
        assert back.to_pylist() == table.to_pylist()
        # Row groups are skipped by their statistics: the answer must not change.
        found = con.sql(
            f"SELECT min(s), max(i64), count(*) FROM read_parquet('{path}') WHERE i32 = 7"
        ).fetchall()
    kept = [r for r in table.to_pylist() if r["i32"] == 7]
    strings = [r["s"] for r in kept if r["s"] is not None]
    assert found == [(min(strings), max(r["i64"] for r in kept), len(kept))]
