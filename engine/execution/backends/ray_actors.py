"""Actors of the Ray backend: Ray actors that construct the user's class once.

Each actor is a Ray actor holding the stage's transform; its ``__init__`` runs
``transform.setup()`` and keeps a constructor failure to report it (with the user's
traceback) instead of dying with Ray's generic creation error. Tasks are streaming-generator
calls of its ``run`` method, driven like the backend's other tasks.

Failures: as in Ray Data, Ray restarts an actor whose process or node died (``max_restarts``:
the stage's ``max_retries`` unless its Ray remote arguments say otherwise), on another node
when its own is gone, constructing the user's class again. Its calls are retried by Ray
without a count of their own (``max_task_retries=-1``, as Ray Data does: calls sent while
the actor restarts fail at once, and a count would be spent before the actor is back), so a
call cut short by the death runs again on the restarted actor, its stream resuming where the
driver is, and Ray rebuilds lost outputs of the actor by running their calls again while the
pool lives. Crashes are bounded by the restarts; an exception the stage retries is raised as
``RetryableTaskError`` only while the call has run fewer than ``max_retries`` times before.
The pool retries nothing itself (``RayBackend.retries_failed_tasks``). An actor with
``max_restarts=0`` is not restarted; its pool retries its tasks on other actors.

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
import time
from collections.abc import Callable
from typing import Any

from shardflow.engine.execution.arrow_memory import applied_memory_pool, apply_memory_pool
from shardflow.engine.execution.backends.base import ActorPoolPlan, ActorSpec, Retries, TaskSpec
from shardflow.engine.execution.backends.task_runner import DONE, ERROR
from shardflow.engine.execution.errors import TaskFailure

logger = logging.getLogger(__name__)
_EPS = 1e-9
_remote_class = None
#: How often the driver looks at a starting actor's state in Ray's control store.
_READY_POLL_S = 5.0
#: An actor the control store has called alive this long without its first call returning
#: is replaced (see ``RayActor._first_call``), at most ``_READY_REPLACEMENTS`` times.
_LOST_READY_S = 20.0
_READY_REPLACEMENTS = 2


class _MapActor:
    """The body of a Ray actor of an actor pool (made remote on first use)."""

    def __init__(self, transform: Any, op_name: str, memory_pool: str | None = None):
        from shardflow.engine.execution.backends.ray_backend import prepare_worker

        apply_memory_pool(memory_pool)
        prepare_worker()
        self._transform = transform
        self._failure: TaskFailure | None = None
        try:
            transform.setup()
        except BaseException as exc:
            self._failure = TaskFailure(op_name, exc)

    def ready(self) -> tuple[TaskFailure | None, str | None]:
        """The constructor's failure (None: it succeeded), and the node the actor is on."""
        from shardflow.engine.execution.backends.ray_backend import _node_id

        return self._failure, _node_id()

    def run(self, ctx: Any, retries: Retries, cuts: tuple, *inputs: Any):
        from shardflow.engine.execution.backends.ray_backend import (
            RetryableTaskError,
            _runs_before,
            _user_error,
            cut_slices,
            stream_blocks,
        )
        from shardflow.engine.execution.errors import is_retryable

        runs_before = _runs_before()
        try:
            yield from stream_blocks(self._transform, ctx, cut_slices(inputs, cuts), runs_before)
        except Exception as exc:
            allowed = retries.retry_exceptions
            left = retries.max_retries < 0 or runs_before < retries.max_retries
            if allowed and left and is_retryable(_user_error(exc), allowed):
                raise RetryableTaskError(exc) from exc
            raise


