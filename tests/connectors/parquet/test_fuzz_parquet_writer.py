"""Differential fuzzing of shardflow's Parquet writer of flat columns against Arrow's writer.

Random tables of every type the writer handles (``flat_writer.handles``), with
nulls, NaN, -0.0, infinities, the ends of each type's range, empty and long strings,
invalid UTF-8 in binary, sliced and chunked columns, non-nullable fields, schema metadata,
values few and many (dictionaries that overflow their page, pages cut small), one row group
or many, every codec, are written by ``FlatParquetWriter`` and by ``pyarrow.parquet`` with
the same options. Then:

* pyarrow reads our file back exactly as written (schema with its metadata, values, nulls,
  doubles bit for bit);
* both files have the same Parquet schema, key-value metadata, row groups and, per column
  chunk, the same statistics (null count, min and max to the byte, or none) and types;
* DuckDB and Polars read both files to the same rows, and a filter that statistics can
  prune (``column > value``, over many row groups) gives in each of pyarrow, DuckDB and
  Polars the same rows for our file as for Arrow's, which for pyarrow (and for DuckDB and
  Polars where no NaN is involved, whose order they define differently) are the rows
  ``pyarrow.compute`` keeps.

Cases are seeded (see fuzz_runner.py): ``SHARDFLOW_FUZZ_CASES=200000`` for a long run.
"""

from __future__ import annotations

import io
import math
import random
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from fuzz_runner import PARTS, run_cases, time_limit

from shardflow.connectors.parquet import flat_writer as parquet_flat_writer
from shardflow.connectors.parquet.flat_writer import FlatParquetWriter, handles

pytestmark = pytest.mark.skipif(
    parquet_flat_writer._parquet_encode is None,
    reason="the compiled module (connectors/parquet/_parquet_encode.c) is not built",
)

INTEGERS = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint8(): (0, 2**8 - 1),
    pa.uint16(): (0, 2**16 - 1),
}
TIMESTAMPS = [pa.timestamp("ms"), pa.timestamp("us", "UTC"), pa.timestamp("ns", "Asia/Tokyo")]
TIMESTAMPS += [pa.timestamp("ns"), pa.timestamp("ms", "+01:00")]
TYPES = [*INTEGERS, pa.float32(), pa.float64(), pa.date32(), *TIMESTAMPS]
TYPES += [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]
CODECS = ["snappy", "none", "zstd", "gzip", "brotli", None]
FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308]
FLOATS += [1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.5, 3.4028234663852886e38]
FLOATS += [1.401298464324817e-45, 1e-40, 0.1]
TEXTS = ["", "a", "ab", "abc", "b", "é", "\x00", "\uffff", "😀", "z" * 5000, "a" * 4096]
TEXTS += ["a" * 4097, " ", "A", "~"]


def float_value(rng: random.Random, kind: pa.DataType) -> float:
    if rng.random() < 0.5:
        value = rng.choice(FLOATS)
    else:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if kind == pa.float32() and math.isfinite(value):
        value = struct.unpack("<f", struct.pack("<f", value if abs(value) < 3e38 else 1.5))[0]
    if math.isnan(value) and rng.random() < 0.3:  # a NaN of another payload, or sign
        bits = struct.unpack("<Q", struct.pack("<d", math.nan))[0] | rng.getrandbits(51)
        value = struct.unpack("<d", struct.pack("<Q", bits | (rng.getrandbits(1) << 63)))[0]
    return value


