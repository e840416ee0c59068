"""All-or-nothing file writes, write modes, hive partitioned writes and file sizing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.sdk.file_datasink import FilenameProvider


def frame(n: int, start: int = 0) -> pd.DataFrame:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pd.DataFrame({"id": ids, "group": ids % 3, "label": [f"l{i % 2}" for i in ids]})


class FailOnBlock:
    """A map_batches function that raises on the block starting at ``first_id``."""

    def __init__(self, first_id: int):
        self.first_id = first_id

    def __call__(self, batch):
        if int(batch["id"][0]) == self.first_id:
            raise RuntimeError("injected failure in the third block")
        return batch


def failing_dataset(n_blocks: int = 6, rows: int = 50):
    ds = sf.from_pandas(frame(n_blocks * rows, start=1000), override_num_blocks=n_blocks)
    return ds.map_batches(FailOnBlock(1000 + 2 * rows), batch_size=None)


def visible(listing):
    """The data files of a listing: without ``_SUCCESS`` (written by commits on object
    stores) and other hidden entries."""
    return [rel for rel in listing if not any(p.startswith(("_", ".")) for p in rel.split("/"))]


def contents(store, folder="out"):
    """{relative path: bytes} of everything under the folder."""
    fs = store.fs
    out = {}
    for rel in store.listing(folder):
        with fs.open(fs._strip_protocol(store.path(folder, rel)), "rb") as f:
            out[rel] = f.read()
    return out


@pytest.mark.parametrize("mode", ["append", "overwrite"])
@pytest.mark.parametrize("where", ["local", "s3"])
def test_failed_write_leaves_destination_unchanged(request, where, mode):
    store = request.getfixturevalue(f"{where}_store")
    folder = store.path("out")
    sf.from_pandas(frame(30), override_num_blocks=2).write_parquet(folder, **store.options())
    before = contents(store)
    assert len(visible(before)) == 2

    with pytest.raises(RuntimeError, match="injected failure"):
        failing_dataset().write_parquet(folder, mode=mode, **store.options())

    assert contents(store) == before  # same files, same bytes, no staging folder left


def test_failed_write_to_new_folder_creates_nothing(tmp_path):
    target = tmp_path / "never"
    with pytest.raises(RuntimeError, match="injected failure"):
        failing_dataset().write_csv(str(target))
    assert not target.exists()


def test_failed_write_on_ray_leaves_nothing(backend, tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.parquet").write_bytes(b"old")
    with pytest.raises(Exception, match="injected failure"):
        failing_dataset().write_json(str(target), mode="overwrite")
    assert sorted(p.name for p in target.iterdir()) == ["keep.parquet"]


def test_mode_error_refuses_existing_data_and_allows_empty_folder(store):
    folder = store.path("out")
    sf.from_pandas(frame(10)).write_csv(folder, mode="error", **store.options())
    before = contents(store)
    with pytest.raises(FileExistsError, match="already holds data"):
        sf.from_pandas(frame(5)).write_csv(folder, mode="error", **store.options())
    assert contents(store) == before


def test_mode_overwrite_replaces_and_append_adds(store):
    folder = store.path("out")
    opts = store.options()
    sf.from_pandas(frame(20), override_num_blocks=2).write_parquet(folder, **opts)
    sf.from_pandas(frame(7, start=100), override_num_blocks=1).write_parquet(
        folder, mode="overwrite", **opts
    )
    assert len(visible(store.listing("out"))) == 1
    got = (
        sf.read_parquet(folder, **opts)
        .to_arrow()
        .to_pandas()
        .sort_values("id")
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(got, frame(7, start=100))

    sf.from_pandas(frame(5, start=200)).write_parquet(folder, mode="append", **opts)
    got = (
        sf.read_parquet(folder, **opts)
        .to_arrow()
        .to_pandas()
        .sort_values("id")
        .reset_index(drop=True)
    )
    expected = pd.concat([frame(7, start=100), frame(5, start=200)], ignore_index=True)
    pd.testing.assert_frame_equal(got, expected)
    assert len(visible(store.listing("out"))) == 2
    assert ("_SUCCESS" in store.listing("out")) == (store.kind != "local")


def test_invalid_mode_and_arguments_are_rejected(tmp_path):
    ds = sf.from_pandas(frame(5))
    with pytest.raises(ValueError, match="mode must be one of"):
        ds.write_parquet(str(tmp_path), mode="replace")
    with pytest.raises(ValueError, match="min_rows_per_file"):
        ds.write_parquet(str(tmp_path), min_rows_per_file=0)
    with pytest.raises(ValueError, match="partition_cols"):
        ds.write_parquet(str(tmp_path / "x"), partition_cols=["nope"])
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(FileExistsError, match="is a file"):
        ds.write_parquet(str(tmp_path / "file.txt"))


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_partition_cols_round_trip(store, fmt):
    df = frame(90)
    folder = store.path("out")
    getattr(sf.from_pandas(df, override_num_blocks=3), f"write_{fmt}")(
        folder, partition_cols=["group", "label"], **store.options()
    )
    folders = {rel.rsplit("/", 1)[0] for rel in visible(store.listing("out"))}
    assert folders == {f"group={g}/label=l{k}" for g in range(3) for k in range(2)}

    got = getattr(sf, f"read_{fmt}")(folder, **store.options()).to_pandas()
    got = got[df.columns].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(
        got.drop(columns=["group"]), df.drop(columns=["group"]), check_dtype=False
    )
    assert got["group"].tolist() == [str(g) for g in df["group"]]  # strings, as in Ray Data

    some = getattr(sf, f"read_{fmt}")(
        folder, partition_filter=lambda p: p["group"] == "1", **store.options()
    )
    assert sorted(r["id"] for r in some.take_all()) == df[df.group == 1]["id"].tolist()


def test_partition_overwrite_replaces_all_partitions(tmp_path):
    folder = str(tmp_path / "out")
    sf.from_pandas(frame(30)).write_parquet(folder, partition_cols=["group"])
    sf.from_pandas(frame(4, start=3)).write_parquet(
        folder, partition_cols=["group"], mode="overwrite"
    )
    got = sf.read_parquet(folder).to_pandas().sort_values("id")
    assert got["id"].tolist() == [3, 4, 5, 6]


def test_min_rows_per_file_joins_blocks(tmp_path, fresh_context, backend):
    source = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pandas(frame(1000)), source, row_group_size=100)
    fresh_context.target_min_block_size = 1  # one block per row group
    ds = sf.read_parquet(str(source))

    ds.write_csv(str(tmp_path / "plain"))  # one read task, so one file
    assert len(list((tmp_path / "plain").iterdir())) == 1

    ds.write_csv(str(tmp_path / "sized"), min_rows_per_file=250)
    sizes = sorted(len(pd.read_csv(p)) for p in (tmp_path / "sized").iterdir())
    assert sum(sizes) == 1000 and len(sizes) < 10 and all(s >= 250 for s in sizes[1:])

    # blocks of different tasks are gathered too
    many = sf.from_pandas(frame(1000), override_num_blocks=10)
    many.write_parquet(str(tmp_path / "gathered"), min_rows_per_file=300)
    counts = sorted(pq.read_metadata(p).num_rows for p in (tmp_path / "gathered").iterdir())
    assert sum(counts) == 1000 and len(counts) <= 4 and all(c >= 300 for c in counts[1:])
    got = sf.read_parquet(str(tmp_path / "gathered")).to_pandas().sort_values("id")
    assert got["id"].tolist() == list(range(1000))


def test_filename_provider_and_default_names(tmp_path):
    class Named(FilenameProvider):
        def get_filename_for_block(self, block, write_uuid, task_index, block_index):
            return f"part-{task_index}-{block_index}.csv"

    sf.from_pandas(frame(20), override_num_blocks=2).write_csv(
        str(tmp_path / "named"), filename_provider=Named()
    )
    assert sorted(p.name for p in (tmp_path / "named").iterdir()) == [
        "part-0-0.csv",
        "part-1-0.csv",
    ]
    with pytest.raises(FileExistsError, match="filename_provider"):
        sf.from_pandas(frame(20), override_num_blocks=2).write_csv(
            str(tmp_path / "named"), filename_provider=Named()
        )
    assert sorted(p.name for p in (tmp_path / "named").iterdir()) == [
        "part-0-0.csv",
        "part-1-0.csv",
    ]

    sf.from_pandas(frame(20), override_num_blocks=2).write_csv(str(tmp_path / "default"))
    names = sorted(p.name for p in (tmp_path / "default").iterdir())
    uuid_part = names[0].split("_")[0]
    assert names == [f"{uuid_part}_000000.csv", f"{uuid_part}_000001.csv"]  # as Ray Data names


def test_empty_dataset_writes_no_files(tmp_path):
    sf.from_pandas(frame(10)).filter(sf.col("id") < 0).write_parquet(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # creates nothing, as Ray Data


def test_failed_write_had_staged_files_and_removed_them(tmp_path, monkeypatch):
    from shardflow.sdk.file_datasink import FileDatasink

    seen = {}
    original = FileDatasink.on_write_failed

    def spy(self, error):  # a new folder is staged beside it, to appear in one rename
        seen["staged"] = sorted(p.name for p in tmp_path.rglob("*.parquet") if p.is_file())
        original(self, error)

    monkeypatch.setattr(FileDatasink, "on_write_failed", spy)
    with pytest.raises(RuntimeError, match="injected failure"):
        failing_dataset().write_parquet(str(tmp_path / "out"))
    assert seen["staged"], "the other write tasks should have staged files before the failure"
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.iterdir())  # the staging folder beside it is gone too


def test_commit_failure_during_overwrite_rolls_back(tmp_path, monkeypatch):
    import fsspec.implementations.local as local

    folder = tmp_path / "out"
    sf.from_pandas(frame(30), override_num_blocks=2).write_parquet(str(folder))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    original_mv = local.LocalFileSystem.mv
    moves = []

    def failing_mv(self, path1, path2, *args, **kwargs):
        if ".shardflow-staging-" in str(path1):
            moves.append(path2)
            if len(moves) == 2:
                raise OSError("disk full (injected)")
        return original_mv(self, path1, path2, *args, **kwargs)

    monkeypatch.setattr(local.LocalFileSystem, "mv", failing_mv)
    with pytest.raises(OSError, match="disk full"):
        sf.from_pandas(frame(9, start=50), override_num_blocks=3).write_parquet(
            str(folder), mode="overwrite"
        )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_s3_round_trip_on_ray(backend, s3_store):
    df = frame(200)
    folder = s3_store.path("ray")
    sf.from_pandas(df, override_num_blocks=2).write_parquet(folder, **s3_store.options())
    got = (
        sf.read_parquet(folder, **s3_store.options())
        .to_arrow()
        .to_pandas()
        .sort_values("id")
        .reset_index(drop=True)
    )
    pd.testing.assert_frame_equal(got, df)


def test_parquet_writes_choose_dictionaries_by_how_often_values_repeat(tmp_path):
    rng = np.random.default_rng(7)
    n = 60_000
    codes = rng.integers(0, 1000, n)
    table = pa.table(
        {
            "id": np.arange(n),  # distinct
            "x": rng.random(n),  # distinct
            "code": codes,  # 1,000 values: 1 distinct in 16 of the sample
            # ~3,000 values: 1 distinct in 5 of the sample, but almost none seen only once
            "derived": codes * 3 + rng.integers(8, 25, n),
            "wide": rng.integers(0, 100_000, n),  # mostly seen once: plain
            "name": [f"n{i % 50}" for i in range(n)],  # strings: always a dictionary
        }
    )
    out = tmp_path / "out"
    sf.from_arrow(table).write_parquet(str(out))
    (path,) = out.glob("*.parquet")
    metadata = pq.ParquetFile(path).metadata
    encoded = {
        metadata.schema.column(i).name: "RLE_DICTIONARY"
        in metadata.row_group(0).column(i).encodings
        for i in range(metadata.num_columns)
    }
    assert encoded == {
        "id": False,
        "x": False,
        "code": True,
        "derived": True,
        "wide": False,
        "name": True,
    }
    assert pq.read_table(path).equals(table)


def test_snappy_parquet_writes_leave_columns_it_cannot_shrink_uncompressed(tmp_path):
    rng = np.random.default_rng(3)
    n = 50_000
    table = pa.table(
        {
            "id": np.arange(n),  # sequential: snappy halves it
            "x": rng.random(n),  # random doubles: snappy cannot shrink them
            "code": rng.integers(0, 10, n),  # a dictionary: compressed
            "name": [f"n{i % 7}" for i in range(n)],
        }
    )
    codecs = {}
    for codec in ("snappy", "zstd", {"x": "snappy", "id": "none", "code": "gzip", "name": "zstd"}):
        out = tmp_path / str(len(codecs))
        sf.from_arrow(table).write_parquet(str(out), compression=codec)
        (path,) = out.glob("*.parquet")
        metadata = pq.ParquetFile(path).metadata
        codecs[str(codec)] = {
            metadata.schema.column(i).name: metadata.row_group(0).column(i).compression
            for i in range(metadata.num_columns)
        }
        assert pq.read_table(path).equals(table)
    assert codecs["snappy"] == {
        "id": "SNAPPY",
        "x": "UNCOMPRESSED",
        "code": "SNAPPY",
        "name": "SNAPPY",
    }
    assert set(codecs["zstd"].values()) == {"ZSTD"}  # other codecs are used as given
    assert list(codecs.values())[2] == {
        "id": "UNCOMPRESSED",
        "x": "SNAPPY",
        "code": "GZIP",
        "name": "ZSTD",
    }
