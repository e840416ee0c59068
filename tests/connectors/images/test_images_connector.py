"""read_images / Dataset.write_images, checked against Pillow decoding the same files."""

from __future__ import annotations

import io
import os

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

import shardflow as sf


def _is_variable_tensor(arrow_type):
    return getattr(arrow_type, "extension_name", None) == "arrow.variable_shape_tensor"


def _pixels(seed, shape):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _save(path, pixels, fmt="PNG"):
    Image.fromarray(pixels).save(path, format=fmt)


def _oracle(path, mode=None, size=None):
    """What Pillow itself decodes from ``path``, with the same conversions."""
    with Image.open(path) as image:
        image.load()
        if mode is not None:
            image = image.convert(mode)
        if size is not None:
            image = image.resize((size[1], size[0]), resample=Image.Resampling.BILINEAR)
        return np.asarray(image)


def _by_path(rows):
    return {row["path"]: row["image"] for row in rows}


@pytest.fixture
def same_size_folder(tmp_path):
    folder = tmp_path / "same"
    folder.mkdir()
    for i in range(4):
        _save(folder / f"img{i}.png", _pixels(i, (6, 5, 3)))
    return folder


@pytest.fixture
def ragged_folder(tmp_path):
    folder = tmp_path / "ragged"
    folder.mkdir()
    for i, (h, w) in enumerate([(4, 6), (7, 3), (5, 5), (4, 6), (9, 2)]):
        _save(folder / f"img{i}.png", _pixels(10 + i, (h, w, 3)))
    return folder


# -- reading ----------------------------------------------------------------------------


def test_same_size_images_make_a_fixed_shape_column(backend, same_size_folder):
    ds = sf.read_images(str(same_size_folder), include_paths=True)
    assert ds.count() == 4
    schema = ds.schema().base_schema
    expected = pa.fixed_shape_tensor(pa.uint8(), [6, 5, 3], permutation=[0, 1, 2])
    assert schema.field("image").type == expected
    assert schema.field("path").type == pa.string()
    got = _by_path(ds.take_all())
    assert sorted(got) == sorted(str(p) for p in same_size_folder.iterdir())
    for path, pixels in got.items():
        np.testing.assert_array_equal(pixels, _oracle(path))
    batch = ds.take_batch(10)
    assert batch["image"].shape == (4, 6, 5, 3) and batch["image"].dtype == np.uint8


def test_images_of_different_sizes_make_a_variable_shape_column(backend, ragged_folder):
    ds = sf.read_images(str(ragged_folder), include_paths=True, override_num_blocks=3)
    table = ds.to_arrow()  # joins blocks of different tensor shapes
    assert table.num_rows == 5
    assert _is_variable_tensor(table.schema.field("image").type)
    batch = ds.take_batch(10)
    for path, pixels in zip(batch["path"], batch["image"]):
        np.testing.assert_array_equal(pixels, _oracle(path))


@pytest.mark.parametrize("mode, size", [("RGB", None), ("L", None), (None, (3, 4)), ("L", (8, 2))])
def test_size_and_mode_match_pillow(ragged_folder, tmp_path, mode, size):
    gray = np.random.default_rng(3).integers(0, 256, (5, 6), dtype=np.uint8)
    _save(ragged_folder / "gray.png", gray)
    if mode is None:
        os.remove(ragged_folder / "gray.png")  # without mode= all images need the same bands
    ds = sf.read_images(str(ragged_folder), mode=mode, size=size, include_paths=True)
    rows = ds.take_all()
    assert len(rows) == len(os.listdir(ragged_folder))
    for path, pixels in _by_path(rows).items():
        expected = _oracle(path, mode=mode, size=size)
        assert pixels.shape == expected.shape
        np.testing.assert_array_equal(pixels, expected)
        if size is not None:
            assert pixels.shape[:2] == size
        if mode == "L":
            assert pixels.ndim == 2


