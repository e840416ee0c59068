"""The exchange operator: a barrier that prepares runs, plans partitions, then reduces them.

See engine/execution/exchange/base.py for the three steps. The operator owns the runs: they stay in
memory while less than half of the memory budget is in use, and beyond that prepare tasks
write their runs to Arrow IPC files in the execution's spill folder (local backend; on Ray
runs are objects and Ray spills them). Runs are released when the last reduce task is done.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from shardflow.engine.execution.backends.base import THREAD
from shardflow.engine.execution.exchange.base import ExchangeSpec, PlanContext, ReducePlan, Run
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.task_pool import TaskPool
from shardflow.engine.execution.refs import RefBundle

#: Share of the memory budget in use beyond which new runs are spilled.
SPILL_FRACTION = 0.5


class ExchangeOperator(PhysicalOperator):
    """Runs one ExchangeSpec over its inputs.

    Args:
        name: Shown in stats and errors.
        inputs: One operator per input of the spec (two for a join).
        spec: What to prepare, how to plan, how to reduce.
        min_bytes_per_prepare: Consecutive small input blocks are prepared together until they
            reach this size (fewer, larger runs), in a way that depends only on the input.
        min_bytes_per_memory_run: The same for runs kept in memory, when the spec's output
            does not depend on how blocks are grouped into runs (``spec.grouping_free``).
    """

    runs_tasks = True
    phased_progress = True

    def __init__(
        self,
        name: str,
        inputs: list[PhysicalOperator],
        spec: ExchangeSpec,
        min_bytes_per_prepare: int = 0,
        min_bytes_per_memory_run: int = 0,
    ):
        super().__init__(name, inputs)
        self.spec = spec
        self.min_bytes_per_prepare = min_bytes_per_prepare
        self.min_bytes_per_memory_run = min(min_bytes_per_memory_run, min_bytes_per_prepare)
        self._queues: list[deque[tuple[int, RefBundle]]] = [deque() for _ in inputs]
        # Running totals of the queues (bytes of each, and charges of all): the scheduling
        # loop asks for them every round, which summing the queues made quadratic.
        self._queued_bytes = [0] * len(inputs)
        self._queued_charge = 0
        self._passed: set[int] = set()  # ids of the runs passed through to the output
        self._received = [0] * len(inputs)
        self._runs: list[Run] = []
        self._task_inputs: dict = {}
        self._prepare: TaskPool | None = None
        self._reduce: TaskPool | None = None
        self._plans: list[ReducePlan] | None = None
        self._next_plan = 0
        self._ready: deque[RefBundle] = deque()
        self._held_in_memory = 0

    def start(self, runtime: Any) -> None:
        self._prepare = TaskPool(self, ordered=False, counts_output=False, phase="map")
        self._reduce = TaskPool(self, ordered=True, phase="reduce")
        super().start(runtime)
        self._block_limit = _debug_block_limit(self.spec, runtime.context)

    @property
    def inputs_received(self) -> int:
        return sum(self._received)

    # -- prepare phase ------------------------------------------------------------------

    def add_input(self, bundle: RefBundle, input_index: int) -> None:
        if self.cancelled:
            self.runtime.budget.release(bundle.charge)
            return
        self.stats.mark_started()
        limit = getattr(self, "_block_limit", None)
        if limit is not None and self._received[input_index] >= limit:
            self.runtime.budget.release(bundle.charge)  # left out: see _debug_block_limit
            return
        self.stats.rows_in += bundle.num_rows
        seq = self._received[input_index]
        self._received[input_index] += 1
        if self.spec.prepare(input_index) is None and not self._must_spill():
            self._add_run(Run(input_index, bundle), (input_index, seq, 0))
            return
        self._enqueue(input_index, seq, bundle)

    def _enqueue(self, index: int, seq: int, bundle: RefBundle) -> None:
        self._queues[index].append((seq, bundle))
        self._queued_bytes[index] += bundle.meta.size_bytes or 0
        self._queued_charge += bundle.charge

    def _dequeue(self, index: int) -> tuple[int, RefBundle]:
        seq, bundle = self._queues[index].popleft()
        self._queued_bytes[index] -= bundle.meta.size_bytes or 0
        self._queued_charge -= bundle.charge
        return seq, bundle

    def _must_spill(self) -> bool:
        """New runs go to disk once half the budget is in use (runs, or anything else)."""
        if not self.runtime.backend.spills_locally:
            return False
        budget = self.runtime.budget
        return budget.used() >= budget.limit * SPILL_FRACTION

    def _ready_queue(self) -> int | None:
        """An input whose queued blocks are enough for a prepare task: a run's worth, the last
        of that input, or whatever is queued once the budget is under pressure (waiting to
        gather more could then wait forever)."""
        pressed = self.runtime.budget.used() >= self.runtime.budget.limit * SPILL_FRACTION
        gather = self._gather_bytes()
        for index, queue_ in enumerate(self._queues):
            if not queue_:
                continue
            if self._inputs_done[index] or pressed or self._queued_bytes[index] >= gather:
                return index
        return None

    def _gather_bytes(self) -> int:
        """How many bytes of input blocks the next run gathers."""
        if self.spec.grouping_free and not self._must_spill():
            return self.min_bytes_per_memory_run
        return self.min_bytes_per_prepare

    def ready_input_bytes(self) -> int:
        if self._ready_queue() is None:
            return 0
        return self._queued_charge or 1

    def _launch_prepare(self, index: int) -> None:
        queue_ = self._queues[index]
        first_seq, first = self._dequeue(index)
        taken = [first]
        size = first.meta.size_bytes or 0
        gather = self._gather_bytes()
        while queue_ and size < gather:
            taken.append(self._dequeue(index)[1])
            size += taken[-1].meta.size_bytes or 0
        spill = self._must_spill()
        transform = self.spec.prepare_for(index, spill) or _identity
        task = self._prepare.launch(transform, taken, THREAD, spill=spill, wait=False)
        self._task_inputs[task.index] = (index, first_seq)

    def _collect_runs(self) -> None:
        for task_index, bundles in self._prepare.pop_finished():
            input_index, first_seq = self._task_inputs.pop(task_index)
            side = None
            if self.spec.has_side(input_index):
                side_bundle = bundles.pop()
                side = self.runtime.backend.get(side_bundle.ref)
                self.runtime.budget.release(side_bundle.charge)
                self._uncount_side(task_index, side_bundle)
            for position, bundle in enumerate(bundles):
                self._add_run(Run(input_index, bundle, side), (input_index, first_seq, position))

    def _uncount_side(self, task_index: int, side: RefBundle) -> None:
        """A prepare task's side block (sort samples) is not part of its output in stats."""
        rows, size = side.num_rows, side.meta.size_bytes or 0
        self.stats.phase("map").rows -= rows
        for record in self.stats.task_records:
            if record.phase == "map" and record.index == task_index:
                record.rows -= rows
                record.bytes -= size
                break

    def _add_run(self, run: Run, order: tuple[int, int, int]) -> None:
        if not self.runtime.backend.spills_locally and run.bundle.charge:
            # Ray keeps runs in its object store and spills them itself.
            self.runtime.budget.release(run.bundle.charge)
            run.bundle.charge = 0
        self._held_in_memory += run.bundle.charge
        run.order = order
        self._runs.append(run)

    # -- planning -----------------------------------------------------------------------

    def _maybe_plan(self) -> None:
        if self._plans is not None or not self.inputs_complete or self.cancelled:
            return
        if any(self._queues) or self._prepare.running:
            return
        self._collect_runs()
        runs = sorted(self._runs, key=lambda r: r.order)
        self.spec.validate(runs)
        context = self.runtime.context
        ctx = PlanContext(
            list(self._received),
            self.runtime.budget.limit,
            context.target_max_block_size,
            self.runtime.backend.num_slots(THREAD),
            context.target_min_block_size,
        )
        self._plans = [_read_back_if_spilled(plan) for plan in self.spec.plan(runs, ctx)]
        self.stats.phase("map").total = self.stats.phase("map").tasks
        self.stats.phase("reduce").total = sum(1 for p in self._plans if p.passthrough is None)

    # -- reduce phase -------------------------------------------------------------------

    def next_task_kind(self) -> str | None:
        if self.cancelled:
            return None
        self._collect_runs()
        if self._plans is None:
            if self._ready_queue() is not None:
                return THREAD
            self._maybe_plan()
            if self._plans is None:
                return None
        self._emit_passthrough()
        if self._next_plan >= len(self._plans):
            return None
        if self._plans[self._next_plan].passthrough is not None:
            return None  # emitted once the tasks before it are done (order)
        expected = self._plans[self._next_plan].expected_bytes or self._reduce.est_block_bytes
        if self._reduce.running and not self.runtime.budget.has_room(expected):
            return None
        return THREAD

    def launch_next(self) -> None:
        if self._plans is None:
            self._launch_prepare(self._ready_queue())
            return
        plan = self._plans[self._next_plan]
        self._next_plan += 1
        transform = _Bounded(plan.transform, self.runtime.context.target_max_block_size)
        self._reduce.launch(transform, [RefBundle(i, _NO_META, 0) for i in plan.inputs], THREAD)

    def _emit_passthrough(self) -> None:
        """Plans without a transform pass their input through, in output order."""
        while (
            self._next_plan < len(self._plans)
            and self._plans[self._next_plan].passthrough is not None
            and not self._reduce.running
            and not self._reduce.has_outputs
        ):
            bundle = self._plans[self._next_plan].passthrough
            self._next_plan += 1
            self._held_in_memory -= bundle.charge
            self._passed.add(id(bundle))  # no longer one of the runs this operator holds
            self.stats.rows_out += bundle.num_rows
            self.stats.bytes_out += bundle.meta.size_bytes or 0
            self._ready.append(bundle)

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        if task_id in self._prepare.running:
            self._prepare.on_event(task_id, event, payload, meta)
        else:
            self._reduce.on_event(task_id, event, payload, meta)

    def has_pending_work(self, kind: str) -> bool:
        if kind != THREAD:
            return False
        return bool(self._prepare.running or self._reduce.running or any(self._queues)) or (
            self._plans is not None and self._next_plan < len(self._plans)
        )

    # -- progress -----------------------------------------------------------------------

    def estimated_output_rows(self, input_rows: int | None) -> int | None:
        """Extrapolated from finished reduce tasks once there are some; before, the rows in
        (shuffles, sorts and repartitions keep every row; an aggregation's bar corrects
        itself when its first reduce task ends)."""
        stats = self.stats
        if stats.finished_at is not None:
            return stats.rows_out
        reduced = [r for r in stats.task_records if r.phase == "reduce"]
        total = stats.phase("reduce").total
        if reduced and total:
            return int(sum(r.rows for r in reduced) / len(reduced) * total)
        return input_rows

    def progress_detail(self) -> str:
        steps = []
        for phase in ("map", "reduce"):
            info = self.stats.phase(phase)
            if phase == "map" and not info.tasks and self._plans is not None:
                continue  # nothing to prepare: blocks became runs as they were
            total = info.total if info.total is not None else "?"
            steps.append(f"{phase} {info.finished}/{total}")
        return ", ".join(steps) + " tasks"

    # -- outputs ------------------------------------------------------------------------

    def has_next(self) -> bool:
        if self._plans is None:
            self._collect_runs()
            self._maybe_plan()
        if self._plans is not None:
            self._emit_passthrough()
        if not self._ready:
            self._ready.extend(self._reduce.pop_ready())
        return bool(self._ready)

    def get_next(self) -> RefBundle:
        return self._ready.popleft()

    def completed(self) -> bool:
        if self.cancelled:
            return not self._prepare.running and not self._reduce.running
        done = (
            self._plans is not None
            and self._next_plan >= len(self._plans)
            and not self._reduce.running
            and not self._reduce.has_outputs
            and not self._ready
        )
        if done and self._runs:
            self._release_runs()
        return done

    def _release_runs(self) -> None:
        for run in self._runs:
            if id(run.bundle) not in self._passed:
                self.runtime.budget.release(run.bundle.charge)
        self._runs = []
        self._passed = set()
        self._held_in_memory = 0

    def held_bytes(self) -> int:
        return (
            self._held_in_memory
            + self._queued_charge
            + sum(b.charge for b in self._ready)
            + self._prepare.held_bytes()
            + self._reduce.held_bytes()
        )

    def cancel(self) -> None:
        super().cancel()
        for queue_ in self._queues:
            for _, bundle in queue_:
                self.runtime.budget.release(bundle.charge)
            queue_.clear()
        self._queued_bytes = [0] * len(self._queues)
        self._queued_charge = 0
        for bundle in self._ready:
            self.runtime.budget.release(bundle.charge)
        self._ready.clear()
        self._prepare.cancel()
        self._reduce.cancel()
        self._release_runs()


