"""Tensor columns through pipelines on both backends: fixed-shape and ragged tensors in NumPy,
pandas and pyarrow batches (in tasks and in actors), Parquet round trips, torch tensors in
rows and batches, Python objects, ``range_tensor`` and ``from_torch``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf


def _identity(batch):
    return batch


class Identity:
    def __call__(self, batch):
        return batch


def _stages(batch_format):
    """A task, and for NumPy batches also an actor (its blocks cross between processes)."""
    stages = [(_identity, {})]
    if batch_format == "numpy":
        stages.append((Identity, {"concurrency": 1}))
    return stages


def _ragged():
    return [np.arange(i * 3, dtype=np.float32).reshape(i, 3) for i in range(1, 7)]


@pytest.mark.parametrize("batch_format", ["numpy", "pandas", "pyarrow"])
def test_fixed_shape_tensors_round_trip_through_batches(backend, batch_format):
    images = np.random.default_rng(0).integers(0, 255, (12, 4, 4, 3), dtype=np.uint8)
    ds = sf.from_numpy(images, override_num_blocks=3)
    assert isinstance(ds.schema().base_schema.field("data").type, pa.FixedShapeTensorType)
    for fn, kwargs in _stages(batch_format):
        out = ds.map_batches(fn, batch_format=batch_format, batch_size=5, **kwargs).take_batch(12)
        np.testing.assert_array_equal(out["data"], images)
        assert out["data"].dtype == np.uint8


@pytest.mark.parametrize("batch_format", ["numpy", "pandas", "pyarrow"])
def test_ragged_tensors_round_trip_through_batches(backend, batch_format):
    arrays = _ragged()
    ds = sf.from_items([{"x": a} for a in arrays], override_num_blocks=2)
    assert ds.schema().base_schema.field("x").type.extension_name == "arrow.variable_shape_tensor"
    for fn, kwargs in _stages(batch_format):
        rows = ds.map_batches(fn, batch_format=batch_format, **kwargs).take_all()
        assert len(rows) == len(arrays)
        for row, expected in zip(rows, arrays):
            np.testing.assert_array_equal(row["x"], expected)
            assert row["x"].dtype == np.float32


def test_tensors_round_trip_through_parquet(backend, tmp_path):
    fixed = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4)
    ragged = _ragged()[:2]
    ds = sf.from_items([{"fixed": fixed[i], "ragged": ragged[i]} for i in range(2)])
    ds.write_parquet(tmp_path / "out")
    back = sf.read_parquet(tmp_path / "out").take_all()
    for i, row in enumerate(back):
        np.testing.assert_array_equal(row["fixed"], fixed[i])
        np.testing.assert_array_equal(row["ragged"], ragged[i])
    # Other Arrow tools read the canonical extension types. (Each file holds the rows of
    # one block, so the ragged column has one fixed shape per file.)
    files = sorted((tmp_path / "out").glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    assert all(isinstance(t.schema.field("fixed").type, pa.FixedShapeTensorType) for t in tables)
    fixed_back = np.concatenate(
        [t.column("fixed").combine_chunks().to_numpy_ndarray() for t in tables]
    )
    np.testing.assert_array_equal(fixed_back, fixed)


def test_torch_tensors_in_rows_and_batches_become_numpy(backend):
    torch = pytest.importorskip("torch")
    rows = sf.range(4).map(lambda r: {"t": torch.full((2, 2), float(r["id"]))}).take_batch(4)
    assert rows["t"].shape == (4, 2, 2) and rows["t"].dtype == np.float32
    np.testing.assert_array_equal(rows["t"][:, 0, 0], np.arange(4, dtype=np.float32))
    batches = (
        sf.range(6)
        .map_batches(lambda b: {"t": torch.as_tensor(b["id"]).reshape(-1, 1) * 2}, batch_size=3)
        .take_batch(6)
    )
    np.testing.assert_array_equal(batches["t"][:, 0], np.arange(6) * 2)


class Opaque:
    def __init__(self, value):
        self.value = value


def test_python_objects_live_in_an_object_column_never_unpickled_from_files(backend, tmp_path):
    ds = sf.from_items([{"o": Opaque(i), "i": i} for i in range(3)])
    assert [r["o"].value for r in ds.map(lambda r: r).take_all()] == [0, 1, 2]
    ds.write_parquet(tmp_path / "objects")
    cells = sf.read_parquet(tmp_path / "objects").take_all()
    assert all(isinstance(r["o"], bytes) for r in cells)  # plain binary, not unpickled


def test_integers_beyond_64_bits_live_in_an_object_column():
    """As in Ray Data: Arrow has no type for them (pyarrow raised OverflowError)."""
    ds = sf.from_items([{"x": 2**70}, {"x": -(2**64)}, {"x": 1}])
    assert ds.take_all() == [{"x": 2**70}, {"x": -(2**64)}, {"x": 1}]
    assert ds.schema().types[0] != pa.int64()


def test_range_tensor(backend):
    ds = sf.range_tensor(10, shape=(2, 3), override_num_blocks=3)
    batch = ds.take_batch(10)
    expected = np.broadcast_to(np.arange(10).reshape(10, 1, 1), (10, 2, 3))
    np.testing.assert_array_equal(batch["data"], expected)
    assert batch["data"].dtype == np.int64 and ds.count() == 10
    assert [r["data"].tolist() for r in sf.range_tensor(2).take_all()] == [[0], [1]]
    with pytest.raises(ValueError, match="shape"):
        sf.range_tensor(3, shape=(0, 2))


def test_from_torch_reads_map_style_and_iterable_datasets(backend):
    torch = pytest.importorskip("torch")
    data = torch.utils.data.TensorDataset(torch.arange(6.0).reshape(3, 2), torch.tensor([0, 1, 2]))
    rows = sf.from_torch(data).take_all()
    assert [int(r["item"][1]) for r in rows] == [0, 1, 2]
    np.testing.assert_array_equal(rows[2]["item"][0].numpy(), [4.0, 5.0])

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(70))

    assert sf.from_torch(Stream()).sum("item") == sum(range(70))
    with pytest.raises(TypeError, match="from_torch takes"):
        sf.from_torch([1, 2, 3])


def test_from_torch_without_torch_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r"pip install 'shardflow\[torch\]'"):
        sf.from_torch([1, 2])
