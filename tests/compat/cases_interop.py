"""Differential cases: other libraries' data (each skipped when the library is missing)."""

from __future__ import annotations

import numpy as np
from harness import case


@case("from_items", "Dataset.map", requires=("torch",))
def torch_tensors_become_numpy(m, tmp):
    """torch tensors in rows are stored as NumPy arrays"""
    import torch

    ds = m.from_items([{"x": torch.ones(2, 2)}, {"x": torch.zeros(2, 2)}])
    # One block: with two, Ray Data may give them in either order on a loaded machine.
    mapped = m.range(2, override_num_blocks=1).map(
        lambda r: {"t": torch.full((3,), float(r["id"]))}
    )
    return [type(ds.take(1)[0]["x"]), ds.take_batch()["x"], mapped.take_batch()["t"]]


@case("from_daft", "Dataset.to_daft", requires=("daft",))
def daft_round_trip(m, tmp):
    """from_daft and to_daft keep rows and column names"""
    import daft

    ds = m.from_daft(daft.from_pydict({"a": [1, 2, 3], "s": ["x", "y", "z"]}))
    back = ds.to_daft().to_pydict()
    return sorted(r["a"] for r in ds.take_all()), {k: sorted(v) for k, v in back.items()}


@case("from_huggingface", requires=("datasets",))
def huggingface_dataset(m, tmp):
    """from_huggingface reads a datasets.Dataset, selections included"""
    import datasets

    hf = datasets.Dataset.from_dict({"a": list(range(6)), "v": np.arange(6.0).tolist()})
    return [
        sorted(r["a"] for r in m.from_huggingface(hf).take_all()),
        sorted(r["a"] for r in m.from_huggingface(hf.select([1, 3])).take_all()),
    ]
