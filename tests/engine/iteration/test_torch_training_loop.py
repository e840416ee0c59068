"""A training loop fed by iter_torch_batches barely waits: batches are prepared ahead of it in
a background thread, on both backends."""

from __future__ import annotations

import time

import numpy as np
import pytest

import shardflow as sf

torch = pytest.importorskip("torch")


def normalize(batch):
    images = batch["data"].astype(np.float32) / 255.0
    return {"image": images, "label": batch["data"][:, 0, 0, 0] % 10}


def test_training_loop_waits_under_ten_percent(backend):
    ds = sf.range_tensor(6400, shape=(3, 16, 16), override_num_blocks=16).map_batches(normalize)
    waited, steps, seen = 0.0, 0, 0
    batches = iter(
        ds.iter_torch_batches(batch_size=64, prefetch_batches=4, dtypes={"label": torch.int64})
    )
    first = next(batches)  # the pipeline's start is not part of the steady state
    seen += len(first["label"])
    start = time.perf_counter()
    while True:
        asked = time.perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            break
        waited += time.perf_counter() - asked
        assert batch["image"].shape[1:] == (3, 16, 16) and batch["image"].dtype == torch.float32
        seen += len(batch["label"])
        time.sleep(0.01)  # the training step
        steps += 1
    total = time.perf_counter() - start
    assert seen == 6400 and steps == 99
    assert waited / total < 0.10, f"waited {waited:.3f} s of {total:.3f} s"