class CpuLedger:
    """CPUs reserved by actors of every pool on this cluster (leaving one for tasks)."""

    def __init__(self, total: float):
        self.room = max(0.0, total - 1)
        self.reserved = 0.0
        self._lock = threading.Lock()

    def resize(self, total: float) -> None:
        """The cluster now has ``total`` CPUs (nodes joined or died)."""
        with self._lock:
            self.room = max(0.0, total - 1)

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
        # Ray restarts a dead actor and runs its calls again (see the module's docstring).
        options: dict[str, Any] = {"max_restarts": spec.max_restarts, **spec.remote_args}
        if "scheduling_strategy" not in options:
            options["scheduling_strategy"] = backend.next_actor_placement()
        options.update(num_cpus=spec.num_cpus, num_gpus=spec.num_gpus)
        self.restartable = options["max_restarts"] != 0
        self._own_task_retries = "max_task_retries" in spec.remote_args
        self._backend = backend
        self._spec = spec
        self._on_exit = on_exit
        self._ended = False
        self._lock = threading.Lock()
        self.node_id: str | None = None  # known once it is ready; updated by its tasks
        self._options = options
        self.actor = self._create()
        backend.drivers.submit(self._await_ready)

    def _create(self) -> Any:
        spec = self._spec
        return _remote_class.options(**self._options).remote(
            spec.transform, spec.op_name, applied_memory_pool()
        )

    def _await_ready(self) -> None:
        from shardflow.engine.execution.backends.ray_backend import unwrap_ray_error

        spec = self._spec
        try:
            failure, self.node_id = self._first_call()
        except BaseException as exc:
            failure = TaskFailure(spec.op_name, unwrap_ray_error(exc))
        if failure is None:
            spec.events.put((DONE, spec.actor_id, None, None))
        else:
            spec.events.put((ERROR, spec.actor_id, failure, None))

    def _first_call(self) -> tuple[TaskFailure | None, str | None]:
        """The answer of the actor's ``ready`` call.

        Waits through restarts: a node lost while the actor is constructed is not a failure
        of the user's constructor. In a long-lived Ray session, now and then the driver never
        learns that an actor it created is alive (Ray's control store has it alive, its
        worker ran the constructor, yet the first call stays queued in the driver for good),
        which would hold the pipeline forever; such an actor is killed and created again.
        """
        ray = self._backend.ray
        replacements = 0
        while True:
            ready = self.actor.ready.options(max_task_retries=-1 if self.restartable else 0)
            ref = ready.remote()
            if replacements == _READY_REPLACEMENTS or not self._first_call_lost(ref):
                return ray.get(ref)  # answered, or waited on as Ray would
            logger.warning(
                "%s: an actor Ray reports alive did not answer its first call in %.0f s; "
                "starting another in its place.",
                self._spec.op_name,
                _LOST_READY_S,
            )
            with self._lock:
                if self._ended:
                    return ray.get(ref)
                try:
                    ray.kill(self.actor, no_restart=True)
                except Exception:
                    pass
                self.actor = self._create()
            replacements += 1

    def _first_call_lost(self, ref: Any) -> bool:
        """False once ``ref`` is answered or the actor ended; True when Ray's control store
        has had the actor alive for ``_LOST_READY_S`` without an answer."""
        ray = self._backend.ray
        alive_since: float | None = None
        while True:
            done, _ = ray.wait([ref], timeout=_READY_POLL_S, fetch_local=False)
            if done or self._ended:
                return False
            if _control_store_state(self.actor) != "ALIVE":
                alive_since = None
            elif alive_since is None:
                alive_since = time.monotonic()
            elif time.monotonic() - alive_since >= _LOST_READY_S:
                return True

    def submit(self, spec: TaskSpec) -> None:
        from shardflow.engine.execution.backends.ray_backend import RetryableTaskError, task_args

        retries = spec.retries
        options: dict[str, Any] = {
            "num_returns": "streaming",
            "_generator_backpressure_num_objects": 2,
        }
        if self.restartable and not self._own_task_retries:
            options["max_task_retries"] = -1  # bounded by the restarts (module docstring)
            options["retry_exceptions"] = (
                [RetryableTaskError] if retries.retry_exceptions else False
            )
        generator = self.actor.run.options(**options).remote(
            spec.ctx, retries, *task_args(spec.inputs)
        )
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


def _control_store_state(actor: Any) -> str | None:
    """The actor's state in Ray's control store (GCS), or None where it cannot be read."""
    try:
        from ray._private import state

        return state.actors(actor_id=actor._actor_id.hex()).get("State")
    except Exception:
        return None
