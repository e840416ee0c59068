"""DataIterator, Dataset.iterator(), re-iterable iter_batches/iter_rows, local shuffle buffers."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.engine.iteration.local_shuffle import LocalShuffleBuffer, shuffled_batches


def touch_marker(batch, folder):
    """One file per call, so calls can be counted across processes and Ray workers."""
    with open(os.path.join(folder, uuid.uuid4().hex), "w"):
        pass
    return batch


def _ids(batches):
    return [int(v) for b in batches for v in b["id"]]


# -- iterables and iterators ---------------------------------------------------------------


def test_iter_batches_is_a_reiterable_iterable(backend):
    ds = sf.range(25, override_num_blocks=3)
    batches = ds.iter_batches(batch_size=10)
    first, second = [b["id"].tolist() for b in batches], [b["id"].tolist() for b in batches]
    assert first == second == [list(range(10)), list(range(10, 20)), list(range(20, 25))]
    with pytest.raises(TypeError):
        next(batches)  # an iterable, as in Ray Data: call iter() first
    rows = ds.iter_rows()
    assert [r["id"] for r in rows] == [r["id"] for r in rows] == list(range(25))


def test_iterator_runs_the_dataset_once_per_epoch(backend, tmp_path):
    ds = sf.range(40, override_num_blocks=4).map_batches(touch_marker, fn_args=(str(tmp_path),))
    it = ds.iterator()
    assert isinstance(it, sf.DataIterator)
    for epoch in range(3):
        assert sorted(_ids(it.iter_batches(batch_size=7))) == list(range(40))
        assert len(os.listdir(tmp_path)) == 4 * (epoch + 1)
    assert [r["id"] for r in it.iter_rows()] == list(range(40))
    assert len(os.listdir(tmp_path)) == 16


def test_iterator_metadata_and_materialize(backend):
    ds = sf.from_items([{"a": i, "b": str(i)} for i in range(12)], override_num_blocks=3)
    it = ds.iterator()
    assert repr(it).startswith("DataIterator(")
    assert it.schema().names == ["a", "b"]
    assert it.get_context() is sf.DataContext.get_current()
    materialized = it.materialize()
    assert materialized.take_all() == ds.take_all()
    assert "rows out" in it.stats()


def test_iter_batches_close_stops_open_iterations(backend):
    ds = sf.range(10**7, override_num_blocks=200)
    batches = ds.iter_batches(batch_size=10, prefetch_batches=2)
    first, second = iter(batches), iter(batches)
    assert next(first)["id"].tolist() == list(range(10))
    assert next(second)["id"].tolist() == list(range(10))
    batches.close()
    assert list(first) == [] and list(second) == []


def test_iteration_argument_validation():
    ds = sf.range(10)
    with pytest.raises(ValueError, match="prefetch_batches"):
        ds.iter_batches(prefetch_batches=-1)
    with pytest.raises(TypeError, match="drop_last"):
        ds.iter_batches(drop_last="yes")
    with pytest.raises(ValueError, match="batch_format"):
        ds.iterator().iter_batches(batch_format="arrow")


# -- local shuffle -------------------------------------------------------------------------


def test_local_shuffle_gives_every_row_once_and_mixes(backend):
    ds = sf.range(1000, override_num_blocks=10)
    batches = list(
        ds.iter_batches(batch_size=64, local_shuffle_buffer_size=300, local_shuffle_seed=7)
    )
    assert [len(b["id"]) for b in batches] == [64] * 15 + [40]
    ids = _ids(batches)
    assert sorted(ids) == list(range(1000))
    assert ids != list(range(1000))
    # rows of different input blocks (100 rows each) meet in one batch
    assert len({v // 100 for v in batches[0]["id"]}) > 1


def test_local_shuffle_window_respects_buffer_size(backend):
    ds = sf.range(2000, override_num_blocks=20)
    batches = list(
        ds.iter_batches(batch_size=50, local_shuffle_buffer_size=300, local_shuffle_seed=1)
    )
    # The first batch is drawn once 300 rows (three 100-row blocks) are buffered: it holds
    # only rows from those blocks, and far from only the first 50 of them.
    first = batches[0]["id"]
    assert first.max() < 300
    assert len({v // 100 for v in first}) >= 2
    # A buffer as large as the data mixes rows from every part of it into the first batch.
    whole = next(
        iter(ds.iter_batches(batch_size=200, local_shuffle_buffer_size=2000, local_shuffle_seed=1))
    )
    assert len({v // 100 for v in whole["id"]}) >= 15


def test_local_shuffle_seed_is_reproducible(backend):
    ds = sf.range(500, override_num_blocks=5).map_batches(lambda b: {"id": b["id"] * 3})
    kwargs = {"batch_size": 32, "local_shuffle_buffer_size": 100}
    runs = [_ids(ds.iter_batches(local_shuffle_seed=42, **kwargs)) for _ in range(2)]
    other = _ids(ds.iter_batches(local_shuffle_seed=43, **kwargs))
    assert runs[0] == runs[1]
    assert other != runs[0]
    assert sorted(other) == sorted(runs[0]) == list(range(0, 1500, 3))


def test_local_shuffle_drop_last_and_formats(backend):
    ds = sf.from_items([{"id": i, "s": f"r{i}"} for i in range(100)], override_num_blocks=4)
    batches = list(
        ds.iter_batches(
            batch_size=30, local_shuffle_buffer_size=40, drop_last=True, batch_format="pandas"
        )
    )
    assert [len(b) for b in batches] == [30, 30, 30]
    for frame in batches:  # rows stay whole: every id keeps its own string
        assert (frame["s"] == "r" + frame["id"].astype(str)).all()


def test_local_shuffle_argument_validation():
    ds = sf.range(10)
    with pytest.raises(TypeError, match="local_shuffle_buffer_size"):
        ds.iter_batches(local_shuffle_buffer_size="big")
    with pytest.raises(TypeError, match="local_shuffle_buffer_size"):
        ds.iter_batches(local_shuffle_buffer_size=2.5)
    with pytest.raises(ValueError, match="local_shuffle_buffer_size"):
        ds.iter_batches(local_shuffle_buffer_size=-1)
    with pytest.raises(ValueError, match="batch_size"):
        ds.iter_batches(batch_size=None, local_shuffle_buffer_size=10)
    with pytest.raises(TypeError, match="local_shuffle_seed"):
        ds.iter_batches(local_shuffle_buffer_size=10, local_shuffle_seed="x")
    with pytest.raises(ValueError, match="local_shuffle_seed"):
        ds.iter_batches(local_shuffle_buffer_size=10, local_shuffle_seed=-3)


@pytest.mark.parametrize(
    "block_rows, batch_size, min_rows",
    [([7, 1, 30, 0, 12], 5, 8), ([100], 10, 0), ([3] * 20, 4, 50), ([1] * 9, 2, 1)],
)
def test_shuffle_buffer_against_numpy(block_rows, batch_size, min_rows):
    starts = np.cumsum([0] + block_rows)
    blocks = [
        pa.table({"id": np.arange(a, b), "sq": np.arange(a, b) ** 2})
        for a, b in zip(starts, starts[1:])
    ]
    batches = list(shuffled_batches(iter(blocks), batch_size, min_rows, seed=3))
    total = int(starts[-1])
    assert [b.num_rows for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
    ids = np.concatenate([b["id"].to_numpy() for b in batches])
    np.testing.assert_array_equal(np.sort(ids), np.arange(total))
    sq = np.concatenate([b["sq"].to_numpy() for b in batches])
    np.testing.assert_array_equal(sq, ids**2)


def test_shuffle_buffer_waits_for_min_rows():
    buffer = LocalShuffleBuffer(batch_size=4, min_rows=10, seed=0)
    buffer.add(pa.table({"id": np.arange(6)}))
    assert not buffer.has_batch()
    buffer.add(pa.table({"id": np.arange(6, 12)}))
    assert buffer.has_batch() and buffer.next_batch().num_rows == 4
    assert not buffer.has_batch()  # 8 rows left, fewer than 10
    buffer.done_adding()
    assert [buffer.next_batch().num_rows, buffer.next_batch().num_rows] == [4, 4]
    assert not buffer.has_batch()
