"""The local backend: tasks run in this process's threads, or in worker processes.

Arrow, NumPy and Pillow release the GIL, so threads use every core for them. Pure-Python
row functions hold the GIL; those tasks run in a pool of long-lived worker processes
(engine/execution/backends/worker_pool.py) that receive the pickled transform and its inputs.
Cancelling a process task kills its worker; a thread task stops at its next block. Task
threads are daemon threads (engine/execution/backends/daemon_pool.py): a user function still
running in an abandoned task never holds the program's exit.
Actor pools run in actors (engine/execution/backends/local_actors.py): worker processes of their own,
each with its share of the GPUs declared or found (engine/execution/backends/gpus.py).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.backends.base import (
    PROCESS,
    THREAD,
    ActorHandle,
    ActorPoolPlan,
    ActorSpec,
    Backend,
    TaskSpec,
)
from shardflow.engine.execution.backends.daemon_pool import DaemonThreadPool
from shardflow.engine.execution.backends.gpus import GpuAllocator, actors_that_fit, visible_devices
from shardflow.engine.execution.backends.task_runner import DONE, ERROR, drive_task
from shardflow.engine.execution.backends.worker_pool import WorkerProcessPool
from shardflow.engine.execution.errors import TaskFailure
from shardflow.engine.execution.refs import MemoryRef
from shardflow.engine.execution.spill import spill_block

logger = logging.getLogger(__name__)
_MAX_THREADS = 256


class LocalBackend(Backend):
    """Runs tasks in threads of this process, or in local worker processes."""

    name = "local"

    def __init__(self, num_cpus: int, num_gpus: int | None = None):
        self._num_cpus = num_cpus
        self._gpus = GpuAllocator.for_devices(visible_devices(num_gpus))
        self._declared_gpus = num_gpus
        # Each execution caps its own running tasks at num_cpus. The pools are larger so that
        # one execution whose tasks wait for its paused consumer (say, a loop over
        # iter_batches that calls count() inside) never blocks another execution.
        self._threads = DaemonThreadPool(_MAX_THREADS, "shardflow")
        self._process_drivers = DaemonThreadPool(_MAX_THREADS, "shardflow-proc")

    def num_slots(self, kind: str) -> int:
        return self._num_cpus

    def launch(self, spec: TaskSpec) -> None:
        if spec.actor is not None:
            spec.actor.submit(spec)
        elif spec.kind == PROCESS:
            self._process_drivers.submit(_run_in_process, spec)
        else:
            self._threads.submit(_run_in_thread, spec)

    def cancel(self, task_id: int) -> None:
        if WorkerProcessPool._instance is not None:
            WorkerProcessPool._instance.cancel(task_id)

    # -- actors -------------------------------------------------------------------------

    def plan_actor_pool(
        self,
        op_name: str,
        min_size: int,
        max_size: float,
        num_cpus: float | None,
        num_gpus: float | None,
    ) -> ActorPoolPlan:
        cpus = 1.0 if num_cpus is None else float(num_cpus)
        gpus = float(num_gpus or 0)
        devices = len(self._gpus.devices)
        fit = actors_that_fit(devices, gpus)
        if min_size > fit:
            where = (
                f"{devices} declared with sf.init(num_gpus={self._declared_gpus})"
                if self._declared_gpus is not None
                else f"{devices} on this machine"
            )
            raise ValueError(
                f"{op_name} needs {min_size} actor(s) with num_gpus={num_gpus} each, but there "
                f"are only {devices} GPU(s) ({where}). Lower num_gpus or the pool's size, or "
                "declare logical GPUs with sf.init(num_gpus=n) to try GPU scheduling on a "
                "machine without them."
            )
        if math.isinf(max_size):  # an unbounded pool grows to one actor per CPU it asks for
            max_size = max(min_size, int(self._num_cpus // cpus) if cpus > 0 else self._num_cpus)
        return ActorPoolPlan(cpus, gpus, int(min(max_size, fit)))

    def start_actor(self, spec: ActorSpec) -> ActorHandle | None:
        from shardflow.engine.execution.backends.local_actors import ProcessActor, ThreadActor
        from shardflow.engine.execution.backends.process_worker import in_worker

        gpus: list[Any] | None = None
        if spec.num_gpus > 0:
            gpus = self._gpus.acquire(spec.num_gpus)
            if gpus is None:
                return None
            allocator, taken, ended = self._gpus, gpus, spec.on_exit

            def on_exit() -> None:
                allocator.release(taken)
                if ended is not None:
                    ended()

            spec.on_exit = on_exit
        actor_class = ThreadActor if in_worker() else ProcessActor
        return actor_class(spec, gpus).start()

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
    returned = False

    def give_back() -> None:
        # Before the task's DONE event: the executor starts the next task on hearing it, and
        # that task must find this worker idle rather than fork another (which then competes
        # with the others for the cores: B3 spent ~0.25 s of CPU on such a worker).
        nonlocal returned
        returned = True
        pool.checkin(spec.task_id, worker, True)

    healthy = False
    try:
        healthy = worker.run(spec, store_for(spec), before_done=give_back)
    finally:
        if not returned:
            pool.checkin(spec.task_id, worker, healthy)


__all__ = ["LocalBackend", "THREAD", "PROCESS", "DONE"]
