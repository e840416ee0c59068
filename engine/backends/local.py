"""The local backend: tasks run in this process's threads, or in worker processes.

Arrow, NumPy and Pillow release the GIL, so threads use every core for them. Pure-Python
row functions hold the GIL; those tasks run in a pool of long-lived worker processes
(engine/backends/worker_pool.py) that receive the pickled transform and its inputs.
Cancelling a process task kills its worker; a thread task stops at its next block.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pyarrow as pa

from shardflow.engine.backends.base import PROCESS, THREAD, Backend, TaskSpec
from shardflow.engine.backends.task_runner import DONE, ERROR, drive_task
from shardflow.engine.backends.worker_pool import WorkerProcessPool
from shardflow.engine.errors import TaskFailure
from shardflow.engine.refs import MemoryRef
from shardflow.engine.spill import spill_block

logger = logging.getLogger(__name__)
_MAX_THREADS = 256


class LocalBackend(Backend):
    """Runs tasks in threads of this process, or in local worker processes."""

    name = "local"

    def __init__(self, num_cpus: int):
        self._num_cpus = num_cpus
        # Each execution caps its own running tasks at num_cpus. The pools are larger so that
        # one execution whose tasks wait for its paused consumer (say, a loop over
        # iter_batches that calls count() inside) never blocks another execution.
        self._threads = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="shardflow")
        self._process_drivers = ThreadPoolExecutor(
            max_workers=_MAX_THREADS, thread_name_prefix="shardflow-proc"
        )

    def num_slots(self, kind: str) -> int:
        return self._num_cpus

    def launch(self, spec: TaskSpec) -> None:
        if spec.kind == PROCESS:
            self._process_drivers.submit(_run_in_process, spec)
        else:
            self._threads.submit(_run_in_thread, spec)

    def cancel(self, task_id: int) -> None:
        if WorkerProcessPool._instance is not None:
            WorkerProcessPool._instance.cancel(task_id)

    def put(self, block: Any) -> Any:
        return MemoryRef(block)

    def prepare_source_item(self, item: Any) -> Any:
        if isinstance(item, pa.Table):
            return MemoryRef(item)
        return item

    @property
    def spills_locally(self) -> bool:
        return True


def store_for(spec: TaskSpec) -> Callable[[Any], Any]:
    """How a block a task produced becomes a reference: in memory, or spilled to disk."""
    if spec.spill_dir is None:
        return MemoryRef
    folder = spec.spill_dir
    return lambda block: spill_block(block, folder)


def _run_in_thread(spec: TaskSpec) -> None:
    cancelled = getattr(spec.gate, "cancelled", None)
    if cancelled is not None:
        spec.ctx.cancelled = cancelled
    try:
        blocks = spec.transform(spec.inputs, spec.ctx)
    except BaseException as exc:
        spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))
        return
    drive_task(spec, blocks, store=store_for(spec))


def _run_in_process(spec: TaskSpec) -> None:
    pool = WorkerProcessPool.instance()
    try:
        worker = pool.checkout(spec.task_id)
    except Exception as exc:  # the zygote could not start a worker
        spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))
        return
    healthy = False
    try:
        healthy = worker.run(spec, store_for(spec))
    finally:
        pool.checkin(spec.task_id, worker, healthy)


__all__ = ["LocalBackend", "THREAD", "PROCESS", "DONE"]
