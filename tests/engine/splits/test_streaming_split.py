"""Dataset.streaming_split: n iterators over one execution, drained by concurrent consumers."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
import time
import uuid

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf

TIMEOUT = 60


def touch_marker(batch, folder):
    """One file per call, so calls can be counted across processes and Ray workers."""
    with open(os.path.join(folder, uuid.uuid4().hex), "w"):
        pass
    return batch


def fail_from(batch, first_bad):
    if batch["id"][0] >= first_bad:
        raise ZeroDivisionError(f"bad block at {batch['id'][0]}")
    return batch


def read_ids(it, epochs=1, batch_size=16, delay_s=0.0, after_first=None):
    """The ids each epoch of ``it`` gives (a consumer for threads, processes and actors).

    ``after_first`` is called once the first batch is in hand (to order consumers in a test).
    """
    out = []
    for _ in range(epochs):
        ids = []
        for batch in it.iter_batches(batch_size=batch_size):
            ids.extend(int(v) for v in batch["id"])
            if after_first is not None:
                after_first()
                after_first = None
            if delay_s:
                time.sleep(delay_s)
        out.append(ids)
    return out


def waiter(event):
    return lambda: event.wait(timeout=TIMEOUT)


def read_ids_to_queue(it, queue, epochs):
    queue.put(read_ids(it, epochs))


def read_one_batch_then_die(it, ready, got_batch):
    ready.set()
    for _ in it.iter_batches(batch_size=10):
        got_batch.set()
        os._exit(3)


@pytest.fixture
def ray_backend(ray_session, fresh_context):
    """The Ray backend alone (Ray actors consume splits of the Ray backend)."""
    sf.init(backend="ray")
    yield "ray"


def run_threads(its, target=read_ids, **kwargs):
    """Consume every iterator in its own thread; returns {index: result or exception}."""
    results = {}

    def run(i, it):
        try:
            results[i] = target(it, **kwargs)
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, it)) for i, it in enumerate(its)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a consumer hung"
    return results


def _dataset(rows=1000, blocks=10):
    return sf.range(rows, override_num_blocks=blocks).map_batches(lambda b: {"id": b["id"] * 1})


# -- splitting ----------------------------------------------------------------------------


def test_no_row_lost_or_duplicated(backend):
    results = run_threads(_dataset().streaming_split(3))
    ids = [i for r in results.values() for i in r[0]]
    assert sorted(ids) == list(range(1000))


@pytest.mark.parametrize(
    "n, rows, blocks, each",
    [
        (3, 100, 4, 33),
        (4, 100, 4, 25),
        (3, 10, 2, 3),
        (2, 1001, 7, 500),
        (5, 3, 1, 0),
        (1, 10, 3, 10),
    ],
)
def test_equal_splits_have_equal_sizes(fresh_context, n, rows, blocks, each):
    # The Ray backend's equal splits: test_ray_actors_drain_the_splits, test_early_stop_*.
    results = run_threads(sf.range(rows, override_num_blocks=blocks).streaming_split(n, equal=True))
    sizes = [len(results[i][0]) for i in range(n)]
    assert sizes == [each] * n
    ids = [i for r in results.values() for i in r[0]]
    assert len(set(ids)) == len(ids) and set(ids) <= set(range(rows))


def test_equal_splits_with_uneven_blocks(fresh_context):
    sizes = [1, 250, 3, 90, 17, 400, 2, 60]
    starts = np.cumsum([0] + sizes)
    tables = [pa.table({"id": np.arange(a, b)}) for a, b in zip(starts, starts[1:])]
    results = run_threads(sf.from_arrow(tables).streaming_split(3, equal=True), batch_size=7)
    total = int(starts[-1])
    assert [len(results[i][0]) for i in range(3)] == [total // 3] * 3
    ids = [i for r in results.values() for i in r[0]]
    assert len(set(ids)) == len(ids) == total - total % 3


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Data's own, when it starts
def test_equal_sizes_match_ray_data(ray_session):
    """Ray Data drops the remainder of an equal split; shardflow's shares have its sizes."""
    ray_data = pytest.importorskip("ray.data")
    ray_data.DataContext.get_current().enable_progress_bars = False
    for n, rows, blocks in [(3, 100, 4)]:
        ray_its = ray_data.range(rows, override_num_blocks=blocks).streaming_split(n, equal=True)
        ray_sizes = sorted(len(r[0]) for r in run_threads(ray_its).values())
        ours = run_threads(
            sf.range(rows, override_num_blocks=blocks).streaming_split(n, equal=True)
        )
        assert sorted(len(r[0]) for r in ours.values()) == ray_sizes


