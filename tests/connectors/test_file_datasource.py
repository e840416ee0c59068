"""The shared file layer: path expansion, planning, partitions, bad files, retries, secrets."""

from __future__ import annotations

import json
import logging
import os
import pickle

import cloudpickle
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.connectors.csv import CSVDatasource
from shardflow.connectors.text import TextDatasource
from shardflow.sdk.file_datasource import FileBasedDatasource, FileShuffleConfig, group_by_size
from shardflow.sdk.file_reading import FileUnit
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.retry import RetryConfig, call_with_retry, is_transient_error


def write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(path, index=False)


def ids(ds):
    return sorted(r["id"] for r in ds.take_all())


@pytest.fixture
def tree(tmp_path):
    """root/a.csv, root/sub/b.csv, root/sub/deeper/c.csv, plus hidden files and folders."""
    root = tmp_path / "root"
    write_csv(root / "a.csv", [{"id": 1}])
    write_csv(root / "sub" / "b.csv", [{"id": 2}])
    write_csv(root / "sub" / "deeper" / "c.csv", [{"id": 3}])
    write_csv(root / "_tmp" / "hidden.csv", [{"id": 100}])
    write_csv(root / ".staging" / "hidden.csv", [{"id": 101}])
    (root / "_SUCCESS").write_text("")
    (root / ".crc").write_text("junk")
    (root / "notes.md").write_text("not data")
    return root


def test_expansion_of_files_folders_globs_and_lists(tree):
    assert ids(sf.read_csv(str(tree))) == [1, 2, 3]
    assert ids(sf.read_csv(str(tree / "sub" / "b.csv"))) == [2]
    assert ids(sf.read_csv(str(tree / "sub" / "**" / "*.csv"))) == [2, 3]
    assert ids(sf.read_csv(str(tree / "*.csv"))) == [1]
    assert ids(sf.read_csv([str(tree / "a.csv"), str(tree / "sub" / "deeper")])) == [1, 3]
    assert ids(sf.read_csv("file://" + str(tree / "a.csv"))) == [1]
    # explicit hidden file is read when named; extension filter can be lifted
    assert ids(sf.read_csv(str(tree / "_tmp" / "hidden.csv"))) == [100]
    # read_csv reads every file by default, as Ray Data (notes.md: a header and no rows);
    # an extension filter refuses a named file that does not match it.
    assert sf.read_csv(str(tree / "notes.md")).count() == 0
    with pytest.raises(ValueError, match="extensions"):
        sf.read_csv(str(tree / "notes.md"), file_extensions=["csv"])


def test_missing_paths(tree):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        sf.read_csv(str(tree / "nope.csv"))
    with pytest.raises(FileNotFoundError, match="zzz"):
        sf.read_csv(str(tree / "zzz*.csv"))
    ds = sf.read_csv([str(tree / "a.csv"), str(tree / "nope.csv")], ignore_missing_paths=True)
    assert ids(ds) == [1]


def test_empty_folder_gives_empty_dataset_and_warning(tmp_path, caplog):
    (tmp_path / "empty").mkdir()
    with caplog.at_level(logging.WARNING):
        ds = sf.read_parquet(str(tmp_path / "empty"))
    assert ds.count() == 0 and ds.take_all() == []
    assert any(
        "No files to read" in r.getMessage() and "empty" in r.getMessage() for r in caplog.records
    )


def test_ten_thousand_small_files_plan_and_group(tmp_path):
    """How fast the planning is: benchmarks/timing_checks.py (no timing in the test suite)."""
    root = tmp_path / "many"
    for i in range(100):
        folder = root / f"d{i:03d}"
        folder.mkdir(parents=True)
        for j in range(100):
            with open(folder / f"f{j:03d}.txt", "w") as f:
                f.write(f"{i * 100 + j}\n")
    ds = TextDatasource(str(root))
    tasks = ds.get_read_tasks(16)
    assert len(tasks) == 16
    assert sum(len(t.metadata.input_files) for t in tasks) == 10_000
    # the tasks do not carry the whole listing
    assert len(cloudpickle.dumps(tasks[0])) < 200_000
    # reading a few tasks gives their files' lines
    rows = [b.to_pylist() for b in tasks[0]()]
    assert sum(len(r) for r in rows) == len(tasks[0].metadata.input_files)


def test_grouping_balances_sizes_and_never_exceeds_files():
    units = [FileUnit(f"f{i}", size) for i, size in enumerate([100, 1, 1, 1, 1, 100, 50, 50])]
    groups = group_by_size(units, 3)
    sums = [sum(u.size for u in g) for g in groups]
    assert sum(sums) == 304 and max(sums) - min(sums) <= 5, sums
    assert [u.path for g in groups for u in g] == [u.path for u in units]  # order kept
    assert len(group_by_size(units[:2], 10)) == 2
    assert group_by_size([], 4) == []


