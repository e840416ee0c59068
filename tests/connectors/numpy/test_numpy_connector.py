"""read_numpy / Dataset.write_numpy, checked against numpy.save / numpy.load."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.connectors.numpy import NumpyDatasource
from shardflow.connectors.numpy import datasource as numpy_connector


def _visible(folder):
    return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def _load_folder(folder):
    """The arrays numpy itself reads from the .npy files of ``folder``, in name order."""
    return [np.load(os.path.join(folder, name)) for name in _visible(folder)]


def _by_first_value(rows_2d):
    return rows_2d[np.argsort(rows_2d.reshape(len(rows_2d), -1)[:, 0], kind="stable")]


# -- reading ----------------------------------------------------------------------------


def test_read_folder_of_npy_files_matches_numpy(backend, tmp_path):
    parts = [np.arange(i * 12, (i + 1) * 12, dtype=np.float32).reshape(4, 3) for i in range(3)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"part{i}.npy", part)
    ds = sf.read_numpy(str(tmp_path))
    assert ds.count() == 12
    expected_type = pa.fixed_shape_tensor(pa.float32(), [3], permutation=[0])
    assert ds.schema().base_schema.field("data").type == expected_type
    data = ds.take_batch(100)["data"]
    np.testing.assert_array_equal(_by_first_value(data), np.concatenate(parts))


def test_one_dimensional_array_is_a_plain_column(tmp_path):
    np.save(tmp_path / "x.npy", np.array([3, 1, 2], dtype=np.int16))
    table = sf.read_numpy(str(tmp_path / "x.npy")).to_arrow()
    assert table.schema == pa.schema([("data", pa.int16())])
    assert table.column("data").to_pylist() == [3, 1, 2]


@pytest.mark.parametrize(
    "array",
    [
        np.arange(24, dtype=">i4").reshape(2, 3, 4),  # big-endian
        np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),  # Fortran order
        np.array([True, False, True]),
        np.array(["ab", "c", "def"]),
        np.arange(4).astype("datetime64[s]"),
    ],
    ids=["big-endian", "fortran", "bool", "str", "datetime"],
)
def test_dtypes_and_layouts_round_trip_exactly(tmp_path, array):
    np.save(tmp_path / "x.npy", array)
    got = sf.read_numpy(str(tmp_path / "x.npy")).take_batch(100)["data"]
    np.testing.assert_array_equal(got, np.load(tmp_path / "x.npy"))


def test_npz_members_become_columns(backend, tmp_path):
    x = np.arange(5)
    y = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.savez(tmp_path / "a.npz", x=x, y=y)
    ds = sf.read_numpy(str(tmp_path))
    assert ds.schema().names == ["x", "y"]
    batch = ds.take_batch(10)
    np.testing.assert_array_equal(batch["x"], x)
    np.testing.assert_array_equal(batch["y"], y)


def test_npz_members_of_different_lengths_are_refused(tmp_path):
    np.savez(tmp_path / "bad.npz", x=np.arange(5), y=np.arange(4))
    with pytest.raises(ValueError) as info:
        sf.read_numpy(str(tmp_path)).take_all()
    assert "bad.npz" in str(info.value) and "first dimensions" in str(info.value)


def test_empty_array_reads_as_no_rows(tmp_path):
    np.save(tmp_path / "empty.npy", np.zeros((0, 3)))
    np.save(tmp_path / "full.npy", np.ones((2, 3)))
    data = sf.read_numpy(str(tmp_path)).take_batch(10)["data"]
    np.testing.assert_array_equal(data, np.ones((2, 3)))


def test_large_file_streams_in_slices_of_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(numpy_connector, "_ROWS_SLICE_BYTES", 1000)
    array = np.arange(3000 * 4, dtype=np.int64).reshape(3000, 4)  # 31 rows of 32 bytes per slice
    np.save(tmp_path / "big.npy", array)
    ds = NumpyDatasource(str(tmp_path / "big.npy"))
    with open(tmp_path / "big.npy", "rb") as f:
        blocks = list(ds._read_stream(f, "big.npy"))
    assert len(blocks) == -(-3000 // 31)
    assert max(b.nbytes for b in blocks) <= 1000
    sliced = [b.column("data").chunk(0).to_numpy_ndarray() for b in blocks]
    np.testing.assert_array_equal(np.concatenate(sliced), array)
    np.testing.assert_array_equal(sf.read_numpy(str(tmp_path)).take_batch(5000)["data"], array)


class _Marker:
    """Unpickling this would create a file: the proof that a loader ran code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_object_arrays_are_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    hostile = np.empty(2, dtype=object)
    hostile[:] = [_Marker(str(marker)), _Marker(str(marker))]
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "objects.npy", hostile, allow_pickle=True)
    # A file that is a bare pickle with a .npy name must not be unpickled either.
    (tmp_path / "data" / "plain.npy").write_bytes(pickle.dumps(_Marker(str(marker))))
    for name, reason in (("objects.npy", "pickle"), ("plain.npy", "not a NumPy file")):
        with pytest.raises(ValueError) as info:
            sf.read_numpy(str(tmp_path / "data" / name)).take_all()
        assert name in str(info.value) and reason in str(info.value)
    assert not marker.exists()


