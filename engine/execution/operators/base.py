"""The physical operator protocol, and what the executor lends every operator.

An operator receives input bundles (``add_input``), learns when an input stream has ended
(``input_done``), offers output bundles (``has_next`` / ``get_next``), and says when it will
produce nothing more (``completed``). Operators that run work launch tasks through the
``OperatorRuntime``: the executor asks each one which kind of worker slot its next task needs
(``next_task_kind``), grants slots fairly, and hands task events back to the operator that
launched the task (``on_task_event``). The executor never looks at an operator's type.
"""

from __future__ import annotations

import itertools
import queue
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.backends.base import (
    ActorHandle,
    ActorSpec,
    Backend,
    Gate,
    Retries,
    TaskSpec,
)
from shardflow.engine.execution.memory import MemoryBudget
from shardflow.engine.execution.refs import RefBundle
from shardflow.engine.execution.stats import OperatorStats
from shardflow.sdk.datasink import TaskContext

_task_ids = itertools.count()

#: The kind under which an actor's start is tracked (it takes no task slot).
ACTOR_STARTUP = "actor-startup"


class PhysicalOperator:
    """Base class of physical operators; defaults suit an operator that runs no tasks.

    Args:
        name: Shown in stats, progress bars and errors.
        inputs: The operators whose outputs feed this one, by input index.
    """

    #: Whether the operator appears in ``stats()`` and progress bars.
    shown_in_stats = True
    #: Whether a cancelled execution may return while this operator's thread tasks still run
    #: (they stop at their next block and their results are dropped). Writes may not: their
    #: tasks must have stopped before the write is cleaned up.
    abandon_tasks = True
    #: Whether progress shows the operator's steps (an exchange's map and reduce); such an
    #: operator gets a bar even without ExecutionOptions.verbose_progress, as in Ray Data.
    phased_progress = False

    def __init__(self, name: str, inputs: list[PhysicalOperator]):
        self.name = name
        self.input_ops = list(inputs)
        self.stats = OperatorStats(name)
        self.runtime: OperatorRuntime | None = None
        self._inputs_done = [False] * len(self.input_ops)
        self.cancelled = False

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, runtime: OperatorRuntime) -> None:
        """Called once before any input arrives."""
        self.runtime = runtime
        if not self.input_ops:
            self.all_inputs_done()

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        """Take one output bundle of ``input_ops[input_index]``."""
        raise NotImplementedError(f"{type(self).__name__} takes no input")

    def input_done(self, input_index: int) -> None:
        """Input ``input_index`` will send nothing more."""
        if self._inputs_done[input_index]:
            return
        self._inputs_done[input_index] = True
        if all(self._inputs_done):
            self.all_inputs_done()

    def all_inputs_done(self) -> None:
        """Every input has ended."""

    @property
    def inputs_complete(self) -> bool:
        return all(self._inputs_done)

    def has_next(self) -> bool:
        return False

    def get_next(self) -> RefBundle:
        raise IndexError(f"{self.name} has no output ready")

    def completed(self) -> bool:
        """True when the operator will produce nothing more and all its outputs were taken."""
        raise NotImplementedError

    def needs_more_input(self) -> bool:
        """False once no further input can change the result (a satisfied limit)."""
        return True

    # -- tasks --------------------------------------------------------------------------

    def next_task_kind(self) -> str | None:
        """The kind of worker slot the next task needs, or None when no task can start now."""
        return None

    def launch_next(self) -> None:
        """Start one task (the executor granted a slot of ``next_task_kind()``)."""
        raise NotImplementedError

    def has_pending_work(self, kind: str) -> bool:
        """Whether the operator has tasks of ``kind`` running or waiting (fair slot sharing)."""
        return False

    def slot_capacity(self, kind: str) -> int | None:
        """Tasks of ``kind`` that may run at once when the operator brings its own workers
        (an actor pool's actors); None means the backend's slots of that kind."""
        return None

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        """A block, the end, or the failure of a task this operator launched.

        Raises the task's error when the execution must fail.
        """

    def held_bytes(self) -> int:
        """Bytes of blocks the operator holds (queued inputs, outputs not yet taken)."""
        return 0

    def ready_input_bytes(self) -> int | None:
        """Bytes of queued input the operator can start working on without more input (0
        while it waits to gather enough); None for an operator that passes its input on
        at once (then its own consumer decides)."""
        return None

    def cancel(self) -> None:
        """Stop all work: cancel running tasks and release held blocks."""
        self.cancelled = True

    def shutdown(self) -> None:
        """Release everything the operator owns (temporary files); called once at the end."""

    # -- progress -----------------------------------------------------------------------

    def estimated_output_rows(self, input_rows: int | None) -> int | None:
        """The rows this operator will output in all, for progress bars: exact once it has
        finished; else extrapolated from its finished tasks when it knows how many tasks it
        will run; else its inputs' estimate (``input_rows``, None when unknown)."""
        stats = self.stats
        if stats.finished_at is not None:
            return stats.rows_out
        records = stats.task_records
        expected = self.expected_tasks()
        if records and expected:
            return int(sum(r.rows for r in records) / len(records) * max(expected, len(records)))
        return input_rows

    def expected_tasks(self) -> int | None:
        """How many tasks the operator will run in all, when known."""
        return None

    def progress_detail(self) -> str:
        """A short state shown beside the operator's progress (its tasks, actors, steps)."""
        return ""


@dataclass
class _RunningTask:
    op: PhysicalOperator
    kind: str


#: Blocks waiting for the user beyond which reads wait (see ``OperatorRuntime.has_room``).
OUTPUT_BACKLOG_BLOCKS = 4