def test_include_paths_and_shuffle(tree):
    rows = sf.read_csv(str(tree), include_paths=True).take_all()
    assert {os.path.basename(r["path"]): r["id"] for r in rows} == {
        "a.csv": 1,
        "b.csv": 2,
        "c.csv": 3,
    }

    files = [tree / f"s{i}.csv" for i in range(20)]
    for i, f in enumerate(files):
        write_csv(f, [{"id": 10 + i}])
    order = lambda ds: [r["id"] for r in ds.take_all()]  # noqa: E731
    seeded = order(sf.read_csv([str(f) for f in files], shuffle=FileShuffleConfig(seed=5)))
    assert seeded == order(sf.read_csv([str(f) for f in files], shuffle=FileShuffleConfig(seed=5)))
    assert sorted(seeded) == list(range(10, 30)) and seeded != list(range(10, 30))
    assert sorted(order(sf.read_csv([str(f) for f in files], shuffle="files"))) == list(
        range(10, 30)
    )
    with pytest.raises(ValueError, match="shuffle"):
        sf.read_csv(str(tree), shuffle="rows")


def test_hive_and_dir_partitioning(tmp_path):
    for year in (2023, 2024):
        for region in ("eu", "us"):
            write_csv(
                tmp_path / "hive" / f"year={year}" / f"region={region}" / "p.csv",
                [{"v": year * 10}],
            )
            write_csv(tmp_path / "dirs" / str(year) / region / "p.csv", [{"v": year * 10}])
    table = sf.read_csv(str(tmp_path / "hive")).to_arrow()
    assert (  # partition values are strings unless field_types says otherwise, as in Ray Data
        table.schema.field("year").type == pa.string()
        and table.schema.field("region").type == pa.string()
    )
    assert sorted(zip(table["year"].to_pylist(), table["region"].to_pylist())) == [
        ("2023", "eu"),
        ("2023", "us"),
        ("2024", "eu"),
        ("2024", "us"),
    ]

    typed = sf.read_csv(
        str(tmp_path / "hive"), partitioning=Partitioning("hive", field_types={"year": int})
    )
    assert typed.to_arrow().schema.field("year").type == pa.int64()
    assert (
        "year" not in sf.read_csv(str(tmp_path / "hive"), partitioning=None).to_arrow().column_names
    )

    dirs = sf.read_csv(
        str(tmp_path / "dirs"),
        partitioning=Partitioning(
            "dir", field_names=["year", "region"], base_dir=str(tmp_path / "dirs")
        ),
        partition_filter=PathPartitionFilter.of(
            lambda p: p["region"] == "eu",
            style="dir",
            field_names=["year", "region"],
            base_dir=str(tmp_path / "dirs"),
        ),
    )
    assert sorted((r["year"], r["region"]) for r in dirs.take_all()) == [
        ("2023", "eu"),
        ("2024", "eu"),
    ]
    with pytest.raises(ValueError, match="field_names"):
        Partitioning("dir")


CORRUPT = {
    "csv": (b"id,name\n1,a\n2,b\n", b"id,name\n1,a\n2,b,EXTRA,COLUMNS\n3,c\n"),
    "json": (b'{"id": 1}\n{"id": 2}\n', b'{"id": 1}\n{"id": 2, oops\n'),
    "text": (b"one\ntwo\n", b"\xff\xfe\xfa broken utf-8\n"),
}


@pytest.mark.parametrize("fmt", sorted(CORRUPT))
def test_corrupt_file_raises_naming_it_or_is_skipped_and_counted(tmp_path, fmt, caplog):
    good, bad = CORRUPT[fmt]
    ext = {"csv": "csv", "json": "jsonl", "text": "txt"}[fmt]
    (tmp_path / f"good.{ext}").write_bytes(good)
    (tmp_path / f"bad.{ext}").write_bytes(bad)
    read = getattr(sf, f"read_{fmt}")
    with pytest.raises(Exception) as info:
        read(str(tmp_path)).take_all()
    assert f"bad.{ext}" in str(info.value)

    ds = read(str(tmp_path), on_bad_file="skip")
    with caplog.at_level(logging.WARNING):
        rows = ds.take_all()
    assert len(rows) == 2  # all of the good file, nothing of the bad one
    assert "1 bad files skipped" in ds.stats()
    assert any(f"bad.{ext}" in r.getMessage() for r in caplog.records)


def test_skipped_files_are_counted_on_both_backends(backend, tmp_path):
    for i in range(3):
        (tmp_path / f"good{i}.csv").write_text("x\n1\n2\n")
        (tmp_path / f"bad{i}.csv").write_text("x\n1\n2,3\n")
    ds = sf.read_csv(str(tmp_path), on_bad_file="skip")
    assert ds.sum("x") == 9
    assert "3 bad files skipped" in ds.stats()
    assert sum(op.skipped_files for op in ds._last_stats.operators) == 3


def test_transient_open_failures_are_retried(tmp_path, instrumented_fs, fast_retries):
    for i in range(3):
        write_csv(tmp_path / f"p{i}.csv", [{"id": i * 10 + k} for k in range(10)])
    fs = instrumented_fs(fail_opens=2)
    assert (
        ids(sf.read_csv(str(tmp_path), filesystem=fs)) == list(range(30)) and fs.open_failures == 2
    )


