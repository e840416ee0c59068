"""DataContext.target_max_block_size and target_min_block_size shape the blocks of reads,
maps and exchanges."""

from __future__ import annotations

import numpy as np
import pytest

import shardflow as sf

MIB = 1024 * 1024


def _sizes(ds):
    return [b.nbytes for b in ds._iter_blocks()]


def test_large_map_outputs_are_cut_to_the_max_block_size(backend):
    ctx = sf.DataContext.get_current()
    ctx.target_max_block_size = 1 * MIB
    ctx.target_min_block_size = 64 * 1024
    ds = sf.range(4, override_num_blocks=1).map_batches(
        lambda b: {"x": np.arange(1_000_000, dtype=np.int64)}  # one 8 MiB block
    )
    sizes = _sizes(ds)
    assert len(sizes) >= 8 and max(sizes) <= 1.1 * MIB
    assert ds.count() == 1_000_000


def test_reads_and_exchanges_respect_the_max_block_size(backend):
    ctx = sf.DataContext.get_current()
    ctx.target_max_block_size = 512 * 1024
    ctx.target_min_block_size = 64 * 1024
    ds = sf.range(400_000, override_num_blocks=1)  # one 3 MiB read task
    assert max(_sizes(ds)) <= 0.55 * MIB
    for out in (ds.random_shuffle(seed=1), ds.sort("id", descending=True), ds.repartition(2)):
        assert max(_sizes(out)) <= 0.55 * MIB
    assert ds.sort("id", descending=True).take(2) == [{"id": 399_999}, {"id": 399_998}]


def test_small_outputs_are_joined_up_to_the_min_block_size(backend):
    ctx = sf.DataContext.get_current()
    ctx.target_min_block_size = 64 * 1024
    ds = sf.range(100_000, override_num_blocks=2).map_batches(lambda b: b, batch_size=100)
    sizes = _sizes(ds)
    # 1,000 batches of 800 bytes (800 KB in two tasks) become blocks of at least 64 KiB,
    # except the last block of each task.
    assert len(sizes) <= 800_000 // (64 * 1024) + 2
    assert sum(1 for s in sizes if s < 64 * 1024) <= 2
    assert ds.count() == 100_000


def test_block_size_settings_are_validated():
    ctx = sf.DataContext.get_current()
    # As in Ray Data, a minimum above the maximum is no error: the maximum wins.
    ctx.target_min_block_size = 10 * MIB
    ctx.target_max_block_size = 1024
    blocks = sf.range(2000, override_num_blocks=1).map_batches(lambda b: b).materialize()
    assert blocks.count() == 2000 and blocks.num_blocks() > 1
    ctx.target_max_block_size = 0
    with pytest.raises(ValueError, match="target_max_block_size"):
        sf.range(3).take_all()