def test_truncated_npy_names_the_file_and_reason(tmp_path):
    np.save(tmp_path / "good.npy", np.arange(6).reshape(3, 2))
    np.save(tmp_path / "cut.npy", np.arange(1000).reshape(100, 10))
    raw = (tmp_path / "cut.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError) as info:
        sf.read_numpy(str(tmp_path)).take_all()
    message = str(info.value)
    assert str(tmp_path / "cut.npy") in message and "truncated" in message


def test_truncated_npy_is_skipped_and_counted(backend, tmp_path):
    good = np.arange(6).reshape(3, 2)
    np.save(tmp_path / "good.npy", good)
    (tmp_path / "cut.npy").write_bytes(b"\x93NUMPY\x01\x00" + b"v\x00{'descr'")  # header cut short
    ds = sf.read_numpy(str(tmp_path), on_bad_file="skip")
    np.testing.assert_array_equal(ds.take_batch(10)["data"], good)
    assert "1 bad files skipped" in ds.stats()


# -- writing ----------------------------------------------------------------------------


def test_write_numpy_round_trip(backend, tmp_path):
    images = np.arange(8 * 4 * 3, dtype=np.uint8).reshape(8, 4, 3)
    sf.from_numpy(images, override_num_blocks=2).write_numpy(str(tmp_path / "out"), column="data")
    written = _load_folder(tmp_path / "out")
    assert len(written) == 2 and all(name.endswith(".npy") for name in _visible(tmp_path / "out"))
    np.testing.assert_array_equal(_by_first_value(np.concatenate(written)), images)
    read_back = sf.read_numpy(str(tmp_path / "out")).take_batch(100)["data"]
    np.testing.assert_array_equal(_by_first_value(read_back), images)


def test_write_numpy_one_file_per_block(backend, tmp_path):
    sf.range(30, override_num_blocks=3).write_numpy(str(tmp_path), column="id")
    written = _load_folder(tmp_path)
    assert len(written) == 3
    assert sorted(np.concatenate(written).tolist()) == list(range(30))


def test_write_numpy_strings(tmp_path):
    sf.from_items([{"s": "a"}, {"s": "bc"}]).write_numpy(str(tmp_path), column="s")
    written = np.concatenate(_load_folder(tmp_path))
    assert written.dtype.kind == "U" and sorted(written.tolist()) == ["a", "bc"]


def test_write_numpy_unknown_column(tmp_path):
    with pytest.raises(ValueError, match="'nope'.*id"):
        sf.range(3).write_numpy(str(tmp_path / "out"), column="nope")
    assert not (tmp_path / "out").exists() or _visible(tmp_path / "out") == []


def _ragged_last_block(batch):
    ids = batch["id"]
    if ids[0] < 15:
        return {"x": np.stack([np.full(2, i) for i in ids])}
    cells = np.empty(len(ids), dtype=object)
    cells[:] = [np.full(int(i) % 3 + 1, i) for i in ids]
    return {"x": cells}


def test_failed_write_leaves_destination_unchanged(backend, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    np.save(dest / "old.npy", np.arange(3))
    ds = sf.range(20, override_num_blocks=4).map_batches(_ragged_last_block)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception) as info:
            ds.write_numpy(str(dest), column="x", mode=mode)
        assert "different shapes" in str(info.value)
        assert sorted(os.listdir(dest)) == ["old.npy"]  # no new file, no staging folder left
        np.testing.assert_array_equal(np.load(dest / "old.npy"), np.arange(3))


# -- arguments and registry -------------------------------------------------------------


def test_bad_arguments(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(3))
    with pytest.raises(ValueError, match="allow_pickle"):
        sf.read_numpy(str(tmp_path), allow_pickle=True)
    with pytest.raises(TypeError, match="mmap_mode"):
        sf.read_numpy(str(tmp_path), mmap_mode="r")
    with pytest.raises(TypeError, match="column"):
        sf.range(3).write_numpy(str(tmp_path / "out"), column=None)


def test_registered_as_numpy(tmp_path):
    sf.range(5).write_datasink("numpy", path=str(tmp_path), column="id")
    read_back = sf.read_datasource("numpy", paths=str(tmp_path)).take_batch(10)["data"]
    assert sorted(read_back.tolist()) == list(range(5))


# -- remote stores ----------------------------------------------------------------------


def test_round_trip_on_every_store(store):
    parts = {
        f"in/part{i}.npy": np.arange(i * 20, (i + 1) * 20, dtype=np.int32).reshape(10, 2)
        for i in range(2)
    }
    for rel, array in parts.items():
        buffer = io.BytesIO()
        np.save(buffer, array)
        store.write_bytes(rel, buffer.getvalue())
    buffer = io.BytesIO()
    np.savez_compressed(buffer, a=np.arange(4), b=np.ones((4, 2, 2)))
    store.write_bytes("npz/x.npz", buffer.getvalue())
    expected = np.concatenate(list(parts.values()))

    ds = sf.read_numpy(store.path("in"), **store.options())
    np.testing.assert_array_equal(_by_first_value(ds.take_batch(100)["data"]), expected)
    npz = sf.read_numpy(store.path("npz"), **store.options()).take_batch(10)
    np.testing.assert_array_equal(npz["a"], np.arange(4))
    np.testing.assert_array_equal(npz["b"], np.ones((4, 2, 2)))

    ds.write_numpy(store.path("out"), column="data", **store.options())
    listing = store.data_files("out")
    assert listing and all(name.endswith(".npy") and not name.startswith(".") for name in listing)
    fs = store.fs
    written = []
    for rel in listing:
        with fs.open(fs._strip_protocol(store.path("out", rel)), "rb") as f:
            written.append(np.load(io.BytesIO(f.read()), allow_pickle=False))
    np.testing.assert_array_equal(_by_first_value(np.concatenate(written)), expected)
