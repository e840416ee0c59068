"""Differential cases: read options, partitions, JSON fallbacks, errors, dataset metadata."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _parquet(tmp, name="f.parquet", rows=4):
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"a": list(range(rows)), "b": [f"s{i}" for i in range(rows)]}),
        path,
        row_group_size=2,
    )
    return path


@case("read_parquet", slow=True)
def parquet_columns_paths_and_row_hash(m, tmp):
    """columns= keeps the path column; columns=[] keeps the row count; row_hash is uint64"""
    f = _parquet(tmp)
    with_path = m.read_parquet(f, include_paths=True, columns=["a"]).take_all()
    hashed = m.read_parquet(f, include_row_hash=True)
    hashes = [r["row_hash"] for r in hashed.take_all()]
    again = [r["row_hash"] for r in m.read_parquet(f, include_row_hash=True).take_all()]
    return [
        with_path,
        m.read_parquet(f, columns=[]).count(),
        hashed.schema().names,
        str(hashed.take_batch(batch_format="pyarrow").schema.field("row_hash").type),
        len(set(hashes)) == len(hashes) and hashes == again,
    ]


@case("read_parquet")
def parquet_dataset_kwargs(m, tmp):
    """dataset_kwargs is accepted (deprecated); partitioning or filters in it: ValueError"""
    f = _parquet(tmp)
    return [
        m.read_parquet(f, dataset_kwargs={"read_dictionary": ["b"]}).count(),
        _raises(lambda: m.read_parquet(f, dataset_kwargs={"partitioning": None}).count()),
        _raises(lambda: m.read_parquet(f, dataset_kwargs={"filters": [("a", ">", 1)]}).count()),
    ]


@case("read_parquet", "read_csv", "Partitioning", "PathPartitionFilter", slow=True)
def hive_partition_values_are_strings(m, tmp):
    """hive values are strings unless Partitioning(field_types=...) types them"""
    from ray.data.datasource import Partitioning as RayPartitioning
    from ray.data.datasource import PathPartitionFilter as RayFilter

    import shardflow.sdk as sdk

    Partitioning = RayPartitioning if m.__name__ == "ray.data" else sdk.Partitioning
    Filter = RayFilter if m.__name__ == "ray.data" else sdk.PathPartitionFilter
    for year in (2023, 2024):
        _parquet(tmp / "t" / f"year={year}" / "m=05", rows=2)
        folder = tmp / "c" / f"year={year}"
        folder.mkdir(parents=True)
        (folder / "x.csv").write_text("v\n1\n")
    plain = m.read_parquet(tmp / "t")
    typed = m.read_parquet(tmp / "t", partitioning=Partitioning("hive", field_types={"year": int}))
    kept = m.read_csv(tmp / "c", partition_filter=Filter.of(lambda p: p["year"] == "2024"))
    return [
        plain.schema(),
        sorted({(r["year"], r["m"]) for r in plain.take_all()}),
        sorted({r["year"] for r in typed.take_all()}),
        kept.take_all(),
    ]


@case("read_json")
def json_fallbacks(m, tmp):
    """mixed types (lines=True), top-level arrays, lists of objects, objects above a block"""
    (tmp / "mixed.jsonl").write_text('{"a": 1}\n{"a": "x"}\n')
    (tmp / "array.json").write_text('[{"a": 1}, {"a": 2}]')
    (tmp / "nested.json").write_text('{"a": [{"x": 1}, {"y": 2}]}\n')
    big = "x" * (3 << 20)
    (tmp / "big.json").write_text(json.dumps({"a": big}) + "\n" + json.dumps({"a": "y"}) + "\n")
    return [
        m.read_json(tmp / "mixed.jsonl", lines=True).take_all(),
        m.read_json(tmp / "array.json").take_all(),
        m.read_json(tmp / "nested.json").take_all(),
        [len(r["a"]) for r in m.read_json(tmp / "big.json").take_all()],
    ]


@case("read_binary_files", "read_text")
def compressed_files_by_extension(m, tmp):
    """.gz files are decompressed by their extension"""
    (tmp / "x.gz").write_bytes(gzip.compress(b"hello"))
    (tmp / "t.txt.gz").write_bytes(gzip.compress(b"one\ntwo\n"))
    return [
        m.read_binary_files(tmp / "x.gz").take_all(),
        m.read_binary_files(tmp / "x.gz", include_paths=True).take_all(),
        m.read_text(tmp / "t.txt.gz").take_all(),
    ]


@case("read_parquet", "read_json", "read_csv")
def wrong_format_raises(m, tmp):
    """a file of another format raises the parser's error type"""
    (tmp / "bad.parquet").write_text("not parquet")
    (tmp / "bad.json").write_text("not json")
    return [
        _raises(lambda: m.read_parquet(tmp / "bad.parquet").take_all()),
        _raises(lambda: m.read_json(tmp / "bad.json").take_all()),
    ]


