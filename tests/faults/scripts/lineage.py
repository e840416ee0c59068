"""Blocks lost with a Ray node are rebuilt from lineage; writes what it saw for the test.

Usage: python lineage.py WORK_DIR (tests/faults/test_faults_lineage.py runs it)

Starts a local Ray cluster of two nodes on 127.0.0.1 (the head, and a worker node with the
custom resource ``worker``), joins it with ``shardflow.init(backend="ray", address=...)``
and materializes, with every block on the worker node:

- ``map``: a map stage placed there with ``resources={"worker": 1}``;
- ``sort`` and ``shuffle``: a sort and a random shuffle of that stage's output (their tasks
  ask for no resource; the head's CPU is held by an idle actor, so they run there too);
- ``actor``: an actor-pool stage placed there.

Then the worker node is killed, a fresh one with the same resource joins, and each dataset
is consumed twice: through a downstream map stage, then with ``take_all``. The rows go to
``WORK_DIR/<case>_<consumer>.parquet`` for the test to compare with its oracles;
``WORK_DIR/result.json`` says where each block was before and after, on which nodes the map
function ran, and what consuming the actor stage's output raised.

The cluster always shuts down (``finally``, also after the script's own time limit), ``ray
stop`` is never run, the script asserts that every socket the cluster listens on is on
loopback, and it reports any of the cluster's processes that outlives the shutdown.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # Ray listens on 127.0.0.1 only
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import shardflow as sf

ROWS = 400_000
BLOCKS = 8  # 50,000 rows each: 400 KB and more, so blocks live in the node's object store
WORKER = {"worker": 1}
TIME_LIMIT_S = 100  # then the cluster is shut down and the script fails
# The head notices a dead node within about a second instead of Ray's 15 s or more.
HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_timeout_ms": 200,
    "health_check_failure_threshold": 3,
}
LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


class RecordRuns:
    """The map stage's function: adds ``key`` (a permutation of the ids) and records the node
    of every run in ``path``, one line per batch."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, batch: dict) -> dict:
        with open(self.path, "a") as log:
            log.write(ray.get_runtime_context().get_node_id() + "\n")
        batch["key"] = (batch["id"] * 7919) % ROWS
        return batch


class AddOne:
    """The actor stage's callable class."""

    def __call__(self, batch: dict) -> dict:
        batch["plus"] = batch["id"] + 1
        return batch


def double(batch: dict) -> dict:
    """The downstream stage run over each rebuilt dataset."""
    batch["twice"] = batch["id"] * 2
    return batch


@ray.remote(num_cpus=1)
class Holder:
    """Holds the head node's CPU, so that tasks without a custom resource run elsewhere."""

    def ready(self) -> bool:
        return True


def object_refs(ds) -> list:
    """The ObjectRefs of a materialized dataset's blocks (read without fetching them: a copy
    on the head node would survive the worker node)."""
    return [ref.object_ref for ref in ds._plan.source.blocks]


def nodes_of(refs: list) -> list[list[str]]:
    locations = ray.experimental.get_object_locations(refs)
    return [sorted(locations[ref]["node_ids"]) for ref in refs]


def tree_pids() -> set[int]:
    me = psutil.Process()
    return {me.pid, *(p.pid for p in me.children(recursive=True))}


def assert_loopback_only(pids: set[int]) -> None:
    """Every socket the cluster's processes listen on is on loopback."""
    listening = [
        conn
        for conn in psutil.net_connections(kind="inet")
        if conn.pid in pids and conn.status == psutil.CONN_LISTEN
    ]
    assert listening, "found no listening socket of the cluster: the check would be vacuous"
    outside = [
        f"{c.laddr.ip}:{c.laddr.port} (pid {c.pid})"
        for c in listening
        if c.laddr.ip not in LOOPBACK
    ]
    assert not outside, f"the cluster listens beyond loopback: {outside}"


def consume(name: str, ds, work: str) -> None:
    """Write the rows of a downstream stage over ``ds``, then of ``ds`` itself."""
    downstream = ds.map_batches(double, resources=WORKER)
    pq.write_table(pa.Table.from_pylist(downstream.take_all()), f"{work}/{name}_map.parquet")
    pq.write_table(pa.Table.from_pylist(ds.take_all()), f"{work}/{name}_take.parquet")


def materialize_all(runs_log: str) -> dict:
    """The four cases, materialized; every block on the worker node."""
    mapped = sf.range(ROWS, override_num_blocks=BLOCKS).map_batches(
        RecordRuns(runs_log), resources=WORKER
    )
    actors = sf.range(ROWS, override_num_blocks=BLOCKS).map_batches(
        AddOne, compute=sf.ActorPoolStrategy(size=1), num_cpus=0, resources=WORKER
    )
    return {
        "map": mapped.materialize(),
        "sort": mapped.sort("key").materialize(),
        "shuffle": mapped.random_shuffle(seed=7).materialize(),
        "actor": actors.materialize(),
    }


def main() -> None:
    work = sys.argv[1]
    signal.signal(signal.SIGALRM, _time_out)
    signal.alarm(TIME_LIMIT_S)
    runs_log = os.path.join(work, "map_runs.txt")
    result: dict = {"cases": {}}
    pids: set[int] = set()
    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH},
    )
    try:
        lost = cluster.add_node(num_cpus=1, resources=WORKER)
        cluster.wait_for_nodes()
        sf.init(backend="ray", address=cluster.address, log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        holder = Holder.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)
        ).remote()
        ray.get(holder.ready.remote())

        datasets = materialize_all(runs_log)
        refs = {name: object_refs(ds) for name, ds in datasets.items()}
        for name, case_refs in refs.items():
            result["cases"][name] = {"before": nodes_of(case_refs)}
        with open(runs_log) as log:
            result["map_runs_before"] = log.read().split()
        pids |= tree_pids()
        assert_loopback_only(pids)

        cluster.remove_node(lost, allow_graceful=False)  # as if the machine died
        fresh = cluster.add_node(num_cpus=1, resources=WORKER)
        cluster.wait_for_nodes()
        result.update(lost_node=lost.node_id, fresh_node=fresh.node_id, head_node=head)

        for name in ("map", "sort", "shuffle"):
            consume(name, datasets[name], work)
            result["cases"][name]["after"] = nodes_of(refs[name])
        try:
            consume("actor", datasets["actor"], work)
            result["actor_error"] = None
        except Exception as exc:  # an actor's output cannot be rebuilt (see the test)
            chain: list[str] = []
            cause: BaseException | None = exc
            while cause is not None and len(chain) < 8:
                chain.append(type(cause).__name__)
                cause = cause.__cause__
            result["actor_error"] = f"{' <- '.join(chain)}: {exc}"[:2000]
        with open(runs_log) as log:
            result["map_runs_after"] = log.read().split()
        pids |= tree_pids()
        assert_loopback_only(pids)
    finally:
        ray.shutdown()
        cluster.shutdown()
        signal.alarm(0)
    result["left_running"] = left_running(pids - {os.getpid()})
    result["seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(work, "result.json"), "w") as out:
        json.dump(result, out)


def _time_out(signum: int, frame: Any) -> None:
    faulthandler.dump_traceback(all_threads=True)
    raise TimeoutError(f"lineage.py did not finish within {TIME_LIMIT_S} s")


def left_running(pids: set[int], wait_s: float = 10.0) -> list[str]:
    """The cluster's processes still alive ``wait_s`` seconds after its shutdown."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for pid in pids:
            try:
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {process.name()}")
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


if __name__ == "__main__":
    main()
