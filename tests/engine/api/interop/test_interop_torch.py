"""to_torch: Ray Data's (features, label) tensors, and a torch DataLoader with several
workers over a shardflow dataset reading each row exactly once per epoch.

iter_torch_batches' options (collate_fn, device, dtypes, prefetch_batches, drop_last,
local_shuffle_buffer_size) are tested in tests/engine/iteration/test_iteration_torch.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import shardflow as sf

torch = pytest.importorskip("torch")


def _ids(loader) -> list[int]:
    return sorted(int(v) for features, _ in loader for v in features[:, 0].tolist())


@pytest.mark.timeout(180)
@pytest.mark.parametrize("materialize", [False, True], ids=["read-tasks", "blocks"])
def test_dataloader_workers_read_each_row_once_per_epoch(materialize):
    sf.init(backend="local")
    ds = sf.range(300, override_num_blocks=7).map_batches(
        lambda b: {"id": b["id"], "y": b["id"] % 2}
    )
    if materialize:
        ds = ds.random_shuffle(seed=3).materialize()
    # spawned workers (the test process has threads: it must not fork), kept for both epochs
    loader = torch.utils.data.DataLoader(
        ds.to_torch(label_column="y", batch_size=16),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="spawn",
        persistent_workers=True,
    )
    for _epoch in range(2):
        assert _ids(loader) == list(range(300))


def test_to_torch_tensors_match_numpy(backend):
    rows = [{"a": i, "b": i * 0.5, "y": i % 3} for i in range(10)]
    ds = sf.from_items(rows)
    batches = list(ds.to_torch(label_column="y", batch_size=4))
    features = torch.cat([f for f, _ in batches]).numpy()
    labels = torch.cat([label for _, label in batches]).numpy()
    expected = np.array([[r["a"], r["b"]] for r in rows])
    np.testing.assert_array_equal(features, expected)
    np.testing.assert_array_equal(labels, np.array([[r["y"]] for r in rows]))
    assert [len(f) for f, _ in batches] == [4, 4, 2]
    dropped = ds.to_torch(label_column="y", batch_size=4, drop_last=True)
    assert [len(f) for f, _ in dropped] == [4, 4]


def test_plan_that_cannot_be_cut_says_what_to_do():
    sf.init(backend="local")
    ds = sf.range(10).random_shuffle().to_torch(batch_size=2)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=1, multiprocessing_context="spawn"
    )
    with pytest.raises(ValueError, match="materialize"):
        list(loader)
    assert sorted(int(v) for f, _ in ds for v in f.flatten()) == list(range(10))


def test_to_torch_validates_arguments():
    ds = sf.range(3)
    with pytest.raises(TypeError, match="label_column"):
        ds.to_torch(label_column=1)
    with pytest.raises(TypeError, match="drop_last"):
        ds.to_torch(drop_last="no")
    with pytest.raises(TypeError, match="unexpected keyword"):
        ds.iterator().to_torch(nope=1)