def test_blocks_go_to_whoever_asks(backend):
    """Without equal=True a fast consumer takes more blocks; nobody waits for the slow one."""
    fast, slow = sf.range(2000, override_num_blocks=40).streaming_split(2)
    results = {}
    slow_started = threading.Event()
    threads = [
        threading.Thread(
            target=lambda: results.update(
                slow=read_ids(slow, delay_s=0.05, after_first=slow_started.set)
            )
        ),
        threading.Thread(
            target=lambda: results.update(fast=read_ids(fast, after_first=waiter(slow_started)))
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TIMEOUT)
    assert len(results["fast"][0]) > 2 * len(results["slow"][0]) > 0
    assert sorted(results["fast"][0] + results["slow"][0]) == list(range(2000))


# -- epochs ------------------------------------------------------------------------------


def test_epochs_run_the_dataset_once_each(backend, tmp_path):
    ds = sf.range(300, override_num_blocks=6).map_batches(touch_marker, fn_args=(str(tmp_path),))
    results = run_threads(ds.streaming_split(2), epochs=3)
    for epoch in range(3):
        assert sorted(results[0][epoch] + results[1][epoch]) == list(range(300))
    assert len(os.listdir(tmp_path)) == 3 * 6


def test_epoch_starts_when_every_split_started(backend, tmp_path):
    ds = sf.range(100, override_num_blocks=4).map_batches(touch_marker, fn_args=(str(tmp_path),))
    it0, it1 = ds.streaming_split(2)
    results = {}
    first = threading.Thread(target=lambda: results.update(a=read_ids(it0)))
    first.start()
    time.sleep(0.5)
    assert first.is_alive() and os.listdir(tmp_path) == []  # waiting for split 1; nothing ran
    results["b"] = read_ids(it1)
    first.join(timeout=TIMEOUT)
    assert sorted(results["a"][0] + results["b"][0]) == list(range(100))


@pytest.mark.timeout(120)  # catches a barrier that never times out
def test_barrier_times_out_with_a_clear_error(backend, fresh_context):
    fresh_context.streaming_split_timeout_s = 0.5
    it0, _unused = sf.range(10).streaming_split(2)
    with pytest.raises(TimeoutError, match=r"split\(s\) \[1\] to start iterating"):
        list(it0.iter_batches())


# -- early stop, failures -----------------------------------------------------------------


@pytest.mark.parametrize("equal", [False, True])
def test_early_stop_does_not_hang_the_others(backend, equal):
    it0, it1 = _dataset(2000, 40).streaming_split(2, equal=equal)

    stopped = threading.Event()

    def stop_early(it):
        for batch in it.iter_batches(batch_size=10):
            stopped.set()
            return [int(v) for v in batch["id"]]

    results = {}
    threads = [
        threading.Thread(target=lambda: results.update(a=stop_early(it0))),
        threading.Thread(
            target=lambda: results.update(b=read_ids(it1, after_first=waiter(stopped)))
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TIMEOUT)
    assert not any(t.is_alive() for t in threads)
    assert len(results["a"]) == 10
    rest = results["b"][0]
    assert not set(rest) & set(results["a"]) and len(set(rest)) == len(rest)
    assert len(rest) >= 1000  # the rest went on to split 1
    # The next epoch runs in full for both splits.
    again = run_threads([it0, it1])
    assert sorted(again[0][0] + again[1][0]) == list(range(2000))
    if equal:
        assert len(again[0][0]) == len(again[1][0]) == 1000


def test_error_reaches_every_consumer(backend):
    ds = sf.range(1000, override_num_blocks=10).map_batches(fail_from, fn_args=(500,))
    results = run_threads(ds.streaming_split(3), delay_s=0.01)
    for i in range(3):
        assert isinstance(results[i], ZeroDivisionError), results[i]
        assert "MapBatches(fail_from)" in str(results[i])


def test_equal_split_times_out_waiting_for_a_stalled_peer(fresh_context):
    fresh_context.streaming_split_timeout_s = 1.0
    it0, it1 = sf.range(4000, override_num_blocks=40).streaming_split(2, equal=True)
    stalled = iter(it1.iter_batches(batch_size=10, prefetch_batches=0))
    results = {}
    reader = threading.Thread(target=lambda: results.update(a=run_threads([it0])[0]))
    reader.start()
    next(stalled)  # split 1 starts the epoch, then stops reading without finishing
    reader.join(timeout=TIMEOUT)
    assert isinstance(results["a"], TimeoutError) and "split(s) [1]" in str(results["a"])
    stalled.close()


# -- other processes, Ray actors ----------------------------------------------------------


def test_spawned_processes_drain_the_splits(fresh_context):
    ctx = multiprocessing.get_context("spawn")
    its = _dataset(1200, 12).streaming_split(2, equal=True)
    queue = ctx.Queue()
    procs = [ctx.Process(target=read_ids_to_queue, args=(it, queue, 2)) for it in its]
    for p in procs:
        p.start()
    results = [queue.get(timeout=TIMEOUT) for _ in procs]
    for p in procs:
        p.join(timeout=TIMEOUT)
        assert p.exitcode == 0
    for epoch in range(2):
        assert [len(r[epoch]) for r in results] == [600, 600]
        assert sorted(results[0][epoch] + results[1][epoch]) == list(range(1200))


def test_a_dead_consumer_process_does_not_hang_the_others(fresh_context):
    fresh_context.streaming_split_timeout_s = 1.0
    ctx = multiprocessing.get_context("spawn")
    it0, it1 = _dataset(1000, 20).streaming_split(2)
    ready, got_batch = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=read_one_batch_then_die, args=(it1, ready, got_batch))
    proc.start()
    assert ready.wait(timeout=TIMEOUT)
    survivor = read_ids(it0, after_first=waiter(got_batch))[0]
    proc.join(timeout=TIMEOUT)
    assert proc.exitcode == 3
    assert len(survivor) == len(set(survivor)) and len(survivor) >= 900
    # The dead consumer never starts the next epoch: the survivor is told, not left hanging.
    with pytest.raises(TimeoutError, match=r"\[1\]"):
        read_ids(it0)


def test_pickled_iterator_in_this_process(fresh_context):
    it0, it1 = _dataset(500, 5).streaming_split(2, equal=True)
    copy1 = pickle.loads(pickle.dumps(it1))  # talks to the coordinator over its socket
    results = run_threads([it0, copy1])
    assert [len(results[0][0]), len(results[1][0])] == [250, 250]
    assert sorted(results[0][0] + results[1][0]) == list(range(500))
    assert copy1.schema().names == ["id"] and "rows out" in copy1.stats()
    assert copy1.get_context().memory_budget_bytes == fresh_context.memory_budget_bytes


def test_errors_and_authentication_over_the_socket(fresh_context):
    from multiprocessing import AuthenticationError

    from shardflow.engine.splits.transport import SocketCoordinatorClient

    ds = sf.range(100, override_num_blocks=4).map_batches(fail_from, fn_args=(50,))
    it0, it1 = ds.streaming_split(2)
    remote = pickle.loads(pickle.dumps(it1))
    results = run_threads([it0, remote])
    assert all(isinstance(results[i], ZeroDivisionError) for i in range(2)), results
    assert "MapBatches(fail_from)" in str(results[1])
    address, _key = remote._client.__reduce__()[1]
    with pytest.raises(AuthenticationError):
        SocketCoordinatorClient(address, b"not the key").schema()
    # The server still serves the right key. Its answer is the schema when a block reached the
    # coordinator before the failure stopped the run, else the run's error: both come from it.
    try:
        answer = remote.schema().names
    except ZeroDivisionError:
        answer = "the run's error"
    assert answer in (["id"], "the run's error")


class RayConsumer:
    def read(self, it, epochs):
        return read_ids(it, epochs)

    def read_one_batch(self, it):
        self.open = iter(it.iter_batches(batch_size=10))  # left open: the actor dies reading
        return [int(v) for v in next(self.open)["id"]]


def test_ray_actors_drain_the_splits(ray_backend, ray_session):
    its = _dataset(800, 8).streaming_split(2, equal=True)
    actor_class = ray_session.remote(num_cpus=0)(RayConsumer)
    actors = [actor_class.remote() for _ in its]
    results = ray_session.get([a.read.remote(it, 2) for a, it in zip(actors, its)], timeout=TIMEOUT)
    for epoch in range(2):
        assert [len(r[epoch]) for r in results] == [400, 400]
        assert sorted(results[0][epoch] + results[1][epoch]) == list(range(800))


def test_a_killed_ray_actor_does_not_hang_the_others(ray_backend, ray_session):
    it0, it1 = _dataset(1000, 20).streaming_split(2)
    actor = ray_session.remote(num_cpus=0)(RayConsumer).remote()
    started = actor.read_one_batch.remote(it1)
    survivor, killed = {}, threading.Event()
    reader = threading.Thread(
        target=lambda: survivor.update(ids=read_ids(it0, after_first=waiter(killed))[0])
    )
    reader.start()
    taken = ray_session.get(started, timeout=TIMEOUT)
    ray_session.kill(actor)
    killed.set()
    reader.join(timeout=TIMEOUT)
    assert not reader.is_alive()
    assert len(taken) == 10 and not set(taken) & set(survivor["ids"])
    assert len(survivor["ids"]) == len(set(survivor["ids"])) >= 900


# -- iterator methods and arguments -------------------------------------------------------


def test_split_iterator_methods(backend):
    its = sf.from_items(
        [{"id": i, "s": str(i)} for i in range(60)], override_num_blocks=4
    ).streaming_split(2)
    assert [it.world_size() for it in its] == [2, 2]
    assert repr(its[1]) == "StreamSplitDataIterator(split=1, world_size=2)"
    assert its[0].schema().names == ["id", "s"]
    assert its[0].get_context().backend == backend
    materialized = run_threads(its, target=lambda it: it.materialize())
    rows = materialized[0].take_all() + materialized[1].take_all()
    assert sorted(r["id"] for r in rows) == list(range(60))
    assert all(r["s"] == str(r["id"]) for r in rows)


def test_local_shuffle_within_a_split(fresh_context):
    its = sf.range(400, override_num_blocks=4).streaming_split(2, equal=True)

    def shuffled(it):
        return [
            int(v)
            for b in it.iter_batches(
                batch_size=20, local_shuffle_buffer_size=100, local_shuffle_seed=0
            )
            for v in b["id"]
        ]

    results = run_threads(its, target=shuffled)
    assert len(results[0]) == len(results[1]) == 200
    assert sorted(results[0] + results[1]) == list(range(400))
    assert results[0] != sorted(results[0])


def test_streaming_split_argument_validation(fresh_context):
    ds = sf.range(10)
    with pytest.raises(ValueError, match="n must be >= 1"):
        ds.streaming_split(0)
    with pytest.raises(TypeError, match="n must be an int"):
        ds.streaming_split("2")
    with pytest.raises(TypeError, match="equal"):
        ds.streaming_split(2, equal="yes")
    with pytest.raises(ValueError, match="Locality hints list must have length"):
        ds.streaming_split(2, locality_hints=["node"])
    fresh_context.streaming_split_timeout_s = 0
    with pytest.raises(ValueError, match="streaming_split_timeout_s"):
        ds.streaming_split(2)
