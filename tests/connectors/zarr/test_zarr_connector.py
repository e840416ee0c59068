"""read_zarr: stores written with zarr-python 2 read back chunk by chunk; the chunks put back
together give the arrays NumPy holds, in the long and the aligned wide form, on both backends,
from S3 and zip archives, with errors naming the store."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf

zarr = pytest.importorskip("zarr")


def _store(path, arrays, consolidated=True):
    """A group holding ``arrays`` ({path: (values, chunks)})."""
    root = zarr.open_group(str(path), mode="w")
    for name, (values, chunks) in arrays.items():
        root.create_dataset(name, data=values, chunks=chunks)
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return str(path)


def _assemble(rows, shape, dtype):
    """An array of ``shape`` filled from long-form rows; every cell must be set once."""
    out = np.zeros(shape, dtype)
    seen = np.zeros(shape, np.int64)
    for row in rows:
        where = tuple(slice(a, b) for a, b in row["chunk_slices"])
        assert row["chunk"].shape == out[where].shape
        out[where] = row["chunk"]
        seen[where] += 1
    assert (seen == 1).all()
    return out


ARRAYS = {
    "images": (np.arange(6 * 4 * 3, dtype=np.uint8).reshape(6, 4, 3), (2, 4, 3)),
    "labels": (np.arange(6, dtype=np.int64) % 3, (4,)),
    "meta/temps": (np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2), (3, 1)),
}


def test_long_form_chunks_put_back_together_give_the_arrays(backend, tmp_path):
    store = _store(tmp_path / "s.zarr", ARRAYS)
    rows = sf.read_zarr(store).take_all()
    assert sorted({r["array"] for r in rows}) == sorted(ARRAYS)
    for name, (values, chunks) in ARRAYS.items():
        mine = [r for r in rows if r["array"] == name]
        grid = [math.ceil(s / c) for s, c in zip(values.shape, chunks)]
        assert len(mine) == math.prod(grid)
        assert sorted(tuple(r["chunk_index"]) for r in mine) == sorted(np.ndindex(*grid))
        np.testing.assert_array_equal(_assemble(mine, values.shape, values.dtype), values)


def test_aligned_rows_share_axis_0_across_arrays(backend, tmp_path):
    store = _store(tmp_path / "s.zarr", ARRAYS)
    ds = sf.read_zarr(store, align_axis_0=True, chunk_shapes=[4], overlap=1)
    rows = sorted(ds.take_all(), key=lambda r: r["t_start"])
    assert [(r["t_start"], r["t_stop"]) for r in rows] == [(0, 4), (4, 6)]
    for row in rows:
        stop = min(row["t_stop"] + 1, 6)
        for name, (values, _) in ARRAYS.items():
            np.testing.assert_array_equal(row[name], values[row["t_start"] : stop])
    assert ds.schema().names == ["t_start", "t_stop", "images", "labels", "meta/temps"]


@given(
    shape=st.lists(st.integers(0, 7), min_size=1, max_size=3),
    data=st.data(),
)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_property_any_chunking_and_retiling_reassembles(tmp_path_factory, shape, data):
    chunks = tuple(data.draw(st.integers(1, 8)) for _ in shape)
    retile = data.draw(
        st.one_of(st.none(), st.lists(st.integers(1, 8), min_size=1, max_size=len(shape)))
    )
    values = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    store = _store(tmp_path_factory.mktemp("z") / "s.zarr", {"x": (values, chunks)})
    ds = sf.read_zarr(store, chunk_shapes=retile, override_num_blocks=data.draw(st.integers(1, 5)))
    rows = ds.take_all()
    used = tuple(retile) + chunks[len(retile) :] if retile else chunks
    assert len(rows) == math.prod(math.ceil(s / c) for s, c in zip(shape, used))
    assert ds.count() == len(rows)
    if rows:
        np.testing.assert_array_equal(_assemble(rows, values.shape, values.dtype), values)


def test_limit_reads_only_the_first_chunks(tmp_path):
    store = _store(tmp_path / "s.zarr", {"x": (np.arange(100), (10,))})
    rows = sf.read_zarr(store, override_num_blocks=1).limit(3).take_all()
    assert [r["chunk"].tolist() for r in rows] == [
        list(range(i * 10, i * 10 + 10)) for i in range(3)
    ]


def test_reads_a_store_on_s3(s3_store):
    import fsspec

    fs = fsspec.filesystem("s3", **s3_store.storage_options)
    root = zarr.open_group(fs.get_mapper(s3_store.path("s.zarr")), mode="w")
    values = np.arange(20, dtype=np.int16).reshape(4, 5)
    root.create_dataset("v", data=values, chunks=(2, 5))
    zarr.consolidate_metadata(fs.get_mapper(s3_store.path("s.zarr")))
    rows = sf.read_zarr(s3_store.path("s.zarr"), **s3_store.options()).take_all()
    np.testing.assert_array_equal(_assemble(rows, values.shape, values.dtype), values)


def test_reads_a_zipped_store(tmp_path):
    values = np.arange(9, dtype=np.float64)
    with zarr.ZipStore(str(tmp_path / "s.zip"), mode="w") as zipped:
        root = zarr.group(store=zipped)
        root.create_dataset("v", data=values, chunks=(4,))
        zarr.consolidate_metadata(zipped)
    rows = sf.read_zarr(str(tmp_path / "s.zip")).take_all()
    np.testing.assert_array_equal(_assemble(rows, values.shape, values.dtype), values)


def test_a_corrupt_chunk_names_the_store_and_the_array(tmp_path):
    store = _store(tmp_path / "broken.zarr", {"x": (np.arange(8), (4,))})
    (tmp_path / "broken.zarr" / "x" / "1").write_bytes(b"not a compressed chunk")
    with pytest.raises(Exception, match=r"broken\.zarr \(array 'x'\)"):
        sf.read_zarr(store).take_all()


def test_errors_say_what_to_do(tmp_path):
    plain = _store(tmp_path / "plain.zarr", {"x": (np.arange(4), (2,))}, consolidated=False)
    with pytest.raises(ValueError, match="Pass array_paths"):
        sf.read_zarr(plain)
    with pytest.raises(ValueError, match="not found"):
        sf.read_zarr(plain, array_paths=["y"])
    with pytest.raises(ValueError, match="may not contain"):
        sf.read_zarr(plain, array_paths=["../x"])
    with pytest.raises(TypeError, match="one store"):
        sf.read_zarr([plain])
    with pytest.raises(TypeError, match="array_paths must be a list"):
        sf.read_zarr(plain, array_paths="x")
    with pytest.raises(ValueError, match="absent.zarr.*nothing found"):
        sf.read_zarr(str(tmp_path / "absent.zarr"))


def test_chunk_reads_retry_transient_errors(tmp_path, fast_retries):
    from fsspec.implementations.local import LocalFileSystem

    class FailingChunkOpens(LocalFileSystem):
        """The first two opens of chunk files (not the metadata) fail as S3 throttling does."""

        cachable = False

        def __init__(self, failures=2):
            super().__init__()
            self.raised, self.failures = 0, failures

        def _open(self, path, mode="rb", **kwargs):
            if self.raised < self.failures and not path.rsplit("/", 1)[-1].startswith("."):
                self.raised += 1
                raise OSError(f"AWS Error SLOW_DOWN during GetObject operation ({path})")
            return super()._open(path, mode, **kwargs)

    values = np.arange(12)
    store = _store(tmp_path / "s.zarr", {"x": (values, (5,))})
    fs = FailingChunkOpens()
    rows = sf.read_zarr(store, filesystem=fs).take_all()
    np.testing.assert_array_equal(_assemble(rows, values.shape, values.dtype), values)
    assert fs.raised == 2
    # an error that outlasts the retries is raised, never read as a chunk of fill values
    # (zarr-python 2's own fsspec store would give zeros)
    with pytest.raises(OSError, match=r"s\.zarr \(array 'x'\).*SLOW_DOWN"):
        sf.read_zarr(store, filesystem=FailingChunkOpens(failures=100)).take_all()
