"""read_webdataset / Dataset.write_webdataset, checked against the ``webdataset`` library:
shards it wrote read as it decodes them, shards shardflow wrote read by it, and errors that
name the shard and the sample."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import shardflow as sf
from shardflow.connectors.webdataset import WebDatasetDatasource

wds = pytest.importorskip("webdataset", reason="the webdataset library is not installed")


def _image(i, shape=(6, 5, 3)):
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _samples(start, count):
    return [
        {
            "__key__": f"sample{i:05d}",
            "cls": i % 10,
            "json": {"id": i, "tags": ["a", f"t{i}"]},
            "txt": f"caption {i}",
            "png": _image(i),
            "jpg": _image(i, (16, 16, 3)),
            "npy": np.arange(4, dtype=np.float32) * i,
            "bin": bytes([i % 256]) * (i % 7),
        }
        for i in range(start, start + count)
    ]


def _write_with_library(folder, shards=2, per_shard=5):
    os.makedirs(folder, exist_ok=True)
    paths = []
    for s in range(shards):
        path = os.path.join(folder, f"shard-{s:03d}.tar")
        with wds.TarWriter(path) as writer:
            for sample in _samples(s * per_shard, per_shard):
                writer.write(sample)
        paths.append(path)
    return paths


def _tar(path, members, mode="w"):
    """A tar file of ``(name, bytes)`` members, in order."""
    with tarfile.open(path, mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _png(array):
    out = io.BytesIO()
    Image.fromarray(array).save(out, format="PNG")
    return out.getvalue()


def _by_key(rows):
    return sorted(rows, key=lambda r: r["__key__"])


def _visible(folder):
    return sorted(
        os.path.join(folder, n) for n in os.listdir(folder) if not n.startswith((".", "_"))
    )


# -- shards the webdataset library wrote --------------------------------------------------------


def test_reads_shards_the_library_wrote_as_it_decodes_them(backend, tmp_path):
    paths = _write_with_library(str(tmp_path / "shards"))
    expected = {}
    for path in paths:
        for sample in wds.WebDataset(path, shardshuffle=False).decode("rgb8"):
            expected[sample["__key__"]] = sample
    ds = sf.read_webdataset(str(tmp_path / "shards"))
    schema = ds.schema().base_schema
    assert schema.names == ["__key__", "bin", "cls", "jpg", "json", "npy", "png", "txt", "__url__"]
    assert schema.field("cls").type == pa.int64()
    assert schema.field("txt").type == pa.string()
    assert schema.field("bin").type == pa.binary()
    assert schema.field("png").type == pa.fixed_shape_tensor(pa.uint8(), [6, 5, 3])
    assert schema.field("npy").type == pa.fixed_shape_tensor(pa.float32(), [4])
    rows = ds.take_all()
    assert sorted(r["__key__"] for r in rows) == sorted(expected)
    for row in rows:
        want = expected[row["__key__"]]
        assert row["__url__"] == want["__url__"]
        assert (row["cls"], row["json"], row["txt"], row["bin"]) == (
            want["cls"],
            want["json"],
            want["txt"],
            want["bin"],
        )
        for image in ("png", "jpg", "npy"):
            np.testing.assert_array_equal(row[image], want[image])
    # The png members are lossless: they are the arrays written.
    for row in rows:
        np.testing.assert_array_equal(row["png"], _image(int(row["__key__"][6:])))


def test_library_reads_what_shardflow_wrote(tmp_path):
    samples = _samples(0, 12)
    out = str(tmp_path / "out")
    sf.from_items(samples).repartition(3).write_webdataset(out)
    shards = _visible(out)
    assert len(shards) == 3 and all(p.endswith(".tar") for p in shards)
    got = {}
    for sample in wds.WebDataset(shards, shardshuffle=False).decode("rgb8"):
        got[sample["__key__"]] = sample
    assert sorted(got) == [s["__key__"] for s in samples]
    for sample in samples:
        back = got[sample["__key__"]]
        assert (back["cls"], back["json"], back["txt"], back["bin"]) == (
            sample["cls"],
            sample["json"],
            sample["txt"],
            sample["bin"],
        )
        np.testing.assert_array_equal(back["png"], sample["png"])
        np.testing.assert_array_equal(back["npy"], sample["npy"])
        # JPEG is lossy: the pixels are those of Pillow's JPEG of the array, decoded.
        jpeg = io.BytesIO()
        Image.fromarray(sample["jpg"]).save(jpeg, format="JPEG")
        np.testing.assert_array_equal(back["jpg"], np.asarray(Image.open(jpeg)))


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "cls": st.integers(-(2**62), 2**62),
                "txt": st.text(max_size=30),
                "bin": st.binary(min_size=1, max_size=600),
            }
        ),
        min_size=1,
        max_size=20,
    ),
    st.lists(_keys, min_size=20, max_size=20, unique=True),
)
def test_property_round_trip_and_library_agrees(tmp_path_factory, rows, keys):
    rows = [{"__key__": key, **row} for key, row in zip(keys, rows)]
    out = str(tmp_path_factory.mktemp("wds") / "out")
    sf.from_items(rows).write_webdataset(out)
    back = sf.read_webdataset(out).drop_columns(["__url__"]).take_all()
    assert _by_key(back) == _by_key(rows)
    library = [
        {"__key__": s["__key__"], "cls": s["cls"], "txt": s["txt"], "bin": s["bin"]}
        for s in wds.WebDataset(_visible(out), shardshuffle=False).decode()
    ]
    assert _by_key(library) == _by_key(rows)


def test_store_round_trip(store):
    """Local disk, S3 (moto) and GCS (emulator), each shard streamed."""
    rows = [{"__key__": f"k{i:03d}", "cls": i, "png": _image(i, (4, 4, 3))} for i in range(10)]
    sf.from_items(rows).write_webdataset(store.path("out"), **store.options())
    back = _by_key(sf.read_webdataset(store.path("out"), **store.options()).take_all())
    assert [r["cls"] for r in back] == list(range(10))
    for row, want in zip(back, rows):
        np.testing.assert_array_equal(row["png"], want["png"])
        assert row["__url__"].startswith(store.path("out") if store.kind != "local" else "/")


def test_gzipped_shards_are_read(tmp_path):
    plain = _tar(tmp_path / "s.tar", [("a.cls", b"1"), ("b.cls", b"2")])
    with open(plain, "rb") as f, gzip.open(tmp_path / "s.tar.gz", "wb") as out:
        out.write(f.read())
    os.remove(plain)
    rows = sf.read_webdataset(str(tmp_path)).take_all()
    assert [(r["__key__"], r["cls"]) for r in rows] == [("a", 1), ("b", 2)]


# -- options ------------------------------------------------------------------------------------


@pytest.fixture
def shard(tmp_path):
    members = []
    for i in range(3):
        members += [
            (f"dir/s{i}.cls", str(i).encode()),
            (f"dir/s{i}.seg.png", _png(_image(i, (2, 3)))),
            (f"dir/s{i}.txt", f"text {i}".encode()),
            (f"dir/s{i}.json", json.dumps({"score": i / 2, "name": f"n{i}"}).encode()),
        ]
    return _tar(tmp_path / "shard.tar", members)


def test_keys_keep_folders_and_suffixes_keep_inner_dots(shard):
    rows = sf.read_webdataset(shard).take_all()
    assert [r["__key__"] for r in rows] == ["dir/s0", "dir/s1", "dir/s2"]
    np.testing.assert_array_equal(rows[1]["seg.png"], _image(1, (2, 3)))


def test_fileselect_filerename_and_suffixes(shard):
    selected = sf.read_webdataset(shard, fileselect=["*.cls", "*.txt"]).take_all()
    assert {tuple(r) for r in selected} == {("__key__", "cls", "txt", "__url__")}
    renamed = sf.read_webdataset(
        shard, filerename=lambda name: name.replace(".txt", ".caption.txt")
    ).take_all()
    assert renamed[0]["caption.txt"] == "text 0"
    only = sf.read_webdataset(shard, suffixes=lambda s: s == "cls", include_paths=True)
    assert only.take_all()[2] == {"__key__": "dir/s2", "cls": 2, "__url__": shard, "path": shard}
    nothing = sf.read_webdataset(shard, suffixes=["nope"]).take_all()
    assert [sorted(r) for r in nothing] == [["__key__", "__url__"]] * 3


def test_decoders(shard):
    raw = sf.read_webdataset(shard, decoder=None).take(1)[0]
    assert raw["cls"] == b"0" and isinstance(raw["seg.png"], bytes)

    def add_label(sample):
        return {**sample, "label": int(sample["cls"]) * 10}

    chained = sf.read_webdataset(shard, decoder=[True, add_label]).take_all()
    assert [r["label"] for r in chained] == [0, 10, 20]
    pil = sf.read_webdataset(shard, decoder="PIL").take(1)[0]["seg.png"]
    assert isinstance(pil, Image.Image) and pil.size == (3, 2)
    expanded = sf.read_webdataset(shard, expand_json=True).take_all()
    assert [(r["score"], r["name"]) for r in expanded] == [(0.0, "n0"), (0.5, "n1"), (1.0, "n2")]


def test_projection_does_not_decode_unused_members(tmp_path):
    path = _tar(
        tmp_path / "s.tar",
        [("a.cls", b"1"), ("a.jpg", b"not a jpeg"), ("b.cls", b"2"), ("b.jpg", b"nor this")],
    )
    assert sf.read_webdataset(path).select_columns(["cls"]).take_all() == [{"cls": 1}, {"cls": 2}]
    with pytest.raises(ValueError, match=r"s\.tar.*sample 'a': member 'jpg' cannot be decoded"):
        sf.read_webdataset(path).take_all()


# -- bad input ----------------------------------------------------------------------------------


def test_truncated_and_garbage_shards_name_the_file(tmp_path):
    path = _tar(tmp_path / "good.tar", [(f"k{i}.bin", bytes(3000)) for i in range(4)])
    data = open(path, "rb").read()
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    os.remove(path)
    with pytest.raises(Exception, match="cut.tar") as info:
        sf.read_webdataset(str(tmp_path)).take_all()
    assert "truncated" in str(info.value) or "unexpected end" in str(info.value)
    (tmp_path / "cut.tar").write_bytes(b"garbage " * 100)
    with pytest.raises(Exception, match=r"cut\.tar as WebDataset"):
        sf.read_webdataset(str(tmp_path)).take_all()


def test_scattered_and_duplicate_members_are_refused(tmp_path):
    scattered = _tar(tmp_path / "a.tar", [("x.cls", b"1"), ("y.cls", b"2"), ("x.txt", b"t")])
    with pytest.raises(ValueError, match=r"a\.tar.*sample 'x' are not next to each other"):
        sf.read_webdataset(scattered).take_all()
    twice = _tar(tmp_path / "b.tar", [("x.cls", b"1"), ("x.cls", b"2")])
    with pytest.raises(ValueError, match=r"b\.tar.*two members with the suffix 'cls'"):
        sf.read_webdataset(twice).take_all()


def test_pickled_members_are_not_loaded(tmp_path):
    import pickle

    path = _tar(tmp_path / "p.tar", [("x.pkl", pickle.dumps({"a": 1}))])
    with pytest.raises(ValueError, match="is pickled.*never unpickles"):
        sf.read_webdataset(path).take_all()
    assert sf.read_webdataset(path, decoder=None).take_all()[0]["pkl"] == pickle.dumps({"a": 1})


def test_arguments_are_checked(tmp_path, shard):
    with pytest.raises(TypeError, match="decoder must be"):
        sf.read_webdataset(shard, decoder=42)
    with pytest.raises(TypeError, match="fileselect must be"):
        sf.read_webdataset(shard, fileselect=[1])
    with pytest.raises(TypeError, match="filerename must be"):
        sf.read_webdataset(shard, filerename=[("a", "b")])
    with pytest.raises(TypeError, match="Unknown arguments for read_webdataset"):
        WebDatasetDatasource(shard, keep_meta=True)
    with pytest.raises(TypeError, match="must return the sample as a dict"):
        sf.read_webdataset(shard, decoder=lambda s: None).take_all()


# -- writing ------------------------------------------------------------------------------------


def _members(path):
    with tarfile.open(path) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]


def test_written_members_nulls_and_random_keys(tmp_path):
    out = str(tmp_path / "out")
    rows = [{"txt": "a", "cls": 1, "extra": None}, {"txt": None, "cls": 2, "extra": b"e"}]
    sf.from_items(rows).repartition(1).write_webdataset(out)
    (path,) = _visible(out)
    members = _members(path)
    keys = [name.split(".")[0] for name, _ in members]
    assert len(set(keys)) == 2 and all(len(k) == 32 for k in keys)
    assert [(name.split(".", 1)[1], data) for name, data in members] == [
        ("txt", b"a"),
        ("cls", b"1"),
        ("cls", b"2"),
        ("extra", b"e"),
    ]


def test_encoders(tmp_path):
    rows = [{"__key__": "k0", "data": b"\x00\x01", "note": "plain"}]
    sf.from_items(rows).write_webdataset(str(tmp_path / "raw"), encoder=None)
    assert _members(_visible(str(tmp_path / "raw"))[0]) == [
        ("k0.data", b"\x00\x01"),
        ("k0.note", b"plain"),
    ]

    def upper(sample):
        return {**sample, "note": sample["note"].upper()}

    sf.from_items(rows).write_webdataset(str(tmp_path / "fn"), encoder=[upper, True])
    assert ("k0.note", b"PLAIN") in _members(_visible(str(tmp_path / "fn"))[0])
    # Bytes pass the default encoder unchanged: an image already encoded stays as it is.
    encoded = _png(_image(3, (2, 2, 3)))
    sf.from_items([{"__key__": "k1", "png": encoded}]).write_webdataset(str(tmp_path / "enc"))
    assert _members(_visible(str(tmp_path / "enc"))[0]) == [("k1.png", encoded)]


def test_unwritable_values_and_keys_are_refused(tmp_path):
    with pytest.raises(ValueError, match="Column 'score' of sample 'k' holds a float"):
        sf.from_items([{"__key__": "k", "score": 0.5}]).write_webdataset(str(tmp_path / "a"))
    with pytest.raises(ValueError, match="without '.' in its file name"):
        sf.from_items([{"__key__": "a.b", "cls": 1}]).write_webdataset(str(tmp_path / "b"))
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b")


def test_write_mode_and_rows_per_file(tmp_path):
    out = str(tmp_path / "out")
    rows = [{"__key__": f"k{i:02d}", "cls": i} for i in range(20)]
    sf.from_items(rows).repartition(4).write_webdataset(out, min_rows_per_file=10)
    assert all(len(_members(p)) >= 10 for p in _visible(out))
    with pytest.raises(ValueError, match="already holds data"):
        sf.from_items(rows).write_webdataset(out)
    sf.from_items(rows[:3]).write_webdataset(out, mode="overwrite")
    assert sf.read_webdataset(out).count() == 3


def test_listed_by_shardflow_connectors(capsys):
    from shardflow.cli import main

    assert main(["connectors", "--json"]) == 0
    listing = {c["name"]: c for c in json.loads(capsys.readouterr().out)["connectors"]}
    assert listing["webdataset"]["package"] == "shardflow"
    assert listing["webdataset"]["capabilities"] == ["read", "projection", "write"]