def pool(rng: random.Random, kind: pa.DataType) -> list:
    """Values of ``kind``: a few (dictionary-friendly) or many, with the type's extremes."""
    size = rng.choice([1, 2, 5, 40, 1000])
    if kind in INTEGERS or kind == pa.date32() or pa.types.is_timestamp(kind):
        if kind == pa.date32():  # the days of Python's dates (pyarrow converts to them)
            low, high = -719162, 2932896
        else:
            low, high = INTEGERS.get(kind, (-(2**63), 2**63 - 1))
        if pa.types.is_timestamp(kind) and rng.random() < 0.5:
            low, high = -(10**12), 10**12
        extremes = [low, high, 0, -1 if low < 0 else 1, low + 1, high - 1]
        return [
            rng.choice(extremes) if rng.random() < 0.2 else rng.randint(low, high)
            for _ in range(size)
        ]
    if pa.types.is_floating(kind):
        return [float_value(rng, kind) for _ in range(size)]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return [
            rng.choice(TEXTS)
            if rng.random() < 0.4
            else "".join(rng.choice("abcé漢😀\x00 ") for _ in range(rng.randint(0, 12)))
            for _ in range(size)
        ]
    return [
        rng.choice([b"", b"\x00", b"\xff", b"\xff" * 5000, b"\x80abc"])
        if rng.random() < 0.3
        else rng.randbytes(rng.randint(0, 12))
        for _ in range(size)
    ]


def column(rng: random.Random, kind: pa.DataType, rows: int, nullable: bool) -> pa.ChunkedArray:
    values = pool(rng, kind)
    null_share = rng.choice([0.0, 0.0, 0.1, 0.5, 1.0]) if nullable else 0.0
    if rng.random() < 0.3:  # runs: sorted, so row groups' ranges differ
        data = sorted(rng.choice(values) for _ in range(rows))
        if pa.types.is_floating(kind):
            data = sorted(data, key=lambda v: (math.isnan(v), v))
    else:
        data = [rng.choice(values) for _ in range(rows)]
    data = [None if rng.random() < null_share else v for v in data]
    extra = rng.choice([0, 0, 3])  # a slice of a longer array: an offset into its buffers
    padding = [rng.choice(values) for _ in range(extra)]
    storage = kind
    if kind == pa.date32():
        storage = pa.int32()
    elif pa.types.is_timestamp(kind):
        storage = pa.int64()
    array = pa.array(padding + data, storage)
    if storage != kind:
        array = array.view(kind)
    array = array.slice(extra)
    cuts = sorted(rng.sample(range(rows + 1), min(rows + 1, rng.choice([0, 0, 1, 2]))))
    bounds = [0, *cuts, rows]
    return pa.chunked_array([array.slice(a, b - a) for a, b in zip(bounds, bounds[1:])], kind)


