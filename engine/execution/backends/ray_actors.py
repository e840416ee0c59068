"""Actors of the Ray backend: Ray actors that construct the user's class once.

Each actor is a Ray actor holding the stage's transform; its ``__init__`` runs
``transform.setup()`` and keeps a constructor failure to report it (with the user's
traceback) instead of dying with Ray's generic creation error. Tasks are streaming-generator
calls of its ``run`` method, driven like the backend's other tasks.

CPUs: Ray Data 2.60 hangs when an actor pool reserves every CPU, because the tasks that feed
the pool can then never be scheduled (its issue 44687). Here the actors of all pools together
reserve at most the cluster's CPUs minus one, kept for tasks: a pool whose actors would take
more gets a smaller CPU request per actor (down to 0, which Ray schedules anywhere), and
grows only while the reservation has room.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from shardflow.engine.execution.arrow_memory import applied_memory_pool, apply_memory_pool
from shardflow.engine.execution.backends.base import ActorPoolPlan, ActorSpec, TaskSpec
from shardflow.engine.execution.backends.task_runner import DONE, ERROR
from shardflow.engine.execution.errors import TaskFailure

logger = logging.getLogger(__name__)
_EPS = 1e-9
_remote_class = None


class _MapActor:
    """The body of a Ray actor of an actor pool (made remote on first use)."""

    def __init__(self, transform: Any, op_name: str, memory_pool: str | None = None):
        apply_memory_pool(memory_pool)
        self._transform = transform
        self._failure: TaskFailure | None = None
        try:
            transform.setup()
        except BaseException as exc:
            self._failure = TaskFailure(op_name, exc)

    def ready(self) -> TaskFailure | None:
        return self._failure

    def run(self, ctx: Any, cuts: tuple, *inputs: Any):
        from shardflow.engine.execution.backends.ray_backend import cut_slices, stream_blocks

        yield from stream_blocks(self._transform, ctx, cut_slices(inputs, cuts))


class CpuLedger:
    """CPUs reserved by actors of every pool on this cluster (leaving one for tasks)."""

    def __init__(self, total: float):
        self.room = max(0.0, total - 1)
        self.reserved = 0.0
        self._lock = threading.Lock()

    def free(self) -> float:
        with self._lock:
            return max(0.0, self.room - self.reserved)

    def reserve(self, cpus: float) -> bool:
        with self._lock:
            if cpus > 0 and self.reserved + cpus > self.room + _EPS:
                return False
            self.reserved += cpus
            return True

    def release(self, cpus: float) -> None:
        with self._lock:
            self.reserved = max(0.0, self.reserved - cpus)


def plan_pool(
    ledger: CpuLedger,
    total_cpus: float,
    total_gpus: float,
    op_name: str,
    min_size: int,
    max_size: float,
    num_cpus: float | None,
    num_gpus: float | None,
) -> ActorPoolPlan:
    gpus = float(num_gpus or 0)
    cpus = float(num_cpus) if num_cpus is not None else (0.0 if gpus else 1.0)
    if gpus and min_size * gpus > total_gpus + _EPS:
        raise ValueError(
            f"{op_name} needs {min_size} actor(s) with num_gpus={num_gpus} each, but the Ray "
            f"cluster has {total_gpus:g} GPU(s). Lower num_gpus or the pool's size, or start "
            "Ray with logical GPUs (sf.init(backend='ray', num_gpus=n)) to try GPU scheduling."
        )
    free = ledger.free()
    if cpus and min_size * cpus > free + _EPS:
        fitted = math.floor(free / min_size * 100) / 100
        logger.info(
            "%s: %d actor(s) with num_cpus=%g would leave no CPU for tasks; each actor "
            "reserves %g CPU instead.",
            op_name,
            min_size,
            cpus,
            fitted,
        )
        cpus = fitted
    if math.isinf(max_size):
        max_size = max(min_size, int(total_cpus))
    if gpus:
        max_size = min(max_size, math.floor(total_gpus / gpus + _EPS))
    return ActorPoolPlan(cpus, gpus, int(max(min_size, max_size)))


class RayActor:
    """The driver's handle on one Ray actor of a pool."""

    def __init__(self, backend: Any, spec: ActorSpec, on_exit: Callable[[], None]):
        global _remote_class
        ray = backend.ray
        if _remote_class is None:
            _remote_class = ray.remote(_MapActor)
        # The pool retries a dead actor's tasks itself (on other actors), so Ray does not.
        options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0, **spec.remote_args}
        options.update(num_cpus=spec.num_cpus, num_gpus=spec.num_gpus)
        self._backend = backend
        self._spec = spec
        self._on_exit = on_exit
        self._ended = False
        self._lock = threading.Lock()
        self.actor = _remote_class.options(**options).remote(
            spec.transform, spec.op_name, applied_memory_pool()
        )
        backend.drivers.submit(self._await_ready)

    def _await_ready(self) -> None:
        from shardflow.engine.execution.backends.ray_backend import unwrap_ray_error

        spec = self._spec
        try:
            failure = self._backend.ray.get(self.actor.ready.remote())
        except BaseException as exc:
            failure = TaskFailure(spec.op_name, unwrap_ray_error(exc))
        if failure is None:
            spec.events.put((DONE, spec.actor_id, None, None))
        else:
            spec.events.put((ERROR, spec.actor_id, failure, None))

    def submit(self, spec: TaskSpec) -> None:
        from shardflow.engine.execution.backends.ray_backend import task_args

        generator = self.actor.run.options(
            num_returns="streaming", _generator_backpressure_num_objects=2
        ).remote(spec.ctx, *task_args(spec.inputs))
        self._backend.drive_generator(spec, generator)

    def alive(self) -> bool:
        return not self._ended

    def stop(self) -> None:
        self.kill()

    def kill(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        try:
            self._backend.ray.kill(self.actor, no_restart=True)
        except Exception:
            pass
        self._on_exit()
