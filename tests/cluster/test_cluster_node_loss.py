"""Losing a node of a Ray cluster while a job runs: mid-map, mid-exchange and mid-actor-stage
the job completes with every row exactly once; when the driver's own node dies, the error
says that Ray cannot recover.

A worker node is killed at once (raylet, object store and workers, as if its machine died):
the map and the actor stage lose it after the consumer has read four blocks, the shuffle
while the map before it runs (its blocks are the shuffle's runs, not yet copied anywhere).
The tasks it was running run again elsewhere (Ray retries them), blocks that were only in
its object store are rebuilt by running the tasks that made them again (lineage
reconstruction), and a lost actor is restarted by Ray on a live node. A fresh worker node
then joins, so every test starts with three.

Run by `make test-cluster` (``cluster_long``): each case waits for Ray to notice a dead
node and starts a fresh one.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa
import pytest
from node_meeting import node_of_process

import shardflow as sf

pytestmark = [pytest.mark.timeout(900), pytest.mark.cluster, pytest.mark.cluster_long]

CLUSTER = {"workers": 3}
ROWS, BLOCKS = 240_000, 24  # 10,000 rows of int64 pairs a block: in the object store
KILL_AFTER = 4  # output blocks the consumer reads before a node dies


def slow_tag(batch: dict, runs: str) -> dict:
    """The map stage: records each run (first id and node) as a file in ``runs`` when it
    starts, then takes a while, so that every node is busy when one dies; records its node
    in the rows."""
    node = node_of_process()
    open(os.path.join(runs, f"{batch['id'][0]}-{node}-{time.time():.6f}"), "w").close()
    time.sleep(0.3)
    batch["key"] = (batch["id"] * 7919) % ROWS
    batch["node"] = np.array([node] * len(batch["id"]))
    return batch


class TagActor:
    """The actor stage: each construction leaves a file naming its node and process."""

    def __init__(self, folder: str):
        self.node = node_of_process()
        self.pid = os.getpid()
        open(os.path.join(folder, f"{time.time():.6f}-{self.node}-{self.pid}"), "w").close()

    def __call__(self, batch: dict) -> dict:
        time.sleep(0.3)
        batch["actor_node"] = np.array([self.node] * len(batch["id"]))
        return batch


def pipeline(name: str, folder: str):
    """The job of each case; the map stages and actors leave their files in ``folder``."""
    ds = sf.range(ROWS, override_num_blocks=BLOCKS)
    runs = {"fn_kwargs": {"runs": folder}}
    if name == "map":
        return ds.map_batches(slow_tag, **runs)
    if name == "exchange":
        return (
            ds.map_batches(slow_tag, **runs).random_shuffle(seed=11).map_batches(slow_tag, **runs)
        )
    if name == "actors":
        return ds.map_batches(TagActor, fn_constructor_args=(folder,), concurrency=3, num_cpus=0.5)
    raise ValueError(name)


def kill_busiest(session, counts: dict[str, int]) -> str:
    victim = max(session.node_ids(), key=lambda node: counts.get(node, 0))
    session.kill_worker(next(n for n in session.workers if n.node_id == victim))
    return victim


def kill_when_runs_reach(session, folder: str, runs: int, killed: list) -> None:
    """Kill the worker node that started most runs of the map stage once ``runs`` runs have
    started (an exchange's barrier holds the output back until then)."""
    while len(os.listdir(folder)) < runs:
        time.sleep(0.05)
    counts: dict[str, int] = {}
    for name in os.listdir(folder):
        node = name.split("-")[1]
        counts[node] = counts.get(node, 0) + 1
    killed.append(kill_busiest(session, counts))


def consume_while_a_node_dies(session, name: str, folder: str) -> dict:
    """In the cluster's driver: read the pipeline's output block by block while the busiest
    worker node is killed: after ``KILL_AFTER`` output blocks, or for the exchange once a
    third of the map stage's runs before it have started; then let a fresh node join."""
    import threading

    ds = pipeline(name, folder)
    column = "actor_node" if name == "actors" else "node"
    tables: list[pa.Table] = []
    killed: list[str] = []
    if name == "exchange":
        watch = threading.Thread(
            target=kill_when_runs_reach, args=(session, folder, BLOCKS // 3, killed)
        )
        watch.start()
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        tables.append(batch)
        if len(tables) == KILL_AFTER and name != "exchange":
            counts: dict[str, int] = {}
            for node in pa.concat_tables(tables)[column].to_pylist():
                counts[node] = counts.get(node, 0) + 1
            killed.append(kill_busiest(session, counts))
    if name == "exchange":
        watch.join()
    stats = ds._last_stats
    fresh = session.add_worker()
    return {
        "table": pa.concat_tables(tables),
        "victim": killed[0],
        "fresh": fresh.node_id,
        "retried": sum(op.tasks_retried for op in stats.operators),
        "stats": str(stats),
    }


def expected_keys(ids: np.ndarray) -> np.ndarray:
    return (ids * 7919) % ROWS


def runs_in(folder: str) -> list[tuple[str, str]]:
    """(first id, node) of every run of the map stage, oldest first."""
    names = sorted(os.listdir(folder), key=lambda name: name.split("-")[2])
    return [tuple(name.split("-")[:2]) for name in names]  # type: ignore[misc]


def assert_rerun_elsewhere(folder: str, victim: str) -> None:
    """Some task that ran on the lost node ran again on another (a retry or a rebuild)."""
    nodes_of: dict[str, set[str]] = {}
    for first, node in runs_in(folder):
        nodes_of.setdefault(first, set()).add(node)
    assert any(victim in nodes and len(nodes) > 1 for nodes in nodes_of.values()), nodes_of


def test_a_node_lost_mid_map_loses_no_row_and_repeats_none(cluster, tmp_path):
    result = cluster.call(consume_while_a_node_dies, "map", str(tmp_path))
    table = result["table"]
    ids = table["id"].to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(ROWS))  # every row, once
    assert np.array_equal(table["key"].to_numpy(), expected_keys(ids))
    nodes = set(table["node"].to_pylist())
    assert result["victim"] in nodes  # the lost node had done part of the work
    assert len(nodes - {result["victim"]}) == 2  # the others did the rest
    assert_rerun_elsewhere(str(tmp_path), result["victim"])


def test_a_node_lost_mid_exchange_gives_the_same_shuffle(cluster, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    result = cluster.call(consume_while_a_node_dies, "exchange", str(runs))
    table = result["table"]
    assert np.array_equal(np.sort(table["id"].to_numpy()), np.arange(ROWS))
    # A seeded shuffle gives the same order on every run and backend: the local backend is
    # the oracle of the order, NumPy of the content.
    local_runs = tmp_path / "local"
    local_runs.mkdir()
    expected = pipeline("exchange", str(local_runs)).to_arrow()
    assert table["id"].equals(expected["id"])
    assert table["key"].equals(expected["key"])
    assert_rerun_elsewhere(str(runs), result["victim"])


def test_a_node_lost_mid_actor_stage_restarts_its_actor_elsewhere(cluster, tmp_path):
    folder = str(tmp_path)
    result = cluster.call(consume_while_a_node_dies, "actors", folder)
    table = result["table"]
    assert np.array_equal(np.sort(table["id"].to_numpy()), np.arange(ROWS))
    # (node, pid) of each construction, oldest first: three actors, one per node; after the
    # loss Ray constructed the lost node's actor again, on a live node (the fresh node
    # joins only after the job).
    built = [name.split("-")[1:] for name in sorted(os.listdir(folder))]
    first, later = [node for node, _ in built[:3]], [node for node, _ in built[3:]]
    assert len(set(first)) == 3 and result["victim"] in first, built
    assert later and result["victim"] not in later, built
    assert result["victim"] in set(table["actor_node"].to_pylist())


def kill_the_driver_node_mid_map(session, folder: str) -> None:
    """In the cluster's driver: the head node's raylet (the node this driver is on) dies
    while a map runs and its blocks are gathered (``materialize``: the driver holds their
    references, not their data); what the driver sees is raised."""
    import threading

    ds = sf.range(ROWS, override_num_blocks=BLOCKS).map_batches(
        slow_tag, fn_kwargs={"runs": folder}
    )

    def kill_after_two_runs() -> None:
        while len(os.listdir(folder)) < 2:
            time.sleep(0.05)
        session.head.kill_raylet()

    threading.Thread(target=kill_after_two_runs, daemon=True).start()
    ds.materialize()


def test_losing_the_driver_s_node_fails_saying_ray_cannot_recover(cluster, tmp_path):
    # The last test of the module: the cluster's driver cannot go on after this. Ray raises
    # in the driver (shardflow raises DriverNodeLostError instead), or ends the process at
    # its next use of the lost node's object store, after shardflow's watch of the node
    # wrote why; either way the reason is in what the user sees.
    with pytest.raises(AssertionError) as info:  # ClusterCallError: raised in the driver
        cluster.call(kill_the_driver_node_mid_map, str(tmp_path), timeout_s=240)
    seen = str(info.value) + cluster.log()
    assert "Ray cannot recover an execution whose driver's node is lost" in seen, seen[-4000:]
    if info.value.name != "DriverProcessDied":
        assert info.value.name == "DriverNodeLostError" or "DriverNodeLostError" in seen
    cluster.stop(kill=True)
