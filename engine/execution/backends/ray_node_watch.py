"""Saying why a driver whose Ray node died stops.

Ray cannot recover a job whose driver's node is lost: the driver owns every block (Ray keeps
an object's metadata with its owner), and it reaches the cluster through its node's raylet
and object store. What the user sees then depends on where the driver was: a Ray call
raises ``LocalRayletDiedError`` (shardflow raises ``DriverNodeLostError`` in its place), or
Ray ends the process at its next use of the node's object store, with status 1 and a line
in the session's log files only, so that the script seems to die without a reason.

A daemon thread therefore waits for the local raylet process to exit and, unless this
process disconnected from Ray first (``ray.shutdown()``), writes the reason to stderr. It
watches only a raylet on this machine that it can find (a driver joining a cluster through
Ray Client has none). Ray's exit and the message race: when the driver uses the object
store in the very instant the node dies, the process may end before the message is out,
and only Ray's log files say why.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_started = False
_lock = threading.Lock()

MESSAGE = (
    "shardflow: the Ray node this driver runs on died (its raylet, pid {pid}, exited). Ray "
    "cannot recover an execution whose driver's node is lost: the driver owns every block, "
    "and retries and lineage reconstruction go through that node. Ray ends this process; run "
    "the job again from a driver on a live node.\n"
)


def watch_local_raylet(ray: Any) -> None:
    """Start the watch once per process (no-op when the raylet is not found here)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    try:
        raylet = _local_raylet(ray)
    except Exception:
        return
    if raylet is not None:
        threading.Thread(
            target=_wait, args=(ray, raylet), name="shardflow-raylet-watch", daemon=True
        ).start()


def _local_raylet(ray: Any) -> Any:
    """The psutil.Process of this driver's raylet, found by its socket, or None."""
    import psutil

    node = getattr(ray._private.worker.global_worker, "node", None)
    socket = getattr(node, "raylet_socket_name", None)
    if not socket:
        return None
    flag = f"--raylet_socket_name={socket}"
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info.get("name") == "raylet" and flag in (process.info.get("cmdline") or ()):
            return process
    return None


def _wait(ray: Any, raylet: Any) -> None:
    _wait_for_exit(raylet)
    if ray.is_initialized():  # not a shutdown: ray.shutdown() disconnects first
        os.write(2, MESSAGE.format(pid=raylet.pid).encode())


def _wait_for_exit(process: Any) -> None:
    """Return as soon as ``process`` (a psutil.Process) has exited: at once through a pidfd
    (Linux 5.3 and newer), where Ray's own exit races with the message, else by polling."""
    import psutil

    try:
        fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        try:
            process.wait()
        except psutil.Error:
            pass
        return
    try:
        import select

        select.select([fd], [], [])  # readable once the process has exited
    finally:
        os.close(fd)
