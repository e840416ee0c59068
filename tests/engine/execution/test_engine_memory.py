"""Memory: a pipeline several times larger than the budget streams within it."""

from __future__ import annotations

import gc
import time

import numpy as np
import psutil
import pytest

import shardflow as sf

MiB = 1024 * 1024
BUDGET = 64 * MiB
ROW_BYTES = 1024  # 8 bytes of id + 127 float64s
TOTAL_ROWS = 200 * 1024  # ~200 MiB through the pipeline, three times the budget
NUM_TASKS = 50  # ~4 MiB per read task


def widen(batch):
    """Each 8-byte id becomes a 1 KiB row."""
    ids = batch["id"]
    payload = np.repeat(ids.astype(np.float64)[:, None], 127, axis=1)
    return {"id": ids, "payload": payload}


def _pipeline(batch_size):
    return sf.range(TOTAL_ROWS, override_num_blocks=NUM_TASKS).map_batches(
        widen, batch_size=batch_size
    )


def _consume_slowly(ds, on_batch=None):
    rows = 0
    expected_next = 0
    for batch in ds.iter_batches(batch_size=4096, prefetch_batches=1):
        ids = batch["id"]
        # order is preserved and nothing is lost or repeated
        assert ids[0] == expected_next and ids[-1] == expected_next + len(ids) - 1
        assert batch["payload"].shape == (len(ids), 127)
        expected_next += len(ids)
        rows += len(ids)
        if on_batch is not None:
            on_batch()
        time.sleep(0.01)  # a consumer slower than the producers: backpressure must hold
    return rows


@pytest.mark.timeout(120)
@pytest.mark.parametrize("batch_size", [None, 1024], ids=["4MiB-blocks", "1MiB-blocks"])
def test_peak_bytes_in_flight_within_budget(backend, fresh_context, batch_size):
    fresh_context.memory_budget_bytes = BUDGET
    ds = _pipeline(batch_size)
    assert _consume_slowly(ds) == TOTAL_ROWS
    stats = ds._last_stats
    assert stats.memory_budget_bytes == BUDGET
    assert stats.operators[0].bytes_out >= TOTAL_ROWS * ROW_BYTES  # ~3x the budget passed
    assert 0 < stats.peak_bytes_in_flight <= BUDGET, stats.to_string()


@pytest.mark.timeout(120)
def test_rss_stays_bounded(fresh_context):
    sf.init(backend="local")
    fresh_context.memory_budget_bytes = BUDGET
    process = psutil.Process()
    gc.collect()
    base = process.memory_info().rss
    peak = base

    def sample():
        nonlocal peak
        peak = max(peak, process.memory_info().rss)

    assert _consume_slowly(_pipeline(None), on_batch=sample) == TOTAL_ROWS
    growth = peak - base
    # blocks in flight, plus the batch being built and the one in the consumer's hands,
    # plus allocator slack; far below the 200 MiB that streamed through
    assert growth <= 2 * BUDGET + 64 * MiB, f"RSS grew by {growth / MiB:.0f} MiB"


@pytest.mark.timeout(120)
def test_small_budget_still_makes_progress(backend, fresh_context):
    fresh_context.memory_budget_bytes = 1 * MiB  # smaller than one block
    ds = sf.range(64 * 1024, override_num_blocks=8).map_batches(widen)
    total = 0
    for batch in ds.iter_batches(batch_size=None):
        total += len(batch["id"])
    assert total == 64 * 1024


def _head_task_is_slow(batch):
    """The first task takes a while: later tasks fill the budget while the consumer waits."""
    if batch["id"][0] == 0:
        time.sleep(2.0)
    return widen(batch)


@pytest.mark.timeout(120)
def test_a_slow_first_task_does_not_push_the_budget(backend, fresh_context):
    # Later tasks finish, and their blocks wait for room while the consumer waits for the
    # first task's block, which is on its way: that is no standstill, and nothing passes the
    # budget (on Ray, tasks queue beyond the CPUs, and only parked tasks that hold every CPU
    # are a standstill).
    fresh_context.memory_budget_bytes = 12 * MiB
    ds = sf.range(48 * 1024, override_num_blocks=12).map_batches(
        _head_task_is_slow,
        batch_size=1024,  # four blocks of 1 MiB per task
    )
    rows = sum(len(batch["id"]) for batch in ds.iter_batches(batch_size=None))
    assert rows == 48 * 1024
    stats = ds._last_stats
    assert 0 < stats.peak_bytes_in_flight <= 12 * MiB, stats.to_string()


@pytest.mark.timeout(120)
def test_reads_wait_while_the_consumer_has_blocks_enough(backend, fresh_context):
    # The default budget (a quarter of RAM) would let the reads run ~200 MiB ahead of a slow
    # consumer; they stop while OUTPUT_BACKLOG_BLOCKS blocks wait for it instead.
    from shardflow.engine.execution.operators.base import OUTPUT_BACKLOG_BLOCKS

    block = TOTAL_ROWS * ROW_BYTES // NUM_TASKS  # 4 MiB
    assert fresh_context.memory_budget_bytes > TOTAL_ROWS * ROW_BYTES
    ds = _pipeline(None)
    assert _consume_slowly(ds) == TOTAL_ROWS
    peak = ds._last_stats.peak_bytes_in_flight
    # waiting blocks, one per running read and its reservation, the consumer's and the
    # prefetched batch's blocks
    assert peak <= (OUTPUT_BACKLOG_BLOCKS + 8) * block, ds._last_stats.to_string()
