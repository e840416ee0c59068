"""Differential cases: how reads and writes take paths."""

from __future__ import annotations

import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
from harness import case


def _parquet(tmp: pathlib.Path, name: str = "f.parquet", rows: int = 3) -> pathlib.Path:
    path = tmp / "in" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"a": list(range(rows)), "b": [str(i) for i in range(rows)]}), path)
    return path


@case("read_parquet", "Dataset.count")
def read_takes_str_path_and_lists(m, tmp):
    """str, pathlib.Path and lists of either; a repeated path is read again"""
    f = _parquet(tmp)
    return [
        m.read_parquet(str(f)).count(),
        m.read_parquet(f).count(),
        m.read_parquet([f, str(f)]).count(),
        m.read_parquet([str(f), str(f), str(f)]).count(),
    ]


@case("read_parquet", "read_csv", "read_json", "read_text", "read_binary_files")
def read_takes_local_and_file_uris(m, tmp):
    """local:// (absolute path on the driver) and file:// URIs, for each format"""
    f = _parquet(tmp)
    csv, jsonl, text = tmp / "in" / "a.csv", tmp / "in" / "a.json", tmp / "in" / "a.txt"
    csv.write_text("x\n1\n2\n")
    jsonl.write_text('{"x": 1}\n{"x": 2}\n')
    text.write_text("one\ntwo\n")
    out = []
    for scheme in ("local://", "file://"):
        out.append(m.read_parquet(scheme + str(f)).count())
        out.append(m.read_csv(scheme + str(csv)).take_all())
        out.append(m.read_json(scheme + str(jsonl)).take_all())
        out.append(m.read_text(scheme + str(text)).take_all())
        out.append(m.read_binary_files(scheme + str(text)).take_all())
    return out


@case("Dataset.write_parquet", "Dataset.write_csv", "Dataset.write_json", slow=True)
def write_takes_path_and_uris(m, tmp):
    """writes take pathlib.Path, a list of one path, and file:// URIs"""
    ds = m.from_items([{"a": 1}, {"a": 2}])
    ds.write_parquet(tmp / "p", mode="append")
    ds.write_csv([str(tmp / "c")], mode="append")
    ds.write_json("file://" + str(tmp / "j"), mode="append")
    rows = lambda ds: sorted(r["a"] for r in ds.take_all())  # noqa: E731 - file order varies
    return [
        rows(m.read_parquet(tmp / "p")),
        rows(m.read_csv(tmp / "c")),
        rows(m.read_json(tmp / "j")),
    ]


@case("read_parquet")
def missing_path_raises(m, tmp):
    """a missing path raises FileNotFoundError at the read call"""
    try:
        m.read_parquet(str(tmp / "nope.parquet"))
    except Exception as exc:
        from harness import Raised, exception_kind

        return Raised(exception_kind(exc))
    return "no error"


@case("Dataset.write_parquet")
def write_parquet_round_trip_of_numbers_and_strings(m, tmp):
    """ids, random floats, codes and strings written and read back (rows and Arrow types)"""
    import numpy as np

    rng = np.random.default_rng(5)
    n = 20_000
    table = pa.table(
        {
            "id": np.arange(n),
            "x": rng.random(n),
            "code": rng.integers(0, 40, n),
            "name": [f"n{i % 9}" for i in range(n)],
        }
    )
    m.from_arrow(table).write_parquet(tmp / "out", mode="append")
    back = pq.read_table(tmp / "out").sort_by("id")
    return [str(back.schema.remove_metadata()), back.equals(table)]


@case("Dataset.write_parquet", "read_parquet")
def write_parquet_round_trip_of_flat_types_with_nulls(m, tmp):
    """narrow and wide integers, floats, dates, zoned timestamps, strings, large strings and
    binary, with nulls and repeated values, written and read back (rows and Arrow types)"""
    import numpy as np

    rng = np.random.default_rng(6)
    n = 3_000
    nulls = rng.random(n) < 0.1
    table = pa.table(
        {
            "i": np.arange(n),
            "i8": pa.array(rng.integers(-5, 5, n).astype(np.int8), mask=nulls),
            "u16": pa.array(rng.integers(0, 60_000, n).astype(np.uint16)),
            "f32": pa.array(rng.random(n).astype(np.float32), mask=nulls),
            "day": pa.array(rng.integers(0, 30, n).astype(np.int32)).view(pa.date32()),
            "at": pa.array(rng.integers(0, 2**50, n)).view(pa.timestamp("us", "UTC")),
            "word": pa.array([f"w{i % 13}" for i in range(n)], mask=nulls),
            "text": pa.array([f"t{i}" * (i % 4) for i in range(n)], pa.large_string()),
            "raw": pa.array([bytes([i % 256]) * (i % 5) for i in range(n)]),
        }
    )
    m.from_arrow(table).write_parquet(tmp / "out", mode="append")
    back = pq.read_table(tmp / "out").sort_by("i")
    return [
        str(back.schema.remove_metadata()),
        back.equals(table),
        m.read_parquet(str(tmp / "out")).count(),
    ]


@case("Dataset.write_parquet")
def write_parquet_row_group_size_zero_raises(m, tmp):
    """row_group_size=0 raises pyarrow.ArrowInvalid (shardflow at the call, Ray Data in the
    write)"""
    try:
        m.from_items([{"a": 1}]).write_parquet(str(tmp / "out"), row_group_size=0)
    except Exception as exc:
        from harness import Raised, exception_kind

        return Raised(exception_kind(exc))
    return "no error"


@case("read_parquet", "read_csv", slow=True)
def read_folders_whose_names_hold_glob_characters(m, tmp):
    """a folder named like a glob (br[1], a*b) is read as the folder it is"""
    out = []
    for name in ("br[1]", "a*b"):
        folder = tmp / name
        folder.mkdir()
        pq.write_table(pa.table({"a": [1, 2]}), folder / "f.parquet")
        (folder / "f.csv").write_text("x\n3\n")
        out.append(m.read_parquet(str(folder / "f.parquet")).take_all())
        out.append(m.read_csv(str(folder / "f.csv")).take_all())
    return out