def test_retry_in_the_middle_of_a_file_loses_and_duplicates_nothing(
    tmp_path, instrumented_fs, fast_retries
):
    import pyarrow.csv as pacsv

    n = 20_000
    write_csv(tmp_path / "big.csv", [{"id": i, "text": f"row {i}"} for i in range(n)])
    fs = instrumented_fs(fail_reads=2, fail_reads_after=100_000)
    fast_retries.target_min_block_size = 1  # hand blocks downstream before the fault
    ds = sf.read_csv(
        str(tmp_path / "big.csv"), filesystem=fs, read_options=pacsv.ReadOptions(block_size=16_384)
    )
    got = [r["id"] for r in ds.take_all()]
    assert fs.read_failures == 2
    assert got == list(range(n))


def test_persistent_transient_failure_names_the_file(tmp_path, instrumented_fs, fast_retries):
    write_csv(tmp_path / "a.csv", [{"id": 1}])
    fs = instrumented_fs(fail_opens=100)
    with pytest.raises(Exception) as info:
        sf.read_csv(str(tmp_path), filesystem=fs, on_bad_file="skip").take_all()
    assert "a.csv" in str(info.value) and "after 4 attempts" in str(info.value)


def test_retry_helpers():
    assert is_transient_error(TimeoutError("slow"))
    assert is_transient_error(OSError("503 SlowDown: Please reduce your request rate"))
    assert not is_transient_error(FileNotFoundError("s3://b/k"))
    assert not is_transient_error(ValueError("bad data"))
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset")
        return "ok"

    assert (
        call_with_retry(flaky, description="x", config=RetryConfig(5, 0.0, 0.0)) == "ok"
        and len(calls) == 3
    )
    with pytest.raises(ValueError):
        RetryConfig(max_attempts=0)


def test_secrets_never_appear_in_errors_reprs_or_logs(s3_bucket, s3_options, caplog):
    from shardflow.sdk.filesystems import redact

    secret = s3_options["secret"]
    errors = []
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(FileNotFoundError) as info:
            sf.read_parquet(f"{s3_bucket}/missing/", storage_options=s3_options)
        errors.append(info.value)

        sf.from_items([{"x": 1}]).write_csv(f"{s3_bucket}/bad", storage_options=s3_options)
        with pytest.raises(FileExistsError) as info:
            sf.from_items([{"x": 1}]).write_csv(
                f"{s3_bucket}/bad", mode="error", storage_options=s3_options
            )
        errors.append(info.value)

        import fsspec

        with fsspec.filesystem("s3", **s3_options).open(f"{s3_bucket}/bad/broken.csv", "wb") as f:
            f.write(b"x\n1\n2,3,4\n")
        ds = sf.read_csv(f"{s3_bucket}/bad", storage_options=s3_options)
        with pytest.raises(Exception) as info:
            ds.take_all()
        errors.append(info.value)
        assert "broken.csv" in str(info.value)
        sf.read_csv(f"{s3_bucket}/bad", storage_options=s3_options, on_bad_file="skip").take_all()

    for error in errors:
        assert secret not in str(error) and secret not in repr(error)
    datasource = CSVDatasource(f"{s3_bucket}/bad", storage_options=s3_options)
    assert secret not in repr(datasource) and secret not in str(datasource)
    assert secret not in ds.stats() and secret not in repr(ds)
    assert all(secret not in record.getMessage() for record in caplog.records)
    assert redact("s3://AKIA:" + secret + "@bucket/k.csv") == "s3://bucket/k.csv"


def test_datasource_pickles_and_validates(tree):
    ds = CSVDatasource(str(tree))
    ds.get_read_tasks(2)
    clone = pickle.loads(pickle.dumps(ds))
    assert clone._units is None and ids(sf.read_datasource(clone)) == [1, 2, 3]
    with pytest.raises(ValueError, match="on_bad_file"):
        CSVDatasource(str(tree), on_bad_file="ignore")
    with pytest.raises(TypeError, match="paths"):
        CSVDatasource(123)
    with pytest.raises(TypeError, match="Unknown arguments"):
        CSVDatasource(str(tree), delimiter=";")
    with pytest.raises(ValueError, match="one filesystem"):
        CSVDatasource(["s3://bucket/a.csv", str(tree)])

    class Lines(FileBasedDatasource):
        def _read_stream(self, f, path):
            yield pa.table({"n": [len(f.read().splitlines())]})

    assert sorted(
        r["n"] for r in sf.read_datasource(Lines(str(tree), file_extensions=["csv"])).take_all()
    ) == [2, 2, 2]


def test_schema_argument_casts_and_fills_nulls(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"a": 1}) + "\n")
    schema = pa.schema([("a", pa.float64()), ("b", pa.string())])
    table = sf.read_json(str(tmp_path), schema=schema).to_arrow()
    assert table.schema == schema and table.to_pylist() == [{"a": 1.0, "b": None}]
