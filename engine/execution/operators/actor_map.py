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
pool is torn down. An actor that dies gives up its slot at once; its tasks are retried on
other actors while ``max_retries`` allows (a replacement starts when the pool falls below
``min_size``), then the crash surfaces.
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


@dataclass(eq=False)
class _Actor:
    actor_id: int
    handle: ActorHandle
    ready: bool = False
    in_flight: int = 0
    idle_since: float = field(default_factory=time.monotonic)
    tasks: set[int] = field(default_factory=set)


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
        started = self.runtime.start_actor(
            self, self.transform, self._plan.num_cpus, self._plan.num_gpus, remote_args
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

    def _free_actor(self) -> _Actor | None:
        """The ready actor with the fewest queued tasks, if one has room."""
        best = None
        for actor in self._actors.values():
            if actor.ready and actor.in_flight < self._in_flight_max:
                if best is None or actor.in_flight < best.in_flight:
                    best = actor
        return best

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
        actor = self._free_actor()
        if self._pool.retry_queue:
            task = self._pool.relaunch(self._pool.retry_queue.popleft(), actor=actor.handle)
        else:
            task = self._pool.launch(
                self.transform, self._take_inputs(), self.kind, actor=actor.handle
            )
        actor.in_flight += 1
        actor.tasks.add(task.task_id)
        self._task_actor[task.task_id] = actor

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        actor = self._actors.get(task_id)
        if actor is not None:
            self._on_started(actor, event, payload)
            return
        actor = self._task_actor.get(task_id)
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
