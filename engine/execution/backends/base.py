"""The interface between the streaming executor and the place tasks run.

A backend runs a task (a fused transform over a list of inputs) and reports, through the
task's event queue, each block it produced, its end, or its failure. Before producing each
block the backend asks the task's gate for room in the memory budget; a gate that answers
False means the task was cancelled and must stop.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from shardflow.engine.execution.stages.transforms import FusedTransform
from shardflow.sdk.datasink import TaskContext

THREAD = "thread"
PROCESS = "process"
DRIVER = "driver"  # must run in the driver process, whatever the backend


class Gate(Protocol):
    def acquire(self) -> bool:
        """Wait for room for one more block; False means stop (cancelled)."""

    def produced(self, nbytes: int) -> None:
        """Account a block of ``nbytes`` produced after a successful acquire."""

    def unused(self) -> None:
        """Return the room of an acquire that produced no block."""

    def cancelled(self) -> bool:
        """Whether the task should stop."""


@dataclass(frozen=True)
class Retries:
    """How often a failed task may run again, for a backend that retries tasks itself.

    ``max_retries`` counts further runs (-1: without end); a worker's death is always
    retried, an exception only when ``retry_exceptions`` allows it (True: any Exception;
    a tuple: those types), as ``errors.is_retryable`` decides.
    """

    max_retries: int = 0
    retry_exceptions: bool | tuple[type[BaseException], ...] = False


@dataclass
class TaskSpec:
    """One task to run: ``transform(inputs, ctx)`` yields the task's output blocks."""

    task_id: int
    op_name: str
    transform: FusedTransform
    inputs: list[Any]
    ctx: TaskContext
    kind: str
    events: queue.Queue
    gate: Gate
    spill_dir: str | None = None  # local backend: store produced blocks as files here
    actor: ActorHandle | None = None  # run on this actor (an actor pool's task)
    remote_args: dict[str, Any] = field(default_factory=dict)  # Ray: resources of the task
    retries: Retries = field(default_factory=Retries)  # backends that retry tasks themselves


@dataclass
class ActorSpec:
    """One actor to start: a long-lived worker that runs ``transform.setup()`` once, then
    the tasks submitted to it. Its start ends with a DONE or ERROR event for ``actor_id``."""

    actor_id: int
    op_name: str
    transform: FusedTransform
    events: queue.Queue
    num_cpus: float
    num_gpus: float
    remote_args: dict[str, Any] = field(default_factory=dict)
    on_exit: Callable[[], None] | None = None  # called once when the actor has ended
    #: Ray: how often Ray restarts the actor after its process or node died (-1: without
    #: end), so that its tasks run again there and its lost outputs can be rebuilt.
    max_restarts: int = 0


@dataclass
class ActorPoolPlan:
    """What a backend grants an actor pool: CPUs per actor and the most actors at once."""

    num_cpus: float
    num_gpus: float
    max_actors: int


class ActorHandle(Protocol):
    def submit(self, spec: TaskSpec) -> None:
        """Queue a task on the actor; its events arrive on ``spec.events``."""

    def alive(self) -> bool:
        """False once the actor has died or was stopped."""

    def stop(self) -> None:
        """End the actor after the tasks submitted to it (returns at once)."""

    def kill(self) -> None:
        """End the actor now; its queued and running tasks fail."""


class Backend:
    """Where tasks run and where blocks live. Implemented by LocalBackend and RayBackend."""

    name = "backend"

    def num_slots(self, kind: str) -> int:
        """How many tasks of ``kind`` may run at once."""
        raise NotImplementedError

    def max_in_flight(self, kind: str) -> int:
        """How many tasks of ``kind`` the executor keeps started at once: ``num_slots``, or
        more where the backend queues tasks itself and gains from a backlog (Ray)."""
        return self.num_slots(kind)

    def holds_slot(self, task_id: int) -> bool:
        """Whether a started task still occupies one of the ``num_slots`` (not yet ended
        where it runs, though its last blocks may still wait for the driver)."""
        return True

    def launch(self, spec: TaskSpec) -> None:
        """Start a task; its events arrive on ``spec.events``."""
        raise NotImplementedError

    def cancel(self, task_id: int) -> None:
        """Best-effort stop of a running task (its gate also answers False)."""

    def retries_failed_tasks(self, kind: str, actor: ActorHandle | None) -> bool:
        """Whether the backend itself runs a failed task of ``kind`` (on ``actor``, for an
        actor pool's task) again, within the ``retries`` of its TaskSpec, without delivering
        a block twice. Its pool then retries nothing, so that a failure is handled once;
        otherwise the pool retries (TaskPool)."""
        return False

    def block_nodes(self, refs: list[Any]) -> list[frozenset[str]] | None:
        """The nodes holding each referenced block, or None where the backend has a single
        machine (local). Cheap: answered from what this process owns, without a fetch."""
        return None

    def refresh(self) -> None:
        """Take the cluster as it is now (nodes may have joined or died); called when an
        execution starts."""

    def plan_actor_pool(
        self,
        op_name: str,
        min_size: int,
        max_size: float,
        num_cpus: float | None,
        num_gpus: float | None,
    ) -> ActorPoolPlan:
        """Resources of one pool's actors; raises ValueError when ``min_size`` actors can
        never have the GPUs they ask for."""
        raise NotImplementedError(f"the {self.name} backend has no actors")

    def start_actor(self, spec: ActorSpec) -> ActorHandle | None:
        """Start an actor, or return None when its resources are taken for now."""
        raise NotImplementedError(f"the {self.name} backend has no actors")

    def put(self, block: Any) -> Any:
        """Store a block, returning a reference (engine.refs)."""
        raise NotImplementedError

    def get(self, ref: Any) -> Any:
        """The block behind a reference."""
        from shardflow.engine.execution.refs import resolve

        return resolve(ref)

    def export_ref(self, ref: Any) -> Any:
        """The reference a user receives (``to_arrow_refs``): the table itself here."""
        return self.get(ref)

    def prepare_source_item(self, item: Any) -> Any:
        """Turn an in-memory source block (or reference) into a reference tasks can take."""
        return item

    @property
    def spills_locally(self) -> bool:
        """Whether exchanges should spill to local disk themselves (Ray spills on its own)."""
        return False

    def can_run_kind(self, kind: str) -> bool:
        return True
