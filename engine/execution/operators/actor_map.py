"""The actor-pool map operator: a stateful stage run by a pool of long-lived actors.

Each actor runs the stage's ``setup()`` once (constructing the user's class: a model is loaded
once per actor), then takes inputs one task at a time, up to ``max_tasks_in_flight_per_actor``
queued at an actor. The pool's actors are this operator's own worker slots
(``slot_capacity``), so they never take the slots of the tasks that feed them: a pool that
asks for every CPU cannot starve the read stage upstream.

Autoscaling: the pool starts ``initial_size`` actors, starts one more (up to ``max_size``
and what the backend can hold) whenever inputs wait and no actor has room, and stops actors
idle for ``DataContext.actor_pool_idle_timeout_s`` down to ``min_size``.

Failures: a constructor that raises fails the execution once, with its traceback, and the
pool is torn down. On Ray, an actor whose process or node died is restarted by Ray (on a
live node) up to ``max_retries`` times, and Ray runs its interrupted tasks again there
(engine/execution/backends/ray_actors.py). Elsewhere (and for an actor that Ray does not
restart), an actor that dies gives up its slot at once; its tasks are retried on other
actors while ``max_retries`` allows (a replacement starts when the pool falls below
``min_size``), then the crash surfaces.

Locality (Ray, ``ExecutionOptions.actor_locality_enabled``, on by default): a task goes to
the actor with room on the node that holds most of its input bytes, else to the least busy
actor. Inputs keep their order, so once every actor is busy an actor that frees up takes the
next input wherever it is; when ``DataContext.preserve_order`` is off (and a task takes one
input), an actor with room instead takes the oldest of the next few inputs held on its node.
``stats()`` reports the share of input bytes the actors found on their own node.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from shardflow.engine.api.compute import ActorPoolStrategy, MapOptions
from shardflow.engine.execution.backends.base import ActorHandle, ActorPoolPlan
from shardflow.engine.execution.backends.task_runner import DONE, ERROR
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.map import MapOperator
from shardflow.engine.execution.operators.task_pool import TaskPool, is_worker_crash

_pool_ids = itertools.count()

#: Inputs queued at one actor at once, when the strategy does not say: enough to send the
#: next input while the actor computes (Ray Data's default is 4; Ray's object transfer needs
#: more overlap than a local pipe).
DEFAULT_IN_FLIGHT = {"local": 2, "ray": 4}

#: With locality and no order to keep: how many queued inputs per actor an actor with room
#: looks through for one held on its node.
LOOKAHEAD_PER_ACTOR = 4


@dataclass(eq=False)
class _Actor:
    actor_id: int
    handle: ActorHandle
    ready: bool = False
    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    tasks: set[int] = field(default_factory=set)
    node: str | None = None  # the node its last task ran on (Ray)


class ActorMapOperator(MapOperator):
    """Runs ``transform`` over each input on one of a pool of actors.

    Args:
        name: Shown in progress bars, stats and error messages.
        input_op: The operator feeding this one.
        transform: The stage(s) to run; ``transform.setup()`` runs once per actor.
        strategy: The pool's sizes.
        options: Resources per actor, remote arguments, retries.
        min_rows_per_task: Inputs are gathered until a task has this many rows.
    """

    def __init__(
        self,
        name: str,
        input_op: PhysicalOperator,
        transform: Any,
        strategy: ActorPoolStrategy,
        options: MapOptions,
        min_rows_per_task: int | None = None,
    ):
        super().__init__(
            name,
            input_op,
            transform,
            kind=f"actors-{next(_pool_ids)}",
            min_rows_per_task=min_rows_per_task,
            options=options,
        )
        self.strategy = strategy
        self.max_task_retries = options.max_retries
        self._actors: dict[int, _Actor] = {}
        self._task_actor: dict[int, _Actor] = {}
        self._plan: ActorPoolPlan | None = None
        self._in_flight_max = 1
        self._locality = False
        self._reorder = False

    # -- the pool -----------------------------------------------------------------------

    def _new_pool(self, runtime: Any) -> TaskPool:
        # A task to run again waits for a free actor: launch_next picks one.
        return TaskPool(self, runtime.preserve_order, relaunch_by_operator=True)

    def start(self, runtime: Any) -> None:
        super().start(runtime)
        backend = runtime.backend
        self._in_flight_max = self.strategy.max_tasks_in_flight_per_actor or DEFAULT_IN_FLIGHT.get(
            backend.name, 2
        )
        options = runtime.context.execution_options
        self._locality = bool(options.actor_locality_enabled)
        # Inputs may go out of order (to an actor on their node) only when the output's
        # order need not follow them and each task takes one input.
        self._reorder = (
            self._locality
            and not runtime.preserve_order
            and not self.min_rows_per_task
            and backend.block_nodes([]) is not None
        )
        self._plan = backend.plan_actor_pool(
            self.name,
            self.strategy.min_size,
            self.strategy.max_size,
            self.options.num_cpus,
            self.options.num_gpus,
        )
        for _ in range(min(self.strategy.initial_size, self._plan.max_actors)):
            if not self._start_actor():
                break

    @property
    def num_actors(self) -> int:
        return len(self._actors)

    def progress_detail(self) -> str:
        starting = sum(1 for a in self._actors.values() if not a.ready)
        running = sum(1 for a in self._actors.values() if a.ready and a.in_flight)
        idle = sum(1 for a in self._actors.values() if a.ready and not a.in_flight)
        pending = len(self._queue) + len(self._pool.retry_queue) if self._pool else 0
        return f"actors: {starting} starting, {running} running, {idle} idle; {pending} pending"

    def _start_actor(self) -> bool:
        remote_args = self.options.remote_args() if self.runtime.backend.name == "ray" else {}
        most = self.max_task_retries
        if most is None:
            most = self.runtime.context.max_task_retries
        started = self.runtime.start_actor(
            self,
            self.transform,
            self._plan.num_cpus,
            self._plan.num_gpus,
            remote_args,
            max_restarts=-1 if most < 0 else most,
        )
        if started is None:  # its resources (GPUs) are taken for now: try again later
            return False
        actor_id, handle = started
        self._actors[actor_id] = _Actor(actor_id, handle)
        self.stats.actors_started += 1
        self.stats.peak_actors = max(self.stats.peak_actors, len(self._actors))
        return True

    def _drop(self, actor: _Actor, kill: bool) -> None:
        """Take ``actor`` out of the pool at once (its slot is free) and end it."""
        if self._actors.pop(actor.actor_id, None) is None:
            return
        if kill:
            actor.handle.kill()
        else:
            actor.handle.stop()

    def _end_all(self, kill: bool) -> None:
        """End every actor: killed, or stopped after their work (those still constructing
        have none, and are killed)."""
        for actor in list(self._actors.values()):
            self._drop(actor, kill or not actor.ready)

    def _free_actor(self, inputs: list[Any] | None = None) -> _Actor | None:
        """The ready actor with room for a task over ``inputs``: on the node holding most of
        their bytes (locality, when known), else the one with the fewest queued tasks."""
        free = [a for a in self._actors.values() if a.ready and a.in_flight < self._in_flight_max]
        if not free:
            return None
        best = min(free, key=lambda a: a.in_flight)
        if inputs and self._locality:
            local = self._input_bytes_by_node(inputs)
            if local:
                best = max(free, key=lambda a: (local.get(self._node(a), 0), -a.in_flight))
                self._count_locality(inputs, local.get(self._node(best), 0))
        return best

    def _local_pick(self) -> tuple[_Actor, list[Any]]:
        """Order not preserved, one input per task: the least busy free actor, with the
        oldest of the next few inputs held on its node (else the oldest input)."""
        actor = self._free_actor()
        node = self._node(actor)
        window = [
            self._queue[i]
            for i in range(min(len(self._queue), LOOKAHEAD_PER_ACTOR * len(self._actors)))
        ]
        found = self.runtime.backend.block_nodes([b.ref for b in window]) or ()
        position = next((i for i, where in enumerate(found) if node in where), 0)
        bundle = self._queue[position]
        del self._queue[position]
        self._queued_rows -= bundle.num_rows
        self._queued_charge -= bundle.charge
        local = bool(found) and node in found[position]
        self._count_locality([bundle], (bundle.meta.size_bytes or 0) if local else 0)
        return actor, [bundle]

    def _input_bytes_by_node(self, inputs: list[Any]) -> dict[str, int]:
        """Bytes of ``inputs`` held on each node (empty where the backend cannot tell)."""
        nodes = self.runtime.backend.block_nodes([b.ref for b in inputs])
        held: dict[str, int] = {}
        for bundle, where in zip(inputs, nodes or ()):
            for node in where:
                held[node] = held.get(node, 0) + (bundle.meta.size_bytes or 0)
        return held

    def _count_locality(self, inputs: list[Any], local_bytes: int) -> None:
        total = sum(b.meta.size_bytes or 0 for b in inputs)
        local_bytes = min(local_bytes, total)
        self.stats.local_input_bytes += local_bytes
        self.stats.remote_input_bytes += total - local_bytes

    @staticmethod
    def _node(actor: _Actor) -> str | None:
        return actor.node or getattr(actor.handle, "node_id", None)

    def _no_more_work(self) -> bool:
        return self.inputs_complete and not self._queue and not self._pool.retry_queue

    def _autoscale(self) -> None:
        now = time.monotonic()
        for actor in list(self._actors.values()):
            if actor.ready and not actor.in_flight and not actor.handle.alive():
                self._drop(actor, kill=True)  # died while idle: its slot is free again
        if self._no_more_work():
            return
        limit = self._plan.max_actors
        if len(self._actors) < self.strategy.min_size:  # replace actors that died
            while len(self._actors) < min(self.strategy.min_size, limit) and self._start_actor():
                pass
        elif self._has_task_ready() and len(self._actors) < limit and self._free_actor() is None:
            # Grow while the inputs waiting exceed what the actors still starting will take.
            starting = sum(1 for a in self._actors.values() if not a.ready)
            waiting = len(self._queue) + len(self._pool.retry_queue)
            if starting * self._in_flight_max < waiting:
                self._start_actor()
        timeout = self.runtime.context.actor_pool_idle_timeout_s
        idle = sorted(
            (a for a in self._actors.values() if a.ready and not a.in_flight),
            key=lambda a: a.idle_since,
        )
        for actor in idle:
            if len(self._actors) <= self.strategy.min_size or now - actor.idle_since < timeout:
                break
            self._drop(actor, kill=False)

    # -- the protocol -------------------------------------------------------------------

    def next_task_kind(self) -> str | None:
        if self.cancelled:
            return None
        self._autoscale()
        if not self._has_task_ready() or self._free_actor() is None:
            return None
        return self.kind

    def slot_capacity(self, kind: str) -> int | None:
        ready = sum(1 for a in self._actors.values() if a.ready)
        return max(1, ready * self._in_flight_max)

    def launch_next(self) -> None:
        if self._pool.retry_queue:
            retried = self._pool.retry_queue.popleft()
            actor = self._free_actor(retried.inputs)
            task = self._pool.relaunch(retried, actor=actor.handle)
        elif self._reorder:
            actor, inputs = self._local_pick()
            task = self._pool.launch(self.transform, inputs, self.kind, actor=actor.handle)
        else:
            inputs = self._take_inputs()
            actor = self._free_actor(inputs)
            task = self._pool.launch(self.transform, inputs, self.kind, actor=actor.handle)
        actor.in_flight += 1
        actor.tasks.add(task.task_id)
        self._task_actor[task.task_id] = actor

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        actor = self._actors.get(task_id)
        if actor is not None:
            self._on_started(actor, event, payload)
            return
        actor = self._task_actor.get(task_id)
        if actor is not None and event == DONE and payload and "node" in payload:
            actor.node = payload["node"]  # where it runs now (Ray may have moved it)
        if actor is not None and event in (DONE, ERROR):
            del self._task_actor[task_id]
            actor.tasks.discard(task_id)
            actor.in_flight -= 1
            actor.idle_since = time.monotonic()
            if event == ERROR and is_worker_crash(payload):
                self._drop(actor, kill=True)  # a dead actor never keeps its slot
        self._pool.on_event(task_id, event, payload, meta)

    def _on_started(self, actor: _Actor, event: str, payload: Any) -> None:
        if event == DONE:
            actor.ready = True
            actor.idle_since = time.monotonic()
            return
        if event == ERROR:
            self._drop(actor, kill=True)
            if not self.cancelled:
                # The user's constructor raised (or the process died constructing it): the
                # error surfaces once, and the pool goes with it.
                self._end_all(kill=True)
                raise payload.to_exception()

    def completed(self) -> bool:
        done = super().completed()
        if done and self._actors:
            self._end_all(kill=self.cancelled)
        return done

    def cancel(self) -> None:
        super().cancel()
        self._end_all(kill=True)

    def shutdown(self) -> None:
        self._end_all(kill=True)
        super().shutdown()
