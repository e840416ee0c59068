"""CSV and JSON reads of several files whose column types conflict fail naming both files and
the column; columns that only differ (missing, null, int and float) combine as before."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import shardflow as sf
from shardflow.sdk.schema_conflicts import ArrowConversionError, ReferenceSchema


def _write_csv(folder, name, text):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def _write_jsonl(folder, name, rows):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_csv_int_in_one_file_string_in_another(tmp_path, backend):
    folder = tmp_path / "csv"
    _write_csv(folder, "a.csv", "id,v\n1,10\n2,20\n")
    _write_csv(folder, "b.csv", "id,v\n3,x\n4,y\n")
    with pytest.raises(ArrowConversionError) as info:
        sf.read_csv(str(folder)).to_pandas()
    message = str(info.value)
    assert "a.csv" in message and "b.csv" in message
    assert "'v'" in message and "int64" in message and "string" in message


def test_json_lines_number_in_one_file_string_in_another(tmp_path):
    folder = tmp_path / "json"
    _write_jsonl(folder, "a.jsonl", [{"id": 1, "v": 10}])
    _write_jsonl(folder, "b.jsonl", [{"id": 2, "v": "x"}])
    with pytest.raises(ArrowConversionError, match=r"'v'.*b\.jsonl.*a\.jsonl"):
        sf.read_json(str(folder), lines=True).take_all()


def test_conflict_seen_after_the_start_of_a_later_file(tmp_path):
    folder = tmp_path / "late"
    _write_csv(folder, "a.csv", "id,v\n" + "".join(f"{i},{i}\n" for i in range(100)))
    _write_csv(folder, "b.csv", "id,v\n" + "".join(f"{i},s{i}\n" for i in range(100)))
    _write_csv(folder, "c.csv", "id,v\n1,2\n")
    with pytest.raises(ArrowConversionError, match=r"b\.csv"):
        sf.read_csv(str(folder), override_num_blocks=1).materialize()


def test_columns_that_only_differ_still_combine(tmp_path):
    folder = tmp_path / "ok"
    _write_csv(folder, "a.csv", "id,v,only_a\n1,10,a\n2,20,b\n")
    _write_csv(folder, "b.csv", "id,v,only_b\n3,0.5,\n4,,7\n")
    got = sf.read_csv(str(folder)).to_pandas().sort_values("id").reset_index(drop=True)
    expected = (
        pd.concat([pd.read_csv(folder / "a.csv"), pd.read_csv(folder / "b.csv")])
        .sort_values("id")
        .reset_index(drop=True)
    )
    assert sorted(got.columns) == sorted(expected.columns)
    assert got["v"].tolist()[:3] == expected["v"].tolist()[:3] == [10.0, 20.0, 0.5]
    assert got["v"].isna().tolist() == expected["v"].isna().tolist()
    assert got["only_a"].tolist()[:2] == ["a", "b"]


def test_column_types_given_resolve_the_conflict(tmp_path):
    folder = tmp_path / "typed"
    _write_csv(folder, "a.csv", "id,v\n1,10\n")
    _write_csv(folder, "b.csv", "id,v\n2,x\n")
    options = pacsv.ConvertOptions(column_types={"v": pa.string()})
    rows = sf.read_csv(str(folder), convert_options=options).take_all()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, "10"), (2, "x")]


def test_reference_check_is_quiet_for_its_own_file_and_compatible_types():
    reference = ReferenceSchema("a.csv", pa.schema([("v", pa.int64()), ("w", pa.null())]))
    reference.check(pa.schema([("v", pa.string())]), "a.csv")  # its own file: not compared
    reference.check(pa.schema([("v", pa.float64()), ("w", pa.string())]), "b.csv")
    with pytest.raises(ArrowConversionError, match="'v' is timestamp"):
        reference.check(pa.schema([("v", pa.timestamp("s"))]), "c.csv")
