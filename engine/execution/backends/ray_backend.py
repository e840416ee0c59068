"""The Ray backend: tasks are Ray streaming-generator tasks; blocks live in the object store.

Ray runs a failed task again itself (``max_retries``): after its worker died, or after an
exception its operator retries. Ray's streaming generators resume where the consumer is, so
a rerun delivers no block twice. The same setting lets Ray rebuild a block lost from the
object store (its node died) by running the task that made it again (lineage
reconstruction). The task pool therefore never retries Ray tasks; it still retries actor
tasks and tasks run on the driver.

Ray is imported only when this backend is created (by ``shardflow.init(backend="ray")``).
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

from shardflow.engine.execution.arrow_memory import applied_memory_pool, apply_memory_pool
from shardflow.engine.execution.backends.base import (
    DRIVER,
    ActorPoolPlan,
    ActorSpec,
    Backend,
    TaskSpec,
)
from shardflow.engine.execution.backends.daemon_pool import DaemonThreadPool
from shardflow.engine.execution.backends.ray_actors import CpuLedger, RayActor, plan_pool
from shardflow.engine.execution.backends.ray_interrupts import hold_interrupts_during_imports
from shardflow.engine.execution.backends.task_runner import BLOCK, DONE, ERROR, drive_task
from shardflow.engine.execution.errors import (
    DriverNodeLostError,
    TaskFailure,
    UserCodeError,
    WorkerCrashedError,
    is_retryable,
)
from shardflow.engine.execution.refs import MemoryRef, PicklingBlock, RayRef, SliceRef, for_ray
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.optional import require

_remote_task = None
_CANCEL_GRACE_S = 0.25
#: Tasks started per CPU of the cluster (see RayBackend.max_in_flight).
TASKS_PER_CPU = 4


class RetryableTaskError(Exception):
    """Raised by a Ray task in place of an error its operator retries: the one exception
    type in the task's ``retry_exceptions``, so that Ray decides with the operator's rule
    (``errors.is_retryable``) whatever the user's exception was wrapped in."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error

    def __reduce__(self) -> tuple:
        return RetryableTaskError, (self.error,)


def stream_blocks(transform, ctx, inputs, runs_before: int = 0):
    """What a Ray task or actor call yields: each block's (rows, bytes, runs_before, node),
    then the block; ``runs_before`` is how many times Ray ran the task before this run,
    ``node`` the id of the Ray node it runs on (``Dataset.stats()`` counts tasks per node).

    Metadata comes first so that the driver's ``ray.get`` of it raises a failed task's error.
    Every run of a task must yield as many items as the first one (Ray fails a rerun that
    rebuilds lost blocks otherwise), so what differs between runs goes in item values only.
    """
    from shardflow.engine.execution import task_timing
    from shardflow.sdk import task_stats

    node = _node_id()
    task_stats.reset()
    begun = task_timing.begin()
    for block in transform(list(inputs), ctx):
        yield (block.num_rows, block.nbytes, runs_before, node)
        yield for_ray(block)
    counters = dict(task_stats.take())
    counters["timing"] = task_timing.finish(begun)
    # Per-task counters and timing last, marked by a string where rows would be.
    yield ("counters", counters, runs_before, node)


_NODE_ID: str | None = None


def _node_id() -> str | None:
    """The id of the Ray node this worker process runs on (None outside Ray)."""
    global _NODE_ID
    if _NODE_ID is None:
        try:
            import ray

            _NODE_ID = ray.get_runtime_context().get_node_id()
        except Exception:
            return None
    return _NODE_ID


def _run_transform(transform, ctx, retry_exceptions, memory_pool, cuts, *inputs):
    """Body of the Ray task (``cuts``: see ``task_args``; ``memory_pool``: the Arrow pool
    the driver uses, see engine/execution/arrow_memory.py).

    An error the operator retries leaves as a RetryableTaskError (Ray then runs the task
    again).
    """
    apply_memory_pool(memory_pool)
    prepare_worker()
    try:
        yield from stream_blocks(transform, ctx, cut_slices(inputs, cuts), _runs_before())
    except Exception as exc:
        if retry_exceptions and is_retryable(_user_error(exc), retry_exceptions):
            raise RetryableTaskError(exc) from exc
        raise


