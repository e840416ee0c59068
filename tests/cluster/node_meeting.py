"""Tasks that wait for each other on every node of a test cluster.

Ray hands a finished task's worker the next queued task of the same kind. On a loaded
machine the small tasks of these tests can all finish on the first node's warm worker before
another node has started a worker, and checks of where tasks ran or where blocks live would
fail for a reason that is not shardflow's. A task held in ``meet`` keeps its node's only CPU
busy until tasks on the other nodes have arrived, as tasks that take longer than a worker's
start would.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

#: How long a task waits for the others before it goes on alone (the check then fails).
MEET_TIMEOUT_S = 120


def node_of_process() -> str:
    """The Ray node a task or actor runs on; "local" elsewhere (also in a driver that has
    started Ray, as a test process that ran Ray tests before has)."""
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            context = ray.get_runtime_context()
            if context.get_task_id() is not None:
                return context.get_node_id()
    return "local"


def meeting_place(parent: str | None = None) -> str:
    """A fresh folder for one run's meetings (in ``parent``, or the system's temp folder)."""
    if parent is not None:
        os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix="meet-", dir=parent)


def meet(folder: str, node: str, nodes: int) -> None:
    """Leave a file naming ``node`` in ``folder`` and wait until tasks on ``nodes``
    different nodes have done the same."""
    open(os.path.join(folder, node), "w").close()
    deadline = time.monotonic() + MEET_TIMEOUT_S
    while len(os.listdir(folder)) < nodes and time.monotonic() < deadline:
        time.sleep(0.05)
