"""Differential fuzzing of shardflow's Parquet page decoder against Arrow's reader.

Random tables of the types the decoder handles (int32, int64, float32, float64, date32)
beside one it does not (strings), with nulls, NaN of several payloads, -0.0, the ends of
each range, values few (dictionary-encoded) and many (a dictionary that overflows into
plain pages), required and optional fields, are written by ``pyarrow.parquet`` with random
options: every codec, dictionary on, off or per column, BYTE_STREAM_SPLIT and
DELTA_BINARY_PACKED encodings, data pages v1 and v2 cut small, page checksums, small write
batches, one row group or many. Then, for every row group and column:

* :func:`decodable_columns` names exactly the columns of the handled types;
* :func:`decode_column_chunk` returns the array Arrow reads, bit for bit (validity, values
  of NaN included), and declines (None) only for a codec or an encoding it does not handle;
* after random bytes of a column chunk are overwritten (a corrupt file), it returns either
  None or exactly what Arrow reads, and None wherever Arrow raises.

Cases are seeded (see fuzz_runner.py): ``SHARDFLOW_FUZZ_CASES=20000`` for a long run.
"""

from __future__ import annotations

import io
import math
import random
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fuzz_runner import PARTS, run_cases, time_limit

from shardflow.connectors.parquet import page_decoding
from shardflow.connectors.parquet.page_decoding import (
    decodable_columns,
    decodable_dictionaries,
    decode_column_chunk,
)

pytestmark = pytest.mark.skipif(
    not page_decoding.available(),
    reason="the compiled module (connectors/parquet/_parquet_decode.c) or cramjam is missing",
)

RANGES = {
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.date32(): (-719162, 2932896),
}
TYPES = [pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.date32()]
STRING_TYPES = [pa.string(), pa.binary()]
CODECS = ["snappy", "snappy", "none", "zstd", "gzip"]
DECODED_CODECS = ("snappy", "none")
FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 1.0, -1.5]
DEFAULT_CASES = 600
CORRUPT_CASES = 1200


def float_value(rng: random.Random, kind: pa.DataType) -> float:
    if rng.random() < 0.4:
        value = rng.choice(FLOATS)
    else:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if kind == pa.float32() and math.isfinite(value):
        value = struct.unpack("<f", struct.pack("<f", value if abs(value) < 3e38 else 1.5))[0]
    if math.isnan(value) and rng.random() < 0.5:  # another payload or sign
        bits = struct.unpack("<Q", struct.pack("<d", math.nan))[0] | rng.getrandbits(51)
        value = struct.unpack("<d", struct.pack("<Q", bits | (rng.getrandbits(1) << 63)))[0]
    return value


def pool(rng: random.Random, kind: pa.DataType) -> list:
    size = rng.choice([1, 3, 40, 2000])
    if pa.types.is_floating(kind):
        return [float_value(rng, kind) for _ in range(size)]
    low, high = RANGES[kind]
    extremes = [low, high, 0, -1, low + 1, high - 1]
    return [
        rng.choice(extremes) if rng.random() < 0.2 else rng.randint(low, high) for _ in range(size)
    ]


def column(rng: random.Random, kind: pa.DataType, rows: int, nullable: bool) -> pa.Array:
    values = pool(rng, kind)
    null_share = rng.choice([0.0, 0.0, 0.05, 0.5, 1.0]) if nullable else 0.0
    data = [None if rng.random() < null_share else rng.choice(values) for _ in range(rows)]
    if kind == pa.date32():
        return pa.array(data, pa.int32()).view(pa.date32())
    if pa.types.is_floating(kind):  # NaN payloads survive only through the bits
        width = np.float32 if kind == pa.float32() else np.float64
        raw = np.array([0.0 if v is None else v for v in data], dtype=width)
        mask = np.array([v is None for v in data], dtype=bool)
        return pa.array(raw, kind, mask=mask if mask.any() else None)
    return pa.array(data, kind)


def text_column(rng: random.Random, kind: pa.DataType, rows: int, nullable: bool) -> pa.Array:
    """Strings or bytes: a few distinct (dictionary pages hold them all) or many (pages fall
    back to plain values); bytes that are not UTF-8 in binary columns."""
    distinct = rng.choice([1, 3, 40, 3000])
    pool = []
    for _ in range(distinct):
        text = "".join(rng.choice("abcé漢 \x00") for _ in range(rng.randint(0, 9)))
        pool.append(text if kind == pa.string() else text.encode() + rng.choice([b"", b"\xff"]))
    null_share = rng.choice([0.0, 0.1, 0.6, 1.0]) if nullable else 0.0
    return pa.array(
        [None if rng.random() < null_share else rng.choice(pool) for _ in range(rows)], kind
    )


