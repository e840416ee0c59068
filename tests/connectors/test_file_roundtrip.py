"""Every file connector round-trips on local disk, S3 and GCS, and on both backends.

Oracles: the original pandas DataFrame, and the written files read back independently with
pyarrow/pandas through fsspec.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import shardflow as sf

N = 500


def make_frame(n: int = N) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "score": rng.random(n),
            "name": [f"name-{i % 37}" for i in range(n)],
            "flag": (np.arange(n) % 3 == 0),
        }
    )


def sorted_frame(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values("id").reset_index(drop=True)


def read_back_independently(store, folder: str, fmt: str) -> pd.DataFrame:
    """The written files, read with pyarrow/pandas directly (not through shardflow)."""
    fs = store.fs
    frames = []
    for rel in store.data_files(folder):
        assert not rel.startswith("."), f"staging left behind: {rel}"
        with fs.open(fs._strip_protocol(store.path(folder, rel)), "rb") as f:
            data = f.read()
        if fmt == "parquet":
            frames.append(pq.read_table(io.BytesIO(data)).to_pandas())
        elif fmt == "csv":
            frames.append(pacsv.read_csv(io.BytesIO(data)).to_pandas())
        else:
            frames.append(
                pd.DataFrame([json.loads(line) for line in data.decode().splitlines() if line])
            )
    return pd.concat(frames, ignore_index=True)


def write(ds, fmt: str, path: str, **kwargs):
    getattr(ds, f"write_{fmt}")(path, **kwargs)


def read(fmt: str, path, **kwargs):
    return getattr(sf, f"read_{fmt}")(path, **kwargs)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_round_trip_on_every_store(store, fmt):
    df = make_frame()
    folder = store.path("out")
    write(sf.from_pandas(df, override_num_blocks=3), fmt, folder, **store.options())

    files = store.data_files("out")
    assert len(files) == 3 and all(f.endswith(f".{fmt}") for f in files)
    independent = sorted_frame(read_back_independently(store, "out", fmt))
    pd.testing.assert_frame_equal(independent, df, check_dtype=False)

    got = sorted_frame(read(fmt, folder, **store.options()).to_arrow().to_pandas())
    pd.testing.assert_frame_equal(got, df)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_round_trip_on_both_backends(backend, tmp_path, fmt):
    df = make_frame(2000)
    folder = str(tmp_path / "out")
    write(sf.from_pandas(df, override_num_blocks=4), fmt, folder)
    ds = read(fmt, folder)
    got = sorted_frame(ds.to_arrow().to_pandas())
    pd.testing.assert_frame_equal(got, df)
    assert ds.filter(sf.col("id") < 10).count() == 10
    assert ds.sum("id") == df["id"].sum()


def test_text_round_trip_on_every_store(store):
    docs = {
        "a.txt": "first line\nsecond line\n\nafter a blank\n",
        "b.txt": "windows\r\nline ends\r\n",
        "nested/c.txt": "no final newline",
    }
    for rel, text in docs.items():
        store.write_bytes(f"text/{rel}", text.encode())
    ds = sf.read_text(store.path("text"), **store.options())
    expected = [line for rel in sorted(docs) for line in docs[rel].splitlines() if line]
    assert sorted(r["text"] for r in ds.take_all()) == sorted(expected)

    kept = sf.read_text(store.path("text"), drop_empty_lines=False, **store.options())
    expected_all = [line for rel in sorted(docs) for line in docs[rel].splitlines()]
    assert sorted(r["text"] for r in kept.take_all()) == sorted(expected_all)


def test_binary_round_trip_on_every_store(store):
    rng = np.random.default_rng(3)
    blobs = {f"blob{i}.bin": rng.bytes(int(rng.integers(0, 5000))) for i in range(5)}
    for rel, data in blobs.items():
        store.write_bytes(f"bin/{rel}", data)
    ds = sf.read_binary_files(store.path("bin"), include_paths=True, **store.options())
    rows = ds.take_all()
    assert {r["path"].rsplit("/", 1)[-1]: r["bytes"] for r in rows} == blobs
    assert ds.count() == len(blobs)
    assert all(
        r["path"].startswith(store.root.split("://")[0]) or store.kind == "local" for r in rows
    )


@pytest.mark.parametrize("fmt", ["text", "binary_files"])
def test_text_and_binary_on_both_backends(backend, tmp_path, fmt):
    folder = tmp_path / "in"
    folder.mkdir()
    lines = [f"line {i}" for i in range(300)]
    for k in range(3):
        (folder / f"part{k}.txt").write_text("\n".join(lines[k::3]) + "\n")
    ds = getattr(sf, f"read_{fmt}")(str(folder))
    if fmt == "text":
        assert sorted(r["text"] for r in ds.take_all()) == sorted(lines)
    else:
        got = sorted(r["bytes"] for r in ds.take_all())
        assert got == sorted((folder / f"part{k}.txt").read_bytes() for k in range(3))


def test_memory_filesystem_round_trip():
    df = make_frame(100)
    root = "memory://shardflow-tests/roundtrip"
    sf.from_pandas(df, override_num_blocks=2).write_parquet(root, mode="overwrite")
    got = sorted_frame(sf.read_parquet(root).to_arrow().to_pandas())
    pd.testing.assert_frame_equal(got, df)


def test_pyarrow_filesystem_is_accepted(tmp_path):
    import pyarrow.fs as pafs

    df = make_frame(50)
    sf.from_pandas(df).write_csv(str(tmp_path / "out"), filesystem=pafs.LocalFileSystem())
    got = sorted_frame(
        sf.read_csv(str(tmp_path / "out"), filesystem=pafs.LocalFileSystem()).to_arrow().to_pandas()
    )
    pd.testing.assert_frame_equal(got, df)


def test_registry_names_reach_the_file_connectors(tmp_path):
    df = make_frame(40)
    folder = str(tmp_path / "out")
    sf.from_pandas(df).write_datasink("parquet", path=folder)
    got = sorted_frame(sf.read_datasource("parquet", paths=folder).to_arrow().to_pandas())
    pd.testing.assert_frame_equal(got, df)
    for name in ("csv", "json", "text", "binary"):
        assert sf.sdk.get_registry().get(name).datasource is not None


def test_json_reads_arrays_and_single_objects(tmp_path):
    rows = [{"a": i, "b": f"x{i}"} for i in range(5)]
    (tmp_path / "array.json").write_text(json.dumps(rows, indent=2))
    (tmp_path / "lines.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "one.json").write_text(json.dumps({"a": 99, "b": "solo"}, indent=2))
    for name, expected in (
        ("array.json", rows),
        ("lines.jsonl", rows),
        ("one.json", [{"a": 99, "b": "solo"}]),
    ):
        assert sf.read_json(str(tmp_path / name)).take_all() == expected
    assert sf.read_json(str(tmp_path / "lines.jsonl"), lines=True).take_all() == rows
    assert sf.read_json(str(tmp_path / "array.json"), lines=False).take_all() == rows


def test_csv_options_and_compression(tmp_path):
    import gzip

    text = "a;b\n1;x\n2;y\n"
    (tmp_path / "plain.csv").write_text(text)
    with gzip.open(tmp_path / "packed.csv.gz", "wt") as f:
        f.write(text)
    ds = sf.read_csv(str(tmp_path), parse_options=pacsv.ParseOptions(delimiter=";"))
    assert sorted(r["a"] for r in ds.take_all()) == [1, 1, 2, 2]
    typed = sf.read_csv(
        str(tmp_path / "plain.csv"),
        parse_options=pacsv.ParseOptions(delimiter=";"),
        schema=pa.schema([("a", pa.float64()), ("b", pa.string())]),
    )
    assert typed.to_arrow().schema.field("a").type == pa.float64()


def test_gcs_scheme_alias(gcs_bucket, gcs_options):
    df = make_frame(30)
    folder = gcs_bucket.replace("gs://", "gcs://") + "/alias"
    sf.from_pandas(df).write_json(folder, storage_options=gcs_options)
    got = sorted_frame(
        sf.read_json(gcs_bucket + "/alias", storage_options=gcs_options).to_arrow().to_pandas()
    )
    pd.testing.assert_frame_equal(got, df)


def test_import_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, shardflow\n"
        "heavy = [m for m in ('s3fs', 'gcsfs', 'pyarrow.dataset', 'fsspec') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_pyarrow_s3_filesystem_round_trip(s3_bucket, s3_endpoint, s3_options):
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(
        access_key=s3_options["key"],
        secret_key=s3_options["secret"],
        region="us-east-1",
        endpoint_override=s3_endpoint.replace("http://", ""),
        scheme="http",
    )
    df = make_frame(60)
    folder = s3_bucket + "/arrowfs"
    sf.from_pandas(df, override_num_blocks=2).write_parquet(folder, filesystem=fs)
    selector = pafs.FileSelector(folder[5:], recursive=True)
    names = sorted(i.base_name for i in fs.get_file_info(selector) if i.is_file)
    assert len(names) == 3 and "_SUCCESS" in names  # two files and _SUCCESS
    got = sorted_frame(sf.read_parquet(folder, filesystem=fs).to_arrow().to_pandas())
    pd.testing.assert_frame_equal(got, df)