def prepare_worker() -> None:
    """Make a Ray worker safe for shardflow's tasks, once per worker process, on the thread
    Ray runs the task on: cancellation waits for running imports (ray_interrupts.py), then
    pandas is imported before a task or actor starts threads of its own.

    pandas' C extensions import each other while pandas initialises: an import cut short (by
    a cancellation, or by a second thread importing it at the same moment) leaves a partially
    initialised module for the rest of the worker's life.
    """
    hold_interrupts_during_imports()
    if "pandas" not in sys.modules:
        try:
            import pandas  # noqa: F401
        except BaseException:
            # The half-initialised module would stay for the worker's life and fail every
            # later task there: end the worker, so Ray reruns the task (or restarts the
            # actor) in a fresh one.
            os._exit(1)


def _user_error(exc: BaseException) -> BaseException:
    """The user's own exception behind an error raised in a task."""
    if isinstance(exc, UserCodeError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def _runs_before() -> int:
    """How many times Ray ran this task before (after failures, or to rebuild lost blocks).

    Only statistics depend on it (``tasks retried`` in ``Dataset.stats()``); it is Ray's
    attempt number, an internal of its worker, and 0 where that is not available.
    """
    try:
        import ray

        worker = ray._private.worker.global_worker
        return int(worker.core_worker.get_current_task_attempt_number())
    except Exception:
        return 0


def ensure_ray(address: str | None = None, **init_kwargs: Any) -> None:
    """Start or join Ray. A Ray started here listens on 127.0.0.1 only."""
    ray = require("ray", "ray", "The Ray backend (shardflow.init(backend='ray'))")

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address is None:
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    init_kwargs.setdefault("log_to_driver", True)
    init_kwargs.setdefault("include_dashboard", False)
    ray.init(address=address, **init_kwargs)


class RayBackend(Backend):
    """Runs every task as a Ray task; references are ObjectRefs."""

    name = "ray"

    def __init__(self) -> None:
        ray = require("ray", "ray", "The Ray backend (shardflow.init(backend='ray'))")

        global _remote_task
        ensure_ray()
        self._ray = self.ray = ray
        if _remote_task is None:
            _remote_task = ray.remote(_run_transform)
        resources = ray.cluster_resources()
        self._cpus = max(1, int(resources.get("CPU", 1)))
        self._gpus = float(resources.get("GPU", 0))
        self._ledger = CpuLedger(float(resources.get("CPU", 1)))
        # One thread follows each running task's stream of blocks (docs/scaling.md: the
        # first limit on large clusters). Daemon threads: a task run in the driver (user code),
        # a wait on a task that is being cancelled, or its cancellation never holds the
        # program's exit (engine/execution/backends/daemon_pool.py).
        self._drivers = self.drivers = DaemonThreadPool(
            max(64, TASKS_PER_CPU * self._cpus + 16), "shardflow-ray"
        )
        self._generators: dict[int, Any] = {}
        self._cancelling: set = set()
        self._cancel_lock = threading.Lock()
        self._cancellers = DaemonThreadPool(4, "shardflow-cancel")
        self._task_functions: dict[tuple, Any] = {}
        self._transforms: dict[int, tuple[Any, Any]] = {}  # id -> (weak reference, ObjectRef)
        self._actor_nodes: list[str] = []  # nodes with CPUs, for placing actors in turn
        self._actors_placed = 0
        self.refresh()
        from shardflow.engine.execution.backends.ray_node_watch import watch_local_raylet

        watch_local_raylet(ray)  # says why the process ends if this driver's node dies

    def num_slots(self, kind: str) -> int:
        return self._cpus

    def max_in_flight(self, kind: str) -> int:
        # Tasks beyond the CPUs wait in Ray, which then hands a finished task's worker
        # lease to the next one instead of returning it and asking again: the driver spends
        # about a third less CPU per task, and tasks start sooner (docs/scaling.md). DRIVER
        # tasks run in this process.
        if kind == DRIVER:
            return self._cpus
        return TASKS_PER_CPU * self._cpus

    def retries_failed_tasks(self, kind: str, actor: Any) -> bool:
        # Ray tasks: Ray retries them (see the module's docstring); calls of a restartable
        # actor too (ray_actors.py). Driver tasks run in this process.
        if actor is not None:
            return bool(getattr(actor, "restartable", False))
        return kind != DRIVER

    def block_nodes(self, refs: list[Any]) -> list[frozenset[str]]:
        """The nodes holding each block (a slice: its block's), from what this process owns
        (``ray.experimental.get_local_object_locations``: no remote call); empty when
        unknown."""
        object_refs = [_object_ref(ref) for ref in refs]
        known = [ref for ref in object_refs if ref is not None]
        found = self._ray.experimental.get_local_object_locations(known) if known else {}
        return [
            frozenset((found.get(ref) or {}).get("node_ids") or ()) if ref is not None else _NONE
            for ref in object_refs
        ]

    def actor_nodes(self, actors: list[Any]) -> list[str | None]:
        """The node each Ray actor runs on (None while it is not placed yet)."""
        from ray._private import state

        nodes = []
        for actor in actors:
            info = state.actors(actor_id=actor._actor_id.hex()) or {}
            nodes.append((info.get("Address") or {}).get("NodeID") or None)
        return nodes

    def refresh(self) -> None:
        """Size the task slots and the actors' CPU reservation to the live nodes."""
        resources = self._ray.cluster_resources()
        cpus = float(resources.get("CPU", 1))
        self._cpus = max(1, int(cpus))
        self._gpus = float(resources.get("GPU", 0))
        self._ledger.resize(cpus)
        self._actor_nodes = sorted(
            node["NodeID"]
            for node in self._ray.nodes()
            if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0
        )

    def next_actor_placement(self) -> Any:
        """Where the next actor of a pool goes: the nodes with CPUs in turn, so that a
        pool's actors spread over the cluster (and an actor pool with locality finds an
        actor next to every block); ``soft``, so a node without room (or gone, when Ray
        restarts the actor) leaves the choice to Ray. Ray's own ``"SPREAD"`` may put two
        actors on one node while another's resources are still being returned."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._cancel_lock:
            nodes = self._actor_nodes
            if not nodes:
                return "SPREAD"
            node = nodes[self._actors_placed % len(nodes)]
            self._actors_placed += 1
        return NodeAffinitySchedulingStrategy(node_id=node, soft=True)

    def launch(self, spec: TaskSpec) -> None:
        if spec.actor is not None:
            spec.actor.submit(spec)
            return
        if spec.kind == DRIVER:
            self._drivers.submit(self._run_on_driver, spec)
            return
        retries = spec.retries
        options = {
            "max_retries": retries.max_retries,  # also bounds rebuilding lost blocks
            "retry_exceptions": [RetryableTaskError] if retries.retry_exceptions else False,
            "scheduling_strategy": scheduling_strategy(spec.inputs),
            **spec.remote_args,
        }
        generator = self._task_function(spec.op_name, options).remote(
            self._shared(spec.transform),
            spec.ctx,
            retries.retry_exceptions,
            applied_memory_pool(),
            *task_args(spec.inputs),
        )
        self.drive_generator(spec, generator)

    def _task_function(self, op_name: str, options: dict[str, Any]) -> Any:
        """The remote task with these options, made once per distinct options (Ray's
        ``options()`` copies and checks them on every call)."""
        key = (op_name, repr(sorted(options.items(), key=lambda item: item[0])))
        function = self._task_functions.get(key)
        if function is None:
            function = _remote_task.options(
                num_returns="streaming",
                name=op_name,
                _generator_backpressure_num_objects=2,
                **options,
            )
            if len(self._task_functions) > 1024:
                self._task_functions.clear()
            self._task_functions[key] = function
        return function

    def _shared(self, transform: Any) -> Any:
        """``transform`` in the object store, put there once per transform object: each
        task then carries a reference instead of a pickle of it, so the driver pickles a
        stage's functions (a model a closure holds) once, and each node fetches them once."""
        key = id(transform)
        with self._cancel_lock:
            entry = self._transforms.get(key)
            if entry is not None and entry[0]() is transform:
                return entry[1]
        try:
            alive = weakref.ref(transform)
        except TypeError:
            return transform
        ref = self._ray.put(transform)
        with self._cancel_lock:
            self._transforms = {k: v for k, v in self._transforms.items() if v[0]() is not None}
            self._transforms[key] = (alive, ref)
        return ref

    def holds_slot(self, task_id: int) -> bool:
        # A task that yielded its last block has ended in Ray and freed its CPU, though the
        # driver may still wait for room to take that block.
        generator = self._generators.get(task_id)
        if generator is None:
            return False
        try:
            ended, _ = self._ray.wait([generator.completed()], timeout=0)
        except Exception:  # a generator Ray no longer knows holds nothing
            return False
        return not ended

    def drive_generator(self, spec: TaskSpec, generator: Any) -> None:
        """Follow a streaming generator (a task or an actor call) on a driver thread."""
        self._generators[spec.task_id] = generator
        self._drivers.submit(self._drive, spec, generator)

    # -- actors -------------------------------------------------------------------------

    def plan_actor_pool(
        self,
        op_name: str,
        min_size: int,
        max_size: float,
        num_cpus: float | None,
        num_gpus: float | None,
    ) -> ActorPoolPlan:
        return plan_pool(
            self._ledger, self._cpus, self._gpus, op_name, min_size, max_size, num_cpus, num_gpus
        )

    def start_actor(self, spec: ActorSpec) -> RayActor | None:
        if not self._ledger.reserve(spec.num_cpus):
            return None
        cpus, ended = spec.num_cpus, spec.on_exit

        def on_exit() -> None:
            self._ledger.release(cpus)
            if ended is not None:
                ended()

        return RayActor(self, spec, on_exit)

    def _run_on_driver(self, spec: TaskSpec) -> None:
        try:
            blocks = spec.transform(spec.inputs, spec.ctx)
        except BaseException as exc:
            failure = TaskFailure(spec.op_name, unwrap_ray_error(exc))
            spec.events.put((ERROR, spec.task_id, failure, None))
            return
        drive_task(spec, blocks, store=self.put)

    def _drive(self, spec: TaskSpec, generator: Any) -> None:
        ray = self._ray
        counters = None
        retries = 0  # Ray's reruns of the task, as far as the blocks read from them tell
        node = None  # where its last run ran
        try:
            while True:
                # The block's metadata first, room in the budget second: a task still queued
                # in Ray (the executor starts more tasks than there are CPUs) must not hold
                # room that a running task needs, or the running one waits for the budget
                # while the queued one waits for its CPU. Taking the metadata lets the task
                # make one block more (Ray's back pressure holds it at two objects, a
                # block and its metadata), as much as it made ahead before.
                if spec.gate.cancelled():
                    self._cancel_generator(spec.task_id, generator)
                    break
                try:
                    meta_ref = next(generator)
                except StopIteration:
                    break
                rows, nbytes, runs_before, node = ray.get(meta_ref)
                retries = max(retries, runs_before)
                if rows == "counters":
                    counters = nbytes
                    break
                if not spec.gate.acquire():
                    self._cancel_generator(spec.task_id, generator)
                    break
                block_ref = next(generator)
                spec.gate.produced(nbytes)
                spec.events.put(
                    (BLOCK, spec.task_id, RayRef(block_ref), BlockMetadata(rows, nbytes))
                )
            if retries:
                counters = {**(counters or {}), "task_retries": retries}
            if node is not None:
                counters = {**(counters or {}), "node": node}
            spec.events.put((DONE, spec.task_id, counters, None))
        except BaseException as exc:
            spec.gate.unused()
            failure = TaskFailure(spec.op_name, unwrap_ray_error(exc))
            spec.events.put((ERROR, spec.task_id, failure, None))
        finally:
            self._generators.pop(spec.task_id, None)
            with self._cancel_lock:
                self._cancelling.discard(spec.task_id)

    def cancel(self, task_id: int) -> None:
        generator = self._generators.get(task_id)
        if generator is not None:
            self._cancel_generator(task_id, generator)

    def _cancel_generator(self, task_id: int, generator: Any) -> None:
        # Ray aborts the whole driver process (a failed RAY_CHECK, "Tried to complete task
        # that was not pending") when ray.cancel races with the task's own completion. So a
        # task is cancelled once, and only when it is still running after a short grace
        # period; tasks that were about to finish are left to finish.
        with self._cancel_lock:
            if task_id in self._cancelling:
                return
            self._cancelling.add(task_id)
        self._cancellers.submit(self._cancel_if_running, generator)

    def _cancel_if_running(self, generator: Any) -> None:
        try:
            done, _ = self._ray.wait(
                [generator.completed()], timeout=_CANCEL_GRACE_S, fetch_local=False
            )
            if not done:
                self._ray.cancel(generator)
        except Exception:
            pass

    def put(self, block: Any) -> Any:
        return RayRef(self._ray.put(for_ray(block)))

    def export_ref(self, ref: Any) -> Any:
        """An ObjectRef of a pyarrow Table, as Ray Data's ``to_arrow_refs`` returns."""
        if isinstance(ref, RayRef) and not self._is_pickled(ref):
            return ref.object_ref
        return self._ray.put(self.get(ref))

    def _is_pickled(self, ref: RayRef) -> bool:
        return isinstance(self._ray.get(ref.object_ref), PicklingBlock)

    def prepare_source_item(self, item: Any) -> Any:
        import pyarrow as pa

        if isinstance(item, MemoryRef):
            item = item.block
        return self.put(item) if isinstance(item, pa.Table) else item


_NONE: frozenset[str] = frozenset()


def scheduling_strategy(inputs: list[Any]) -> str:
    """Where Ray places a task, unless its stage says (``scheduling_strategy`` in its Ray
    remote arguments): next to its input blocks when it has some in the object store
    (``"DEFAULT"``: Ray leases a worker on the node holding most of the input's bytes, or
    another when that one is full), else spread over the nodes (``"SPREAD"``, as Ray Data
    places its tasks), so that reads and other tasks made from nothing use every node."""
    for item in inputs:
        if _object_ref(item) is not None:
            return "DEFAULT"
    return "SPREAD"


def _object_ref(ref: Any) -> Any:
    """The ObjectRef behind a block reference (a slice's block's), or None."""
    if isinstance(ref, SliceRef):
        ref = ref.parent
    if isinstance(ref, RayRef):
        return ref.object_ref
    return ref if type(ref).__name__ == "ObjectRef" else None


def task_args(inputs: list[Any]) -> list[Any]:
    """The arguments of a Ray task or actor call over ``inputs``: where to cut slices, then
    one argument per input.

    Blocks in the object store go to Ray as top-level object references: Ray fetches them
    before the task starts, and can rebuild them from lineage when they were lost. A row
    range of one (SliceRef) goes as its block's reference, with (position, offset, length)
    in the cuts. Nested inside another argument, a lost reference would not be rebuilt: a
    rerun of the task would wait for it without end.
    """
    cuts, args = [], []
    for position, item in enumerate(inputs):
        if isinstance(item, SliceRef) and isinstance(item.parent, RayRef):
            cuts.append((position, item.offset, item.length))
            item = item.parent
        args.append(item.object_ref if isinstance(item, RayRef) else item)
    return [tuple(cuts), *args]


def cut_slices(inputs: tuple[Any, ...], cuts: tuple[tuple[int, int, int], ...]) -> list[Any]:
    """Inside the task: the inputs, with the row ranges ``task_args`` sent whole cut again."""
    items = list(inputs)
    for position, offset, length in cuts:
        items[position] = SliceRef(items[position], offset, length)
    return items


def unwrap_ray_error(exc: BaseException) -> BaseException:
    """The user's exception inside a RayTaskError, or a crash error for a dead worker."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, RetryableTaskError):
        return cause.error
    if isinstance(cause, BaseException):
        return cause
    name = type(exc).__name__
    if name == "LocalRayletDiedError":
        return DriverNodeLostError(str(exc))
    crashed = ("WorkerCrashed", "ActorDied", "RayActorError", "ActorUnavailable", "ObjectLost")
    if any(word in name for word in crashed):
        return WorkerCrashedError(str(exc))
    return exc