@case("Dataset.input_files", "Dataset.size_bytes", "Dataset.num_blocks", "Dataset.materialize")
def dataset_metadata(m, tmp):
    """input_files of reads, size_bytes of in-memory data, num_blocks of materialized data"""
    for i in range(2):
        (tmp / f"{i}.csv").write_text("a\n1\n2\n")
    csv = m.read_csv(tmp)
    return [
        sorted(csv.input_files()),
        sorted(csv.map(lambda r: r).input_files()),
        m.from_items([1]).input_files(),
        m.range(10).size_bytes(),
        m.from_items([{"x": float(i)} for i in range(10)]).size_bytes(),
        csv.size_bytes() > 0,
        m.range(10, override_num_blocks=2).materialize().num_blocks(),
        _raises(lambda: m.range(10).num_blocks()),
    ]


@case("read_numpy", "Dataset.write_numpy", "read_images", "Dataset.write_images")
def numpy_and_images_round_trip(m, tmp):
    """write_numpy/read_numpy and write_images/read_images keep values and shapes"""
    import numpy as np

    m.from_numpy(np.arange(12).reshape(6, 2)).write_numpy(tmp / "n", column="data", mode="append")
    images = [{"image": np.full((2, 3, 3), i, np.uint8)} for i in range(2)]
    m.from_items(images).write_images(tmp / "i", column="image", mode="append")
    back = m.read_numpy(tmp / "n").take_batch(10)["data"]
    pixels = sorted(int(r["image"][0, 0, 0]) for r in m.read_images(tmp / "i").take_all())
    return sorted(map(tuple, back.tolist())), pixels, m.read_images(tmp / "i").schema().names


def _text_rows(count):
    """Rows of the kinds shardflow's C parsers read (ints, doubles, strings with quotes,
    commas and non-ASCII letters, nulls), enough for several 2 MiB chunks of a file."""
    rows = []
    for i in range(count):
        rows.append(
            {
                "id": i,
                "x": None if i % 13 == 0 else (i * 7919 % 10007) / 3.0 - 1000,
                "label": f'item "{i}", é{i % 97}',
                "n": None if i % 5 == 0 else i % 11 - 5,
            }
        )
    return rows


@case("read_csv", "read_json")
def csv_and_json_lines_of_numbers_and_strings(m, tmp):
    """CSV and JSON Lines of numbers, strings and nulls over several chunks: rows and types
    (read_json without lines=: Ray Data reads lines=True through pandas, a documented
    difference, see test_documented_differences.py)"""
    import csv

    rows = _text_rows(40_000)
    with open(tmp / "rows.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    with open(tmp / "rows.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
    return [
        m.read_json(tmp / "rows.jsonl").take_batch(50_000, batch_format="pyarrow"),
        m.read_csv(tmp / "rows.csv").take_batch(50_000, batch_format="pyarrow"),
    ]


@case("read_parquet", slow=True)
def parquet_dictionary_encoded_strings(m, tmp):
    """dictionary-encoded string and binary columns (nulls, several row groups, a chunk the
    writer fell back to plain pages for) come back as plain strings and bytes"""
    n = 300
    words = [None if i % 7 == 0 else f"word {i % 5}" for i in range(n)]
    table = pa.table(
        {
            "label": words,
            "raw": pa.array([None if w is None else w.encode() for w in words], pa.binary()),
            "unique": [f"value number {i}" for i in range(n)],
            "s.a": [f"dotted {i % 3}" for i in range(n)],
            "s": pa.array([{"a": f"child {i % 2}"} for i in range(n)]),
        }
    )
    path = tmp / "strings.parquet"
    pq.write_table(table, path, row_group_size=64, dictionary_pagesize_limit=256)
    ds = m.read_parquet(path)
    return [
        str(ds.take_batch(n, batch_format="pyarrow").schema),
        ds.take_all(),
        m.read_parquet(path, columns=["raw", "label"]).take_all()[:10],
    ]