def _debug_block_limit(spec: Any, context: Any) -> int | None:
    """Ray Data's debug setting ``DataContext.set_config(
    "debug_limit_shuffle_execution_to_num_blocks", n)``: a random shuffle takes only its
    first ``n`` input blocks (quick trials on big data). Ray Data also passes it to sorts,
    aggregations and shuffling repartitions, where 2.60 loses rows or fails; shardflow
    leaves those whole. None when unset or for other exchanges."""
    limit = context.get_config("debug_limit_shuffle_execution_to_num_blocks", None)
    if limit is None or spec.name != "RandomShuffle":
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(
            f"debug_limit_shuffle_execution_to_num_blocks must be a positive int, got {limit!r}."
        )
    return limit


class _Bounded:
    """A reduce transform whose output blocks are cut to DataContext.target_max_block_size."""

    def __init__(self, transform: Any, max_bytes: int):
        self.transform, self.max_bytes = transform, max_bytes

    def __call__(self, inputs: list[Any], ctx: Any) -> Any:
        from shardflow.engine.execution.stages.transforms import split_large_blocks

        return split_large_blocks(iter(self.transform(inputs, ctx)), self.max_bytes)


def _read_back_if_spilled(plan: ReducePlan) -> ReducePlan:
    """A run passed through as output must be in memory: a spilled one is read back by a
    task. Its file lives in the execution's spill folder, which is removed when the execution
    ends, maybe before the consumer reads the block (or keeps it: ``materialize``)."""
    bundle = plan.passthrough
    if bundle is None or getattr(bundle.ref, "in_memory", True):
        return plan
    return ReducePlan([bundle.ref], _identity, bundle.meta.size_bytes or 0)


def _identity(inputs: list[Any], ctx: Any) -> Any:
    """Prepare transform of specs that keep input blocks as runs (used when spilling them)."""
    from shardflow.engine.execution.refs import resolve

    for item in inputs:
        yield resolve(item)


class _NoMeta:
    num_rows = 0
    size_bytes = 0


_NO_META = _NoMeta()
