"""iter_torch_batches on Dataset and DataIterator: tensors, dtypes, devices, collate functions."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.collate_fn import ArrowBatchCollateFn, NumpyBatchCollateFn, PandasBatchCollateFn


def _dataset():
    items = [
        {"i": i, "f": i * 0.5, "b": i % 2 == 0, "t": np.full((2, 3), i, dtype=np.float32)}
        for i in range(10)
    ]
    return sf.from_items(items, override_num_blocks=3)


def test_import_does_not_import_torch():
    code = "import sys, shardflow; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r"pip install 'shardflow\[torch\]'"):
        sf.range(3).iter_torch_batches()


def test_default_batches_are_dicts_of_tensors(backend):
    torch = pytest.importorskip("torch")
    ds = _dataset()
    batches = list(ds.iter_torch_batches(batch_size=4))
    assert [len(b["i"]) for b in batches] == [4, 4, 2]
    oracle = ds.to_pandas()
    first = batches[0]
    assert set(first) == {"i", "f", "b", "t"}
    assert first["i"].dtype == torch.int64 and first["f"].dtype == torch.float64
    assert first["b"].dtype == torch.bool and first["t"].dtype == torch.float32
    assert first["t"].shape == (4, 2, 3) and first["i"].device.type == "cpu"
    np.testing.assert_array_equal(
        torch.cat([b["i"] for b in batches]).numpy(), oracle["i"].to_numpy()
    )
    np.testing.assert_array_equal(
        torch.cat([b["f"] for b in batches]).numpy(), oracle["f"].to_numpy()
    )
    np.testing.assert_array_equal(
        torch.cat([b["t"] for b in batches]).numpy()[:, 1, 2], np.arange(10)
    )


def test_dtypes_for_all_or_some_columns(backend):
    torch = pytest.importorskip("torch")
    ds = _dataset().select_columns(["i", "f"])
    batch = next(iter(ds.iter_torch_batches(batch_size=3, dtypes=torch.float16)))
    assert batch["i"].dtype == batch["f"].dtype == torch.float16
    batch = next(iter(ds.iter_torch_batches(batch_size=3, dtypes={"i": torch.float32})))
    assert batch["i"].dtype == torch.float32 and batch["f"].dtype == torch.float64
    np.testing.assert_array_equal(batch["i"].numpy(), np.array([0, 1, 2], dtype=np.float32))


def test_tensors_do_not_alias_the_dataset(backend):
    torch = pytest.importorskip("torch")
    ds = sf.range(8, override_num_blocks=1).materialize()
    for batch in ds.iter_torch_batches(batch_size=4):
        batch["id"].mul_(100)  # in-place work on a batch must not reach the data
    again = torch.cat([b["id"] for b in ds.iter_torch_batches(batch_size=4)])
    assert again.tolist() == list(range(8))


def test_collate_functions_receive_their_formats(backend):
    torch = pytest.importorskip("torch")
    ds = _dataset().select_columns(["i", "f"])

    class ArrowPlus5(ArrowBatchCollateFn):
        def __call__(self, batch):
            assert isinstance(batch, pa.Table)
            return torch.as_tensor(batch["i"].to_numpy() + 5)

    class NumpyPair(NumpyBatchCollateFn):
        def __call__(self, batch):
            assert isinstance(batch["i"], np.ndarray)
            return torch.as_tensor(batch["i"]), torch.as_tensor(batch["f"])

    class PandasSum(PandasBatchCollateFn):
        def __call__(self, batch):
            assert isinstance(batch, pd.DataFrame)
            return {"sum": torch.as_tensor((batch["i"] + batch["f"]).to_numpy())}

    arrow = list(ds.iter_torch_batches(batch_size=5, collate_fn=ArrowPlus5()))
    assert torch.cat(arrow).tolist() == [i + 5 for i in range(10)]
    pairs = list(ds.iter_torch_batches(batch_size=5, collate_fn=NumpyPair()))
    assert isinstance(pairs[0], tuple) and pairs[1][1].tolist() == [2.5, 3.0, 3.5, 4.0, 4.5]
    sums = list(ds.iter_torch_batches(batch_size=5, collate_fn=PandasSum()))
    assert torch.cat([s["sum"] for s in sums]).tolist() == [i * 1.5 for i in range(10)]
    # a plain function gets NumPy batches and may return anything
    kinds = list(ds.iter_torch_batches(batch_size=5, collate_fn=lambda b: sorted(b)))
    assert kinds == [["f", "i"], ["f", "i"]]


def test_torch_batches_with_local_shuffle_and_drop_last(backend):
    pytest.importorskip("torch")
    ds = sf.range(100, override_num_blocks=4)
    kwargs = {
        "batch_size": 16,
        "local_shuffle_buffer_size": 50,
        "local_shuffle_seed": 5,
        "drop_last": True,
    }
    runs = [[b["id"].tolist() for b in ds.iter_torch_batches(**kwargs)] for _ in range(2)]
    assert runs[0] == runs[1] and len(runs[0]) == 6
    flat = sum(runs[0], [])
    assert len(set(flat)) == 96 and flat != sorted(flat)


def test_torch_argument_errors():
    torch = pytest.importorskip("torch")
    ds = sf.range(4)
    with pytest.raises(ValueError, match="collate_fn cannot be used with dtypes"):
        ds.iter_torch_batches(collate_fn=lambda b: b, dtypes=torch.float32)
    with pytest.raises(ValueError, match="Unsupported collate function"):
        ds.iter_torch_batches(collate_fn=5)
    with pytest.raises(TypeError, match="dtypes"):
        ds.iter_torch_batches(dtypes="float32")
    with pytest.raises(RuntimeError):
        ds.iter_torch_batches(device="nope")
    with pytest.raises(TypeError, match="pin_memory"):
        ds.iter_torch_batches(pin_memory="yes")


def test_non_numeric_columns_name_the_column():
    pytest.importorskip("torch")
    ds = sf.from_items([{"name": "a", "x": 1}])
    with pytest.raises(TypeError, match="'name'"):
        list(ds.iter_torch_batches())
    assert [b["x"].tolist() for b in ds.select_columns(["x"]).iter_torch_batches()] == [[1]]


def test_device_and_pin_memory_on_cpu():
    torch = pytest.importorskip("torch")
    ds = sf.range(6)
    for device in ("auto", "cpu", torch.device("cpu")):
        batch = next(iter(ds.iter_torch_batches(batch_size=6, device=device, pin_memory=True)))
        assert batch["id"].device.type == "cpu" and batch["id"].tolist() == list(range(6))
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            ds.iter_torch_batches(device="cuda")
    # "meta" tensors have no data: they show the device transfer happens
    batch = next(iter(ds.iter_torch_batches(batch_size=6, device="meta")))
    assert batch["id"].device.type == "meta" and batch["id"].shape == (6,)


def test_torch_batches_on_split_iterators(backend):
    torch = pytest.importorskip("torch")
    it0, it1 = sf.range(200, override_num_blocks=8).streaming_split(2, equal=True)
    out = {}

    def consume(name, it):
        out[name] = [b["id"] for b in it.iter_torch_batches(batch_size=32, dtypes=torch.float32)]

    threads = [threading.Thread(target=consume, args=(i, it)) for i, it in enumerate([it0, it1])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    sizes = [sum(len(b) for b in out[i]) for i in range(2)]
    assert sizes == [100, 100]
    values = torch.cat(out[0] + out[1])
    assert values.dtype == torch.float32 and sorted(values.tolist()) == [
        float(i) for i in range(200)
    ]
