"""SharedValue: stored once, loaded once per worker process, never copied per task."""

from __future__ import annotations

import os

import cloudpickle
import numpy as np
import pytest

from shardflow.xshards import SharedValue, XShards

MiB = 1024 * 1024
VALUE_BYTES = 100 * MiB
NUM_TASKS = 16


def _memory_mib():
    """Resident anonymous (private) and shared-memory pages of this process, in MiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssShmem"):
                out[key] = int(value.split()[0]) / 1024
    return out


def use_value(x, shared):
    from shardflow.engine.xshards import shared_value

    before = _memory_mib()
    total = float(shared.value.sum())
    after = _memory_mib()
    loads = sum(
        n for key, n in shared_value.loads_in_this_process().items() if key.startswith(shared._key)
    )
    return {
        "pid": os.getpid(),
        "total": total,
        "loads": loads,
        "anon_growth": after["RssAnon"] - before["RssAnon"],
        "shmem": after["RssShmem"],
    }


def test_a_100_mib_value_is_loaded_once_per_worker_and_shared(backend, fresh_context):
    fresh_context.num_cpus = 2  # worker processes on the local backend
    value = np.ones(VALUE_BYTES // 8)
    shared = SharedValue(value)
    assert len(cloudpickle.dumps(shared)) < 4096  # tasks carry a handle, not the value
    results = (
        XShards.partition(np.arange(NUM_TASKS), NUM_TASKS)
        .transform_shard(use_value, shared)
        .collect()
    )
    assert len(results) == NUM_TASKS
    assert all(r["total"] == value.sum() for r in results)
    pids = {r["pid"] for r in results}
    assert os.getpid() not in pids  # really in workers
    assert len(pids) < NUM_TASKS
    for pid in pids:  # loaded once per process, however many of its tasks used it
        assert max(r["loads"] for r in results if r["pid"] == pid) == 1
    # Not copied into private memory: the workers read the one stored copy.
    growth = max(r["anon_growth"] for r in results)
    assert growth < 20, (
        f"a worker's private memory grew by {growth:.0f} MiB reading a 100 MiB value"
    )
    assert max(r["shmem"] for r in results) >= 90
    print(
        f"\n[{backend}] SharedValue of 100 MiB, {NUM_TASKS} tasks in {len(pids)} workers: "
        f"loads per worker 1, largest private-memory growth {growth:.1f} MiB, "
        f"shared pages {max(r['shmem'] for r in results):.0f} MiB"
    )
    shared.unpersist()


def test_threads_use_the_value_itself(fresh_context):
    fresh_context.python_udfs_in_processes = False
    value = {"a": 1}
    shared = SharedValue(value)
    same = (
        XShards.partition(np.arange(4), 2)
        .transform_shard(lambda x, s: s.value is value, shared)
        .collect()
    )
    assert same == [True, True]


def holds(x, shared):
    from shardflow.engine.xshards import shared_value

    return shared.value[int(x[0])], os.getpid(), shared_value.cached_in_this_process()


def test_unpersist_drops_copies_and_the_value_stays_usable(backend, fresh_context):
    fresh_context.num_cpus = 2
    shared = SharedValue(np.arange(10) * 3)
    shards = XShards.partition(np.arange(4), 4)
    first = shards.transform_shard(holds, shared).collect()
    assert [r[0] for r in first] == [0, 3, 6, 9]
    old_key = f"{shared._key}:0"
    assert any(old_key in r[2] for r in first)
    shared.unpersist()
    np.testing.assert_array_equal(shared.value, np.arange(10) * 3)  # the driver keeps it
    second = shards.transform_shard(holds, shared).collect()
    assert [r[0] for r in second] == [0, 3, 6, 9]
    assert all(old_key not in r[2] for r in second)  # workers dropped the released copy
    assert all(f"{shared._key}:1" in r[2] for r in second)


def test_unpersist_removes_the_stored_file(fresh_context):
    shared = SharedValue(np.arange(5))
    source = shared._store()
    assert source[0] == "file" and os.path.exists(source[1])
    shared.unpersist()
    assert not os.path.exists(source[1])
    handle = cloudpickle.loads(cloudpickle.dumps(shared))
    np.testing.assert_array_equal(handle.value, np.arange(5))


def test_a_released_value_says_so(fresh_context):
    shared = SharedValue([1, 2, 3])
    handle = cloudpickle.loads(cloudpickle.dumps(shared))
    shared.unpersist()
    with pytest.raises(RuntimeError, match="unpersisted"):
        _ = handle.value
