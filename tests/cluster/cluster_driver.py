"""A driver on a simulated multi-node Ray cluster that runs the test process's calls.

Usage: python cluster_driver.py SOCKET SPEC_JSON (tests/cluster/conftest.py starts it; the
authentication key comes in the environment, ``SHARDFLOW_CLUSTER_AUTHKEY``, as hex)

One process can hold only one Ray, and the test session already holds a one-node one, so the
cluster lives here: a ``ray.cluster_utils.Cluster`` of a head node (no CPU by default, as
on a real cluster's head: only the driver runs there) and worker nodes of one CPU and a
small object store each, every socket on 127.0.0.1. This process joins it with
``shardflow.init(backend="ray", address=...)`` and then serves calls on a unix socket: each
call names a module-level function ``fn(session, *args)`` of a test module (imported here by
name; the test's ``sys.path`` arrives as ``PYTHONPATH``, and Ray's workers inherit it, so the
functions and classes a test hands to shardflow load there too). It answers with the
function's result, or with the error's type and formatted traceback.

``stop`` (or the test process going away) ends the loop; the cluster always shuts down, and
``ray stop`` is never run.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Listener
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every socket on 127.0.0.1
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"

import psutil
import ray
from ray.cluster_utils import Cluster

import shardflow as sf

# The head notices a dead node within a few seconds instead of Ray's 15 s or more: a killed
# raylet refuses the check at once, so six failed checks take about three seconds. A live
# raylet answers within two seconds even on a machine loaded twenty times over its cores;
# tighter limits (0.2 s, three checks) made the head drop live nodes under such load.
HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 2000,
    "health_check_failure_threshold": 6,
}
LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


@dataclass
class ClusterSession:
    """What a called function gets: the cluster, its nodes, and measuring helpers.

    ``workers`` are the live worker nodes in the order they joined; ``lost`` the ids of
    nodes removed by ``kill_worker``.
    """

    cluster: Any
    spec: dict
    workers: list = field(default_factory=list)
    lost: list = field(default_factory=list)

    @property
    def head(self) -> Any:
        return self.cluster.head_node

    def node_ids(self) -> list[str]:
        """Ids of the live worker nodes."""
        return [node.node_id for node in self.workers]

    def add_worker(self) -> Any:
        """A fresh worker node like the others; returns its Ray node."""
        node = self.cluster.add_node(**worker_args(self.spec))
        self.cluster.wait_for_nodes()
        self.workers.append(node)
        return node

    def kill_worker(self, node: Any) -> None:
        """Kill a worker node at once, raylet and workers, as if its machine died."""
        self.workers.remove(node)
        self.lost.append(node.node_id)
        self.cluster.remove_node(node, allow_graceful=False)

    def store_stats(self, node: Any) -> dict:
        """The object store counters of one node: bytes created there over its life (by
        tasks, by ``ray.put``, or pulled in from other nodes), bytes in use now."""
        from ray._private.internal_api import node_stats

        stats = node_stats(
            node.address_info["node_ip_address"], node.node_manager_port, include_memory_info=False
        ).store_stats
        return {
            "created_bytes": int(stats.cumulative_created_bytes),
            "used_bytes": int(stats.object_store_bytes_used),
        }

    def processes(self) -> set[int]:
        """Pids of this process and everything it started (the cluster)."""
        me = psutil.Process()
        return {me.pid, *(p.pid for p in me.children(recursive=True))}


def worker_args(spec: dict) -> dict:
    return {
        "num_cpus": spec["worker_cpus"],
        "object_store_memory": spec["object_store_mb"] << 20,
        "resources": {"worker": 1},
    }


def start_cluster(spec: dict, attempts: int = 3) -> ClusterSession:
    """The cluster of ``spec``. Ray gives a node 30 s to register with the head, which a
    loaded machine can miss: then everything started is killed and the start is tried again."""
    for attempt in range(attempts):
        try:
            return _start_cluster(spec)
        except Exception:
            if attempt == attempts - 1:
                raise
            traceback.print_exc()
            kill_descendants()
    raise AssertionError("unreachable")


def kill_descendants() -> None:
    """SIGKILL every process this one started (a half-started cluster) and wait for them."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(children, timeout=30)


def _start_cluster(spec: dict) -> ClusterSession:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": spec["head_cpus"],
            "object_store_memory": spec["object_store_mb"] << 20,
            "include_dashboard": False,
            "_system_config": HEALTH,
        },
    )
    session = ClusterSession(cluster, spec)
    for _ in range(spec["workers"]):
        session.workers.append(cluster.add_node(**worker_args(spec)))
    cluster.wait_for_nodes()
    return session


def assert_loopback_only(pids: set[int]) -> None:
    """Every socket the cluster's processes listen on is on loopback."""
    listening = [
        conn
        for conn in psutil.net_connections(kind="inet")
        if conn.pid in pids and conn.status == psutil.CONN_LISTEN
    ]
    assert listening, "found no listening socket of the cluster: the check would be vacuous"
    outside = [f"{c.laddr.ip}:{c.laddr.port}" for c in listening if c.laddr.ip not in LOOPBACK]
    assert not outside, f"the cluster listens beyond loopback: {outside}"


def call(session: ClusterSession, request: tuple) -> tuple:
    module_name, qualname, args, kwargs = request
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
        return "ok", target(session, *args, **kwargs)
    except BaseException as exc:  # the test process raises it again, with this traceback
        return "error", (type(exc).__name__, traceback.format_exc()[-20000:])


def serve(listener: Listener, session: ClusterSession) -> None:
    with listener.accept() as conn:
        conn.send(("ready", {"head": session.head.node_id, "workers": session.node_ids()}))
        while True:
            try:
                request = conn.recv()
            except EOFError:  # the test process is gone
                return
            if request == "stop":
                conn.send(("ok", None))
                return
            conn.send(call(session, request))


def main() -> None:
    socket_path, spec = sys.argv[1], json.loads(sys.argv[2])
    faulthandler.register(15, all_threads=True, chain=True)  # a hang shows its stacks
    authkey = bytes.fromhex(os.environ.pop("SHARDFLOW_CLUSTER_AUTHKEY"))
    listener = Listener(socket_path, family="AF_UNIX", authkey=authkey)
    started = time.perf_counter()
    session = start_cluster(spec)
    status = 1
    try:
        sf.init(backend="ray", address=session.cluster.address, log_to_driver=False)
        assert_loopback_only(session.processes())
        print(f"cluster up in {time.perf_counter() - started:.1f} s", flush=True)
        serve(listener, session)
        status = 0
    except BaseException:
        traceback.print_exc()
    finally:
        listener.close()
        # Threads a call left running (Ray's, shardflow's) must not keep the process alive.
        threading.Timer(120, os._exit, (3,)).start()
        try:
            ray.shutdown()
        finally:
            session.cluster.shutdown()
    os._exit(status)


if __name__ == "__main__":
    main()