def test_size_and_mode_give_the_schema_without_reading(tmp_path):
    _save(tmp_path / "a.png", _pixels(0, (9, 7, 3)))
    ds = sf.read_images(str(tmp_path), size=(4, 2), mode="RGBA")
    expected = pa.fixed_shape_tensor(pa.uint8(), [4, 2, 4], permutation=[0, 1, 2])
    assert ds._plan.source.datasource._output_schema() == pa.schema([("image", expected)])
    assert ds.schema().base_schema.field("image").type == expected
    assert ds.take_batch(1)["image"].shape == (1, 4, 2, 4)


def test_formats(tmp_path):
    pixels = _pixels(5, (8, 8, 3))
    formats = {
        "PNG": "png",
        "JPEG": "jpg",
        "BMP": "bmp",
        "GIF": "gif",
        "TIFF": "tiff",
        "WEBP": "webp",
    }
    for fmt, ext in formats.items():
        _save(tmp_path / f"x.{ext}", pixels, fmt)
    (tmp_path / "notes.txt").write_text("not an image")
    got = _by_path(sf.read_images(str(tmp_path), include_paths=True).take_all())
    assert sorted(os.path.basename(p) for p in got) == sorted(
        ["x.png", "x.jpg", "x.bmp", "x.gif", "x.tiff", "x.webp"]
    )
    for path, image in got.items():
        np.testing.assert_array_equal(image, _oracle(path))


def test_corrupt_image_names_the_file_and_reason(same_size_folder):
    bad = same_size_folder / "broken.jpg"
    bad.write_bytes(np.random.default_rng(0).bytes(300))
    with pytest.raises(ValueError) as info:
        sf.read_images(str(same_size_folder)).take_all()
    message = str(info.value)
    assert str(bad) in message and "cannot decode it as an image" in message


def test_corrupt_image_is_skipped_and_counted(backend, same_size_folder):
    (same_size_folder / "broken.jpg").write_bytes(np.random.default_rng(0).bytes(300))
    truncated = io.BytesIO()
    _save(truncated, _pixels(9, (40, 40, 3)), "PNG")
    (same_size_folder / "cut.png").write_bytes(truncated.getvalue()[:200])
    ds = sf.read_images(str(same_size_folder), on_bad_file="skip", include_paths=True)
    rows = ds.take_all()
    assert sorted(os.path.basename(p) for p in _by_path(rows)) == [f"img{i}.png" for i in range(4)]
    assert "2 bad files skipped" in ds.stats()
    assert ds.count() == 4  # counted by reading, since skipped files make no rows


# -- writing ----------------------------------------------------------------------------


def _read_folder_with_pillow(folder):
    return [np.asarray(Image.open(os.path.join(folder, n))) for n in sorted(os.listdir(folder))]


def _sort_arrays(arrays):
    return sorted(arrays, key=lambda a: (a.shape, a.tobytes()))


def test_write_images_round_trip(backend, ragged_folder, tmp_path):
    out = tmp_path / "out"
    sf.read_images(str(ragged_folder)).write_images(str(out), column="image")
    names = sorted(os.listdir(out))
    assert len(names) == 5 and all(n.endswith(".png") for n in names)
    written = _read_folder_with_pillow(out)
    originals = _read_folder_with_pillow(ragged_folder)
    for got, expected in zip(_sort_arrays(written), _sort_arrays(originals)):
        np.testing.assert_array_equal(got, expected)


def test_write_images_from_arrays_in_other_formats(tmp_path):
    gray = [{"image": _pixels(i, (4, 7))} for i in range(3)]
    sf.from_items(gray).write_images(str(tmp_path / "bmp"), "image", "bmp")
    written = _read_folder_with_pillow(tmp_path / "bmp")
    for got, expected in zip(_sort_arrays(written), _sort_arrays([r["image"] for r in gray])):
        np.testing.assert_array_equal(got, expected)
    sf.from_items(gray).write_images(str(tmp_path / "jpg"), column="image", file_format="jpg")
    names = os.listdir(tmp_path / "jpg")
    assert len(names) == 3 and all(n.endswith(".jpg") for n in names)
    assert all(Image.open(tmp_path / "jpg" / n).format == "JPEG" for n in names)