def generate(rng: random.Random) -> dict:
    rows = rng.choice([0, 1, 2, 3, 7, 20, 100, 400])
    fields, columns = [], []
    for index in range(rng.randint(1, 4)):
        kind = rng.choice(TYPES)
        nullable = rng.random() < 0.8
        fields.append(pa.field(f"c{index}", kind, nullable=nullable))
        columns.append(column(rng, kind, rows, nullable))
    metadata = {b"origin": b"fuzz"} if rng.random() < 0.2 else None
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=metadata))
    names = table.column_names
    compression = rng.choice(CODECS)
    if rng.random() < 0.2:
        compression = {n: rng.choice(CODECS[:-1]) for n in names if rng.random() < 0.7}
    use_dictionary = rng.choice([True, False, [n for n in names if rng.random() < 0.5]])
    return {
        "table": table,
        "compression": compression,
        "use_dictionary": use_dictionary,
        # at most 25 row groups: more cost time and find nothing new
        "row_group_size": max(rng.choice([None, None, 1, 3, 7, 50, 250]) or 0, rows // 25) or None,
        "page_bytes": rng.choice([parquet_flat_writer.PAGE_BYTES, 64, 1000]),
        "dictionary_bytes": rng.choice([parquet_flat_writer.DICTIONARY_BYTES, 16, 300]),
    }


def describe(case: dict) -> str:
    table = case["table"]
    options = {k: v for k, v in case.items() if k != "table"}
    storage = []
    for c in table.columns:
        if pa.types.is_temporal(c.type):
            as_int = pa.int32() if c.type == pa.date32() else pa.int64()
            c = pa.chunked_array([chunk.view(as_int) for chunk in c.chunks], as_int)
        storage.append(c)
    rows = pa.Table.from_arrays(storage, names=table.column_names).to_pylist()
    return f"{options} schema={table.schema} rows (temporal values as integers)={rows!r}"


# -- writing and reading --------------------------------------------------------------------


def write_ours(case: dict) -> bytes:
    saved = parquet_flat_writer.PAGE_BYTES, parquet_flat_writer.DICTIONARY_BYTES
    parquet_flat_writer.PAGE_BYTES = case["page_bytes"]
    parquet_flat_writer.DICTIONARY_BYTES = case["dictionary_bytes"]
    try:
        f = io.BytesIO()
        table = case["table"]
        writer = FlatParquetWriter(
            f, table.schema, use_dictionary=case["use_dictionary"], compression=case["compression"]
        )
        writer.write_table(table, row_group_size=case["row_group_size"])
        writer.close()
        return f.getvalue()
    finally:
        parquet_flat_writer.PAGE_BYTES, parquet_flat_writer.DICTIONARY_BYTES = saved


def write_arrows(case: dict) -> bytes:
    f = io.BytesIO()
    pq.write_table(
        case["table"],
        f,
        compression=case["compression"],
        use_dictionary=case["use_dictionary"],
        row_group_size=case["row_group_size"],
        data_page_size=case["page_bytes"],
        dictionary_pagesize_limit=case["dictionary_bytes"],
    )
    return f.getvalue()


def same_values(got: pa.Table, want: pa.Table, what: str) -> None:
    """Equal columns, floats bit for bit (NaN payloads and -0.0 included)."""
    assert got.num_rows == want.num_rows, (what, got.num_rows, want.num_rows)
    assert got.column_names == want.column_names, what
    for name in want.column_names:
        mine, theirs = got[name].combine_chunks(), want[name].combine_chunks()
        if pa.types.is_floating(theirs.type):
            assert mine.type == theirs.type, (what, name)
            width = "<f" if theirs.type == pa.float32() else "<d"
            assert float_bits(mine, width) == float_bits(theirs, width), (what, name)
        else:
            assert mine.equals(theirs), (what, name, mine, theirs)


def float_bits(array: pa.Array, width: str) -> list:
    return [None if v is None else struct.pack(width, v) for v in array.to_pylist()]


def statistics(data: bytes) -> list:
    """What a reader learns of each column chunk: types, row counts, statistics."""
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    found = [metadata.num_rows, metadata.num_row_groups, metadata.num_columns]
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        found.append(group.num_rows)
        for c in range(group.num_columns):
            chunk = group.column(c)
            stats = chunk.statistics
            entry = [chunk.physical_type, chunk.num_values, chunk.compression, chunk.is_stats_set]
            if stats is not None:  # (raw: pyarrow cannot convert every min and max)
                entry += [stats.has_null_count, stats.null_count, stats.has_distinct_count]
                entry += [stats.num_values, stats.has_min_max, str(stats.logical_type)]
                entry += [stats.converted_type, stats.physical_type]
                if stats.has_min_max:
                    entry += [stats.min_raw, stats.max_raw]
            found.append(entry)
    return found


# -- the footer, field by field -------------------------------------------------------------


def footer(data: bytes) -> dict:
    """The file's FileMetaData (Thrift compact protocol) as nested dicts of field id to
    value: every field either writer wrote, also those pyarrow does not show."""
    size = struct.unpack("<I", data[-8:-4])[0]
    value, _ = _thrift_struct(data[-8 - size : -8], 0)
    return value


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, at


def _thrift_value(data: bytes, at: int, kind: int) -> tuple[object, int]:
    if kind in (1, 2):  # booleans: the field header holds them (elements of lists: a byte)
        return kind == 1, at
    if kind == 3:
        return data[at], at + 1
    if kind in (4, 5, 6):
        raw, at = _varint(data, at)
        return (raw >> 1) ^ -(raw & 1), at
    if kind == 7:
        return data[at : at + 8], at + 8
    if kind == 8:
        length, at = _varint(data, at)
        return data[at : at + length], at + length
    if kind in (9, 10):
        header = data[at]
        at += 1
        count, element = header >> 4, header & 0x0F
        if count == 15:
            count, at = _varint(data, at)
        items = []
        for _ in range(count):
            if element in (1, 2):
                item, at = data[at] == 1, at + 1
            else:
                item, at = _thrift_value(data, at, element)
            items.append(item)
        return items, at
    if kind == 12:
        return _thrift_struct(data, at)
    raise AssertionError(f"unexpected Thrift type {kind}")


def _thrift_struct(data: bytes, at: int) -> tuple[dict, int]:
    fields: dict = {}
    last = 0
    while True:
        header = data[at]
        at += 1
        if header == 0:
            return fields, at
        delta, kind = header >> 4, header & 0x0F
        if delta:
            last += delta
        else:
            raw, at = _varint(data, at)
            last = (raw >> 1) ^ -(raw & 1)
        fields[last], at = _thrift_value(data, at, kind)


# FileMetaData, RowGroup and ColumnMetaData fields that hold where and how the bytes are laid
# out (offsets, sizes, encodings, the writer's name): they may differ; every other field,
# statistics first, must not.
LAYOUT = {"file": {4, 6}, "row_group": {1, 2, 5, 6}, "column": {2, 6, 7, 9, 10, 11, 13, 16}}


def same_footers(ours: dict, arrows: dict) -> None:
    def without(fields: dict, layout: set) -> dict:
        return {k: v for k, v in fields.items() if k not in layout}

    assert without(ours, LAYOUT["file"]) == without(arrows, LAYOUT["file"])
    assert len(ours.get(4, [])) == len(arrows.get(4, []))
    for group, theirs in zip(ours.get(4, []), arrows.get(4, []), strict=True):
        assert without(group, LAYOUT["row_group"]) == without(theirs, LAYOUT["row_group"])
        for chunk, their_chunk in zip(group[1], theirs[1], strict=True):
            assert without(chunk, {3}) == without(their_chunk, {3})
            mine = without(chunk[3], LAYOUT["column"])
            assert mine == without(their_chunk[3], LAYOUT["column"]), (chunk, their_chunk)


def check_case(case: dict, rng: random.Random, folder=None) -> None:
    """Our file against the table and Arrow's file; with ``folder``, also in DuckDB and
    Polars, and a filter in each reader."""
    table = case["table"]
    options = {"compression": case["compression"], "use_dictionary": case["use_dictionary"]}
    assert handles(table.schema, options)
    ours, arrows = write_ours(case), write_arrows(case)
    back = pq.read_table(io.BytesIO(ours))
    assert back.schema.equals(table.schema, check_metadata=True), (back.schema, table.schema)
    same_values(back, table, "pyarrow reads our file")
    ours_file, arrows_file = pq.ParquetFile(io.BytesIO(ours)), pq.ParquetFile(io.BytesIO(arrows))
    assert ours_file.schema.equals(arrows_file.schema)
    assert ours_file.metadata.metadata == arrows_file.metadata.metadata
    assert statistics(ours) == statistics(arrows)
    same_footers(footer(ours), footer(arrows))
    if folder is None:
        return
    paths = folder / "ours.parquet", folder / "arrows.parquet"
    paths[0].write_bytes(ours)
    paths[1].write_bytes(arrows)
    check_filters(table, paths, rng)


FILTERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_date, pa.types.is_string)
FILTERABLE += (pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def check_filters(table: pa.Table, paths, rng: random.Random) -> None:
    """Each reader reads both files to the same rows, with and without a filter its
    statistics can prune; the filtered rows are pyarrow.compute's."""
    import polars as pl

    names = [f.name for f in table.schema if any(test(f.type) for test in FILTERABLE)]
    name = rng.choice(names) if names else None
    value = None
    if name is not None:
        present = table[name].drop_null().to_pylist()
        value = rng.choice(present) if present and rng.random() < 0.9 else None
    if value is None:
        name = None
    kind = table.schema.field(name).type if name is not None else None
    nan = kind is not None and pa.types.is_floating(kind) and pc.any(pc.is_nan(table[name])).as_py()
    want = table.filter(pc.greater(table[name], pa.scalar(value, kind))) if name else None

    got = pq.read_table(paths[0], filters=[(name, ">", value)]) if name else None
    if name:
        same_values(got, want, "pyarrow's filter on our file")

    with _duckdb().cursor() as con:
        full = [outcome(lambda p=p: con.sql(f"SELECT * FROM read_parquet('{p}')")) for p in paths]
        same_outcome(full, "DuckDB")
        if name:
            query = f'SELECT * FROM read_parquet(?) WHERE "{name}" > ?'
            kept = [outcome(lambda p=p: con.sql(query, params=[str(p), value])) for p in paths]
            same_outcome(kept, "DuckDB's filter")
            if not nan and not isinstance(kept[0], Exception):
                assert kept[0].num_rows == want.num_rows, ("DuckDB's filter", kept[0], want)

    frames = [outcome(lambda p=p: pl.read_parquet(p)) for p in paths]
    same_outcome(frames, "Polars")
    if name and not pa.types.is_binary(kind) and not pa.types.is_large_binary(kind):
        kept = [outcome(lambda p=p: pl.scan_parquet(p).filter(pl.col(name) > value)) for p in paths]
        same_outcome(kept, "Polars's filter")
        if not nan and not isinstance(kept[0], Exception):
            assert kept[0].num_rows == want.num_rows, ("Polars's filter", kept[0], want)


_connection: list = []


def _duckdb():
    """One DuckDB connection for the suite (connecting costs more than a query)."""
    if not _connection:
        import duckdb

        _connection.append(duckdb.connect())
    return _connection[0]


def outcome(query) -> pa.Table | Exception:
    """A DuckDB relation's or a Polars frame's rows as an Arrow table, or the reader's error
    (a value a reader cannot convert, such as a timestamp past its range)."""
    try:
        result = query()
        if hasattr(result, "collect"):
            result = result.collect()
        return result.to_arrow() if hasattr(result, "to_arrow") else result.to_arrow_table()
    except Exception as exc:  # the readers' own error types
        return exc


def same_outcome(results: list, what: str) -> None:
    """Our file and Arrow's give the same rows, or the same error."""
    ours, arrows = results
    if isinstance(ours, Exception) or isinstance(arrows, Exception):
        assert type(ours) is type(arrows) and str(ours) == str(arrows), (what, ours, arrows)
        return
    same_values(ours, arrows, what)


# cases of the default run: files against Arrow's; files also through DuckDB and Polars
# (slower: the readers' calls take most of the time)
CASES, READER_CASES = 1000, 200


@pytest.mark.timeout(time_limit(CASES, 0.5))
@pytest.mark.parametrize("part", PARTS)
def test_fuzz_parquet_writer_against_arrow(part):
    run_cases("parquet_writer", CASES, generate, check_case, describe=describe, part=part)


@pytest.mark.timeout(time_limit(READER_CASES, 1.0))
@pytest.mark.parametrize("part", PARTS)
def test_fuzz_parquet_files_in_pyarrow_duckdb_and_polars(tmp_path, part):
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    run_cases(
        "parquet_readers",
        READER_CASES,
        generate,
        lambda case, rng: check_case(case, rng, tmp_path),
        describe=describe,
        part=part,
    )
