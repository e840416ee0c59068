"""The ``cluster`` fixture: a simulated multi-node Ray cluster, one per test module.

The cluster and the driver that joins it run in a subprocess (cluster_driver.py), because
this process already holds the test session's one-node Ray. A test calls module-level
functions there: ``cluster.call(fn, *args)`` runs ``fn(session, *args)`` in the cluster's
driver and returns its result (a table, a dict: anything picklable), or raises
``ClusterCallError`` with the driver's traceback.

A module sets ``CLUSTER = {"workers": 3, ...}`` to change the defaults below. The tests
marked ``cluster_long`` run only under ``make test-cluster`` (``SHARDFLOW_TEST_CLUSTER=1``);
the default suite skips them and says so.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Client
from typing import Any

import pytest

DRIVER = os.path.join(os.path.dirname(__file__), "cluster_driver.py")
DEFAULTS = {"workers": 2, "worker_cpus": 1, "head_cpus": 0, "object_store_mb": 150}
START_TIMEOUT_S = 240  # a loaded two-core machine needs ~50 s for a head and two workers
CALL_TIMEOUT_S = 300
LONG_ENV = "SHARDFLOW_TEST_CLUSTER"


def pytest_collection_modifyitems(config, items):
    if os.environ.get(LONG_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"a long cluster test: run `make test-cluster` ({LONG_ENV}=1)")
    for item in items:
        if "cluster_long" in item.keywords:
            item.add_marker(skip)


class ClusterCallError(AssertionError):
    """A call failed in the cluster's driver; the message holds its traceback."""

    def __init__(self, name: str, remote_traceback: str):
        super().__init__(f"{name} in the cluster's driver:\n{remote_traceback}")
        self.name = name


class ClusterClient:
    """The test side of the cluster's driver process."""

    def __init__(self, process: subprocess.Popen, conn: Any, nodes: dict, log_path: str):
        self.process = process
        self.conn = conn
        self.head = nodes["head"]
        self.workers = nodes["workers"]
        self.log_path = log_path
        self._lock = threading.Lock()

    def call(self, fn: Any, *args: Any, timeout_s: float = CALL_TIMEOUT_S, **kwargs: Any) -> Any:
        """``fn(session, *args, **kwargs)`` in the cluster's driver; ``fn`` must be a
        module-level function of an importable module (a test module is)."""
        request = (fn.__module__, fn.__qualname__, args, kwargs)
        with self._lock:
            self.conn.send(request)
            if not self.conn.poll(timeout_s):
                self.stop(kill=True)
                raise TimeoutError(
                    f"{fn.__qualname__} ran past {timeout_s} s in the cluster's driver "
                    f"(its stacks and log: {self.log_path}):\n{self.log()[-6000:]}"
                )
            try:
                status, value = self.conn.recv()
            except (EOFError, OSError):
                code = self.process.wait(timeout=60)
                raise ClusterCallError(
                    "DriverProcessDied",
                    f"the cluster's driver exited with status {code} during {fn.__qualname__}; "
                    f"its log:\n{self.log()[-8000:]}",
                ) from None
        if status == "error":
            raise ClusterCallError(*value)
        return value

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as file:
                return file.read()
        except OSError:
            return ""

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None and not kill:
            try:
                self.conn.send("stop")
                self.process.wait(timeout=90)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            # Stacks first (faulthandler), then the whole session: the cluster goes with it.
            try:
                self.process.send_signal(signal.SIGTERM)
                time.sleep(1)
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self.conn.close()


def start_cluster(spec: dict, folder: str) -> ClusterClient:
    socket_path = os.path.join(folder, "driver.sock")
    log_path = os.path.join(folder, "driver.log")
    authkey = secrets.token_bytes(32)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["SHARDFLOW_CLUSTER_AUTHKEY"] = authkey.hex()
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with open(log_path, "w") as log:
        # A session of its own: after a hang the whole tree (the cluster too) is killed at once.
        process = subprocess.Popen(
            [sys.executable, DRIVER, socket_path, json.dumps(spec)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    connected: dict = {}

    def connect() -> None:
        try:
            while not os.path.exists(socket_path) and process.poll() is None:
                time.sleep(0.1)
            conn = Client(socket_path, family="AF_UNIX", authkey=authkey)
            connected["conn"] = conn
            connected["nodes"] = conn.recv()[1]
        except BaseException as exc:
            connected["error"] = exc

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(START_TIMEOUT_S)
    if "nodes" not in connected:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        with open(log_path, errors="replace") as file:
            output = file.read()
        pytest.fail(
            f"the cluster did not start within {START_TIMEOUT_S} s "
            f"({connected.get('error')!r}):\n{output[-6000:]}"
        )
    return ClusterClient(process, connected["conn"], connected["nodes"], log_path)


@pytest.fixture(scope="module")
def cluster(request):
    """A head node and worker nodes on 127.0.0.1, with a driver joined to them (see the
    module docstring); started once per test module."""
    spec = {**DEFAULTS, **getattr(request.module, "CLUSTER", {})}
    folder = tempfile.mkdtemp(prefix="shardflow-cluster-")
    client = start_cluster(spec, folder)
    try:
        yield client
    finally:
        client.stop()