def _fail_on_last_block(batch):
    if batch["id"].max() >= 15:
        raise RuntimeError("task failed midway")
    return {"image": np.stack([np.full((3, 3, 3), i, np.uint8) for i in batch["id"]])}


def test_failed_write_leaves_destination_unchanged(backend, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    _save(dest / "old.png", _pixels(1, (2, 2, 3)))
    ds = sf.range(20, override_num_blocks=4).map_batches(_fail_on_last_block)
    for mode in ("append", "overwrite"):
        with pytest.raises(Exception, match="task failed midway"):
            ds.write_images(str(dest), column="image", mode=mode)
        assert os.listdir(dest) == ["old.png"]  # no new file, no staging folder left


def test_unwritable_rows_fail_the_write_cleanly(tmp_path):
    rows = [{"image": np.zeros((2, 2, 3), np.uint8)}, {"image": np.zeros((2, 2, 3), np.float64)}]
    with pytest.raises(ValueError, match="float64"):
        sf.from_items(rows).write_images(str(tmp_path / "out"), column="image")
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


# -- remote stores ----------------------------------------------------------------------


def test_round_trip_on_every_store(store):
    originals = {f"in/img{i}.png": _pixels(20 + i, (5 + i, 4, 3)) for i in range(3)}
    for rel, pixels in originals.items():
        buffer = io.BytesIO()
        _save(buffer, pixels)
        store.write_bytes(rel, buffer.getvalue())
    ds = sf.read_images(store.path("in"), include_paths=True, **store.options())
    got = _by_path(ds.take_all())
    assert len(got) == 3
    for path, pixels in got.items():
        np.testing.assert_array_equal(pixels, originals["in/" + path.rsplit("/", 1)[-1]])
    ds.drop_columns(["path"]).write_images(store.path("out"), column="image", **store.options())
    listing = store.data_files("out")
    assert len(listing) == 3 and not any(name.startswith(".") for name in listing)
    fs = store.fs
    written = []
    for rel in listing:
        with fs.open(fs._strip_protocol(store.path("out", rel)), "rb") as f:
            written.append(np.asarray(Image.open(io.BytesIO(f.read()))))
    for got_pixels, expected in zip(_sort_arrays(written), _sort_arrays(list(originals.values()))):
        np.testing.assert_array_equal(got_pixels, expected)


def test_failed_write_on_every_store_leaves_nothing(store):
    buffer = io.BytesIO()
    _save(buffer, _pixels(0, (2, 2, 3)))
    store.write_bytes("dest/old.png", buffer.getvalue())
    ds = sf.range(20, override_num_blocks=4).map_batches(_fail_on_last_block)
    with pytest.raises(Exception, match="task failed midway"):
        ds.write_images(store.path("dest"), column="image", mode="overwrite", **store.options())
    assert store.listing("dest") == ["old.png"]


# -- arguments and registry -------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"size": (0, 3)}, ValueError, "size"),
        ({"size": 32}, ValueError, "size"),
        ({"mode": "RGBZ"}, ValueError, "mode"),
        ({"colour": "red"}, TypeError, "colour"),
    ],
)
def test_bad_read_arguments(same_size_folder, kwargs, error, words):
    with pytest.raises(error, match=words):
        sf.read_images(str(same_size_folder), **kwargs)


def test_bad_write_arguments(tmp_path):
    ds = sf.from_items([{"image": np.zeros((2, 2, 3), np.uint8)}])
    with pytest.raises(ValueError, match="xyz"):
        ds.write_images(str(tmp_path / "a"), column="image", file_format="xyz")
    with pytest.raises(ValueError, match="'img'.*image"):
        ds.write_images(str(tmp_path / "b"), column="img")


def test_registered_as_images(same_size_folder, tmp_path):
    ds = sf.read_datasource("images", paths=str(same_size_folder))
    ds.write_datasink("images", path=str(tmp_path / "out"), column="image")
    assert len(os.listdir(tmp_path / "out")) == 4