def encodings(kind: pa.DataType) -> list[str]:
    if kind in STRING_TYPES:
        return ["PLAIN", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"]
    if kind in (pa.int32(), pa.int64(), pa.date32()):
        return ["PLAIN", "BYTE_STREAM_SPLIT", "DELTA_BINARY_PACKED"]
    return ["PLAIN", "BYTE_STREAM_SPLIT"]


def generate(rng: random.Random) -> dict:
    rows = rng.choice([0, 1, 2, 9, 100, 1000, 4000])
    fields, columns = [], []
    for index in range(rng.randint(1, 4)):
        kind = rng.choice(TYPES)
        nullable = rng.random() < 0.7
        fields.append(pa.field(f"c{index}", kind, nullable=nullable))
        columns.append(column(rng, kind, rows, nullable))
    for index in range(rng.choice([0, 0, 1, 2])):  # decoded as dictionaries, or Arrow's
        kind = rng.choice(STRING_TYPES)
        nullable = rng.random() < 0.7
        fields.insert(0, pa.field(f"s{index}", kind, nullable=nullable))
        columns.insert(0, text_column(rng, kind, rows, nullable))
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    names = table.column_names
    options: dict = {
        "compression": rng.choice(CODECS),
        "use_dictionary": rng.choice([True, True, False, [n for n in names if rng.random() < 0.5]]),
        "data_page_size": rng.choice([None, 64, 700, 5000]),
        "dictionary_pagesize_limit": rng.choice([None, 64, 1000]),
        # at most 25 row groups: more cost time and find nothing new
        "row_group_size": max(rng.choice([0, 0, 1, 50, 999]), rows // 25) or None,
        "data_page_version": rng.choice(["1.0", "2.0"]),
        "write_page_checksum": rng.random() < 0.3,
        "write_statistics": rng.random() < 0.7,
        "write_batch_size": rng.choice([None, 7, 300]),
    }
    if rng.random() < 0.2:
        options["compression"] = {n: rng.choice(CODECS) for n in table.column_names}
    if rng.random() < 0.2 and names:
        options["use_dictionary"] = False
        options["column_encoding"] = {
            n: rng.choice(encodings(table.schema.field(n).type)) for n in names
        }
    options = {k: v for k, v in options.items() if v is not None}
    return {"table": table, "options": options}


def describe(case: dict) -> str:
    table = case["table"]
    return f"{case['options']} schema={table.schema} rows={table.num_rows}"


def write(case: dict) -> bytes:
    f = io.BytesIO()
    pq.write_table(case["table"], f, **case["options"])
    return f.getvalue()


def expected_to_decode(case: dict, name: str) -> bool:
    """Whether the decoder must decode ``name`` (a codec and encodings it handles)."""
    options = case["options"]
    codec = options["compression"]
    if isinstance(codec, dict):
        codec = codec.get(name, "snappy")
    encoding = options.get("column_encoding", {}).get(name, "PLAIN")
    return codec in DECODED_CODECS and encoding == "PLAIN"


def value_bits(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The validity of every slot and the bits of the valid values."""
    width = array.type.bit_width
    data = np.frombuffer(array.buffers()[1], dtype=f"<u{width // 8}")
    data = data[array.offset : array.offset + len(array)]
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    return valid, data[valid]


def assert_same(got: pa.Array, want: pa.Array) -> None:
    assert got.type == want.type
    assert len(got) == len(want) and got.null_count == want.null_count
    assert got.equals(want) or pa.types.is_floating(got.type)  # NaN != NaN in equals()
    got_valid, got_bits = value_bits(got)
    want_valid, want_bits = value_bits(want)
    assert np.array_equal(got_valid, want_valid)
    assert np.array_equal(got_bits, want_bits)
    got.validate(full=True)


def arrow_column(parquet: pq.ParquetFile, row_group: int, name: str) -> pa.Array:
    return parquet.read_row_group(row_group, columns=[name]).column(0).combine_chunks()


def arrow_dictionary(data: bytes, metadata, row_group: int, name: str) -> pa.Array:
    """The column as Arrow's ``read_dictionary`` reads it."""
    reader = pq.ParquetFile(pa.BufferReader(data), metadata=metadata, read_dictionary=[name])
    column = reader.read_row_group(row_group, columns=[name]).column(0)
    assert column.num_chunks == 1
    return column.chunk(0)


def decoded(case: dict, data: bytes, metadata, row_group: int, name: str, leaf: int):
    kind = case["table"].schema.field(name).type
    source = pa.BufferReader(data)
    return decode_column_chunk(source, metadata, row_group, leaf, kind, kind in STRING_TYPES)


def arrows(case: dict, data: bytes, metadata, row_group: int, name: str) -> pa.Array:
    if case["table"].schema.field(name).type in STRING_TYPES:
        return arrow_dictionary(data, metadata, row_group, name)
    reader = pq.ParquetFile(pa.BufferReader(data), metadata=metadata)
    return arrow_column(reader, row_group, name)


def all_decodable(parquet: pq.ParquetFile, case: dict) -> dict[str, int]:
    strings = [f.name for f in case["table"].schema if f.type in STRING_TYPES]
    return {**decodable_columns(parquet, None), **decodable_dictionaries(parquet, strings)}


def must_decode_dictionary(case: dict, name: str, column: pa.Array) -> bool:
    """Whether a string column's chunks are surely all dictionary pages: few distinct
    values, a dictionary page that holds them, a codec and encoding the decoder handles."""
    options = case["options"]
    wanted = options["use_dictionary"]
    wanted = name in wanted if isinstance(wanted, list) else wanted
    small = options.get("dictionary_pagesize_limit", 1 << 20) >= 1000
    few = len(set(column.drop_null().to_pylist())) <= 40
    return bool(wanted) and small and few and expected_to_decode(case, name)


def check(case: dict, rng: random.Random) -> None:
    data = write(case)
    parquet = pq.ParquetFile(pa.BufferReader(data))
    found = all_decodable(parquet, case)
    assert sorted(found) == sorted(case["table"].column_names)
    for row_group in range(parquet.num_row_groups):
        rows = parquet.metadata.row_group(row_group).num_rows
        for name, leaf in found.items():
            got = decoded(case, data, parquet.metadata, row_group, name, leaf)
            if case["table"].schema.field(name).type in STRING_TYPES:
                if got is None:
                    must = must_decode_dictionary(case, name, case["table"].column(name))
                    assert not (must and rows), f"{name} declined"
                    continue
                want = arrow_dictionary(data, parquet.metadata, row_group, name)
                got.validate(full=True)
                assert got.type == want.type and got.equals(want)
                continue
            if got is None:
                assert not expected_to_decode(case, name), f"{name} declined"
                continue
            assert_same(got, arrow_column(parquet, row_group, name))


def generate_corrupt(rng: random.Random) -> dict:
    case = generate(rng)
    case["options"]["compression"] = rng.choice(DECODED_CODECS)
    case["options"].pop("column_encoding", None)
    case["options"]["use_dictionary"] = case["options"].get("use_dictionary") or True
    return case


def check_corrupt(case: dict, rng: random.Random) -> None:
    data = bytearray(write(case))
    parquet = pq.ParquetFile(pa.BufferReader(bytes(data)))
    found = all_decodable(parquet, case)
    if not found or parquet.num_row_groups == 0:
        return
    metadata = parquet.metadata
    row_group = rng.randrange(parquet.num_row_groups)
    name = rng.choice(sorted(found))
    chunk = metadata.row_group(row_group).column(found[name])
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:
        start = min(start, chunk.dictionary_page_offset)
    size = chunk.total_compressed_size
    if size <= 0 or chunk.num_values == 0:
        return
    for _ in range(rng.choice([1, 1, 2, 8])):
        at = start + (rng.randrange(min(size, 64)) if rng.random() < 0.5 else rng.randrange(size))
        data[at] = rng.choice([0, 0xFF, 0x80, 0x7F, 1, rng.randrange(256)])
    corrupt = bytes(data)
    try:
        want = arrows(case, corrupt, metadata, row_group, name)
        want.validate(full=True)
    except Exception:
        want = None
    got = decoded(case, corrupt, metadata, row_group, name, found[name])
    if got is not None:
        assert want is not None, "decoded a chunk Arrow rejects"
        if pa.types.is_dictionary(got.type):
            assert got.equals(want)
        else:
            assert_same(got, want)


@pytest.mark.timeout(time_limit(DEFAULT_CASES, 0.2))
@pytest.mark.parametrize("part", PARTS)
def test_decoded_columns_equal_arrows(part: str) -> None:
    assert run_cases("parquet-page-decoding", DEFAULT_CASES, generate, check, describe, part)


@pytest.mark.timeout(time_limit(CORRUPT_CASES, 0.2))
@pytest.mark.parametrize("part", PARTS)
def test_corrupt_chunks_decline_or_equal_arrows(part: str) -> None:
    assert run_cases(
        "parquet-page-decoding-corrupt",
        CORRUPT_CASES,
        generate_corrupt,
        check_corrupt,
        describe,
        part,
    )
