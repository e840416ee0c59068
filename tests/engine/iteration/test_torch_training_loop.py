"""A training loop fed by iter_torch_batches gets every batch, prepared ahead of it in a
background thread, on both backends. How little it waits is a timing check:
benchmarks/timing_checks.py (the test suite asserts no elapsed time)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import shardflow as sf

torch = pytest.importorskip("torch")


def normalize(batch):
    images = batch["data"].astype(np.float32) / 255.0
    return {"image": images, "label": batch["data"][:, 0, 0, 0] % 10}


def test_training_loop_gets_every_batch_prefetched(backend):
    ds = sf.range_tensor(6400, shape=(3, 16, 16), override_num_blocks=16).map_batches(normalize)
    steps, seen, labels = 0, 0, []
    batches = iter(
        ds.iter_torch_batches(batch_size=64, prefetch_batches=4, dtypes={"label": torch.int64})
    )
    for batch in batches:
        assert batch["image"].shape[1:] == (3, 16, 16) and batch["image"].dtype == torch.float32
        assert batch["label"].dtype == torch.int64
        seen += len(batch["label"])
        labels.append(batch["label"].numpy())
        time.sleep(0.01)  # the training step
        steps += 1
    assert seen == 6400 and steps == 100
    # oracle: the labels NumPy computes from the same tensors, in order
    expected = np.arange(6400) % 10
    np.testing.assert_array_equal(np.concatenate(labels), expected)