class OperatorRuntime:
    """The executor's services to operators: backend, budget, settings, task launching.

    Args:
        backend: Where tasks run.
        budget: The memory budget of this execution.
        context: The settings of this execution.
        downstream_starved: ``downstream_starved(op)`` is True while whatever consumes ``op``'s
            output (the next operator, or the user) has nothing it can work on (see
            ``BudgetGate``).
        output_backlog: Bytes of output blocks waiting for the user to take them.
    """

    def __init__(
        self,
        backend: Backend,
        budget: MemoryBudget,
        context: DataContext,
        events: queue.Queue,
        downstream_starved: Callable[[PhysicalOperator], bool],
        cancelled: threading.Event,
        output_backlog: Callable[[], int] = lambda: 0,
    ):
        self.backend = backend
        self.output_backlog = output_backlog
        self.budget = budget
        self.context = context
        self.preserve_order = context.preserve_order
        self.events = events
        self.downstream_starved = downstream_starved
        self.cancelled = cancelled
        self._running: dict[int, _RunningTask] = {}
        self.errored_blocks = 0  # failed tasks skipped under DataContext.max_errored_blocks
        self._spill_dir: str | None = None
        self._spill_lock = threading.Lock()
        #: Operators that held back new work for want of room in the budget, and the one the
        #: executor lets start a task anyway (see ``has_room``).
        self.refused_for_room: set[int] = set()
        self.room_granted: PhysicalOperator | None = None

    def has_room(self, op: PhysicalOperator, nbytes: int) -> bool:
        """Whether ``op`` may start work that makes about ``nbytes`` of new data (a read).

        The budget decides, except that the executor may grant one start to an operator it
        refused, when nothing else can move (see engine/memory.py). While the user has
        OUTPUT_BACKLOG_BLOCKS blocks of this size or more waiting, no read starts: a consumer
        slower than the reads (an epoch of ``iter_batches``) gains nothing from reads further
        ahead, which would only fill memory, up to the budget."""
        if nbytes and self.output_backlog() >= OUTPUT_BACKLOG_BLOCKS * nbytes:
            return False
        if self.budget.has_room(nbytes):
            return True
        if self.room_granted is op:
            self.room_granted = None
            return True
        self.refused_for_room.add(id(op))
        return False

    # -- tasks --------------------------------------------------------------------------

    def launch(
        self,
        op: PhysicalOperator,
        transform: Any,
        inputs: list[Any],
        kind: str,
        gate: Gate,
        task_index: int,
        spill_dir: str | None = None,
        actor: ActorHandle | None = None,
        remote_args: dict[str, Any] | None = None,
        retries: Retries | None = None,
    ) -> int:
        """Run ``transform(inputs, ctx)`` as a task of ``op`` (on ``actor`` when given);
        returns the task id. ``retries`` is for a backend that retries failed tasks itself."""
        task_id = next(_task_ids)
        self._running[task_id] = _RunningTask(op, kind)
        spec = TaskSpec(
            task_id=task_id,
            op_name=op.name,
            transform=transform,
            inputs=inputs,
            ctx=TaskContext(task_idx=task_index, op_name=op.name),
            kind=kind,
            events=self.events,
            gate=gate,
            spill_dir=spill_dir,
            actor=actor,
            remote_args=dict(remote_args or {}),
            retries=retries or Retries(),
        )
        self.backend.launch(spec)
        return task_id

    def start_actor(
        self,
        op: PhysicalOperator,
        transform: Any,
        num_cpus: float,
        num_gpus: float,
        remote_args: dict[str, Any] | None = None,
        on_exit: Callable[[], None] | None = None,
        max_restarts: int = 0,
    ) -> tuple | None:
        """Start an actor of ``op``: ``(startup id, handle)``, or None when the backend has
        no room for it now. The startup id's DONE or ERROR event reaches ``op`` when the
        actor's ``transform.setup()`` has run. ``max_restarts``: see ActorSpec."""
        actor_id = next(_task_ids)
        spec = ActorSpec(
            actor_id,
            op.name,
            transform,
            self.events,
            num_cpus,
            num_gpus,
            dict(remote_args or {}),
            on_exit,
            max_restarts,
        )
        self._running[actor_id] = _RunningTask(op, ACTOR_STARTUP)
        handle = self.backend.start_actor(spec)
        if handle is None:
            del self._running[actor_id]
            return None
        return actor_id, handle

    def task_finished(self, task_id: int) -> None:
        self._running.pop(task_id, None)

    def owner(self, task_id: int) -> PhysicalOperator | None:
        running = self._running.get(task_id)
        return None if running is None else running.op

    def cancel_task(self, task_id: int) -> None:
        self.backend.cancel(task_id)

    def num_unabandonable(self) -> int:
        """Running tasks of operators whose tasks must end before the execution does."""
        return sum(1 for t in self._running.values() if not t.op.abandon_tasks)

    def num_running(self, kind: str | None = None, op: PhysicalOperator | None = None) -> int:
        return sum(
            1
            for t in self._running.values()
            if (kind is None or t.kind == kind) and (op is None or t.op is op)
        )

    # -- spilling -----------------------------------------------------------------------

    def spill_dir(self) -> str:
        """This execution's folder for spilled blocks, created on first use."""
        with self._spill_lock:
            if self._spill_dir is None:
                from shardflow.engine.execution.spill import make_spill_dir

                self._spill_dir = make_spill_dir()
            return self._spill_dir

    def remove_spill_dir(self) -> None:
        with self._spill_lock:
            if self._spill_dir is not None:
                shutil.rmtree(self._spill_dir, ignore_errors=True)
                from shardflow.engine.execution.spill import forget_spill_dir

                forget_spill_dir(self._spill_dir)
                self._spill_dir = None


__all__ = ["PhysicalOperator", "OperatorRuntime", "RefBundle"]
