"""From an optimized logical plan to physical operators.

Runs of one-to-one operations fuse into one MapOperator whose tasks run every stage back to
back; a read fuses with the operations that follow it. Limits, exchanges (shuffle, sort,
aggregate, repartition), unions, zips and joins become operators of their own. Read tasks are
planned once per execution: ``ReadTaskCache`` remembers them for the metadata questions
(count, schema) asked before the same plan runs.
"""

from __future__ import annotations

import inspect
import logging
import math
from typing import Any

import cloudpickle

from shardflow.engine.api.compute import DEFAULT_MAP_OPTIONS, ActorPoolStrategy, MapOptions
from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.backends.base import DRIVER, PROCESS, THREAD, Backend
from shardflow.engine.execution.operators.actor_map import ActorMapOperator
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.input import InputOperator
from shardflow.engine.execution.operators.limit import LimitOperator
from shardflow.engine.execution.operators.map import MapOperator
from shardflow.engine.execution.refs import RefBundle
from shardflow.engine.execution.stages.stage_for import stage_for
from shardflow.engine.execution.stages.transforms import FusedTransform, WriteStage
from shardflow.engine.plan.logical import (
    BlocksSource,
    Limit,
    LogicalPlan,
    MapLike,
    ReadSource,
    Write,
)
from shardflow.engine.plan.physical import PhysicalPlan
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import ReadTask

logger = logging.getLogger(__name__)
_warned_unpicklable: set = set()


def auto_parallelism(datasource: Any, context: DataContext) -> int:
    """Read tasks to ask for: at least two per core, more when data is large (8 MiB each)."""
    floor = max(4, 2 * context.effective_num_cpus())
    size = None
    try:
        size = datasource.estimate_inmemory_data_size()
    except Exception:
        size = None
    if not size:
        return floor
    return max(floor, min(200, math.ceil(size / (8 * 1024 * 1024))))


class ReadTaskCache:
    """Read tasks of each read source of one execution, planned on first request."""

    def __init__(self, context: DataContext):
        self.context = context
        self._tasks: dict[int, list[ReadTask]] = {}
        self._keep: list[ReadSource] = []  # keeps ids stable while cached

    def get(self, source: ReadSource) -> list[ReadTask]:
        tasks = self._tasks.get(id(source))
        if tasks is None:
            tasks = plan_read_tasks(source, self.context)
            self._tasks[id(source)] = tasks
            self._keep.append(source)
        return tasks


def plan_read_tasks(source: ReadSource, context: DataContext) -> list[ReadTask]:
    """Ask the datasource for its read tasks, passing only arguments its signature accepts."""
    datasource = source.datasource
    parallelism = (
        source.parallelism
        if source.parallelism and source.parallelism > 0
        else auto_parallelism(datasource, context)
    )
    kwargs: dict[str, Any] = {}
    params = inspect.signature(datasource.get_read_tasks).parameters
    accepts_any = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    if source.per_task_row_limit is not None and ("per_task_row_limit" in params or accepts_any):
        kwargs["per_task_row_limit"] = source.per_task_row_limit
    if "data_context" in params or accepts_any:
        kwargs["data_context"] = context
    tasks = datasource.get_read_tasks(parallelism, **kwargs)
    if tasks is None:
        raise TypeError(
            f"{type(datasource).__name__}.get_read_tasks returned None; return a list of ReadTask."
        )
    tasks = list(tasks)
    for task in tasks:
        if not isinstance(task, ReadTask):
            raise TypeError(
                f"{type(datasource).__name__}.get_read_tasks must return ReadTask objects; got "
                f"{type(task).__name__}."
            )
    if source.per_task_row_limit is not None:
        tasks = _tasks_for_limit(
            [t.with_row_limit(source.per_task_row_limit) for t in tasks], source.per_task_row_limit
        )
    return tasks


def _tasks_for_limit(tasks: list[ReadTask], limit: int) -> list[ReadTask]:
    """The shortest prefix of tasks known to hold ``limit`` rows (order is preserved)."""
    total = 0
    for i, task in enumerate(tasks):
        rows = task.metadata.num_rows
        if rows is None:
            return tasks
        total += rows
        if total >= limit:
            return tasks[: i + 1]
    return tasks


def source_bundles(source: Any, backend: Backend, read_tasks: ReadTaskCache) -> list[RefBundle]:
    """The input items of a plan's source: read tasks, or references to blocks in hand."""
    if isinstance(source, ReadSource):
        return [
            RefBundle(task, task.metadata, 0, i) for i, task in enumerate(read_tasks.get(source))
        ]
    if isinstance(source, BlocksSource):
        metas = source.metadata or [_meta_of_block(b) for b in source.blocks]
        return [
            RefBundle(backend.prepare_source_item(b), m, 0, i)
            for i, (b, m) in enumerate(zip(source.blocks, metas))
        ]
    raise TypeError(f"Unknown source {source!r}.")


def _meta_of_block(block: Any) -> BlockMetadata:
    return BlockMetadata(getattr(block, "num_rows", None), getattr(block, "nbytes", None))


class Planner:
    """Builds the operator DAG of one execution (operators listed upstream first)."""

    def __init__(self, backend: Backend, context: DataContext, read_tasks: ReadTaskCache):
        self.backend = backend
        self.context = context
        self.read_tasks = read_tasks
        self.operators: list[PhysicalOperator] = []

    def plan(self, plan: LogicalPlan) -> PhysicalPlan:
        self.operators = []
        self.chain(plan)
        return PhysicalPlan(self.operators)

    def add(self, op: PhysicalOperator) -> PhysicalOperator:
        self.operators.append(op)
        return op

    def chain(self, plan: LogicalPlan) -> PhysicalOperator:
        """Plan one source and its operations; returns the last operator."""
        source = plan.source
        bundles = source_bundles(source, self.backend, self.read_tasks)
        resumed = _resumable_write(plan)
        if resumed is not None and resumed.done:
            bundles = _without_done(bundles, resumed.done)
        last = self.add(InputOperator(source.name, bundles))
        fusion = _Fusion(source, self.context)
        for op in plan.ops:
            if isinstance(op, MapLike):
                options = getattr(op, "options", None)
                if options is not None and _runs_in_actors(options, self.backend):
                    if fusion.fits_in_actors(op, self.backend):
                        last = self.add(_actor_operator(op, last, self.context, fusion))
                    else:
                        last = self.add(_actor_operator(op, fusion.close(self, last), self.context))
                    fusion.restart(last.name)
                    continue
                if options is not None and not fusion.accepts(options):
                    last = fusion.close(self, last)
                fusion.add(stage_for(op), op.name, options)
                continue
            if isinstance(op, Write) and not _needs_own_operator(op.datasink):
                stage = WriteStage(op.datasink, op.name, op.write_uuid, op.resumable)
                fusion.add(stage, op.name)
                continue
            last = fusion.close(self, last)
            if isinstance(op, Limit):
                last = self.add(LimitOperator(op.name, last, op.limit))
            elif isinstance(op, Write):
                last = self.add(_write_operator(op, last, self.context.target_min_block_size))
            else:
                # Imported here: plans without exchanges (most reads and writes) need not
                # load the exchange machinery (~5 ms at a process's first execution).
                from shardflow.engine.plan.exchanges import plan_special

                last = plan_special(self, op, last)
        return fusion.close(self, last)


class _Fusion:
    """The run of one-to-one stages being fused into the next MapOperator.

    Stages fuse while they ask for the same compute (task limit and resources). A stage
    that runs in actors gets an operator of its own, and nothing after it fuses into it.
    The run before it fuses into the actors (as in Ray Data) only when that loses nothing:
    a CPU pool that can use every CPU slot (its actors read and preprocess as well, and no
    block crosses between processes). Otherwise, a GPU pool or a small one, the run stays
    in tasks, whose slots the actors never take.
    """

    def __init__(self, source: Any, context: DataContext):
        self.context = context
        self.reads = isinstance(source, ReadSource)
        self.source_name = source.name
        self.stages: list[Any] = []
        self.names: list[str] = [source.name] if self.reads else []
        self.options: MapOptions = DEFAULT_MAP_OPTIONS
        self.read_limit: int | None = getattr(source, "concurrency", None) if self.reads else None
        self.python_reads = self.reads and _reads_hold_the_gil(source.datasource)

    def accepts(self, options: MapOptions) -> bool:
        return not (self.stages or self.reads) or self.options.fuses_with(options)

    def add(self, stage: Any, name: str, options: MapOptions | None = None) -> None:
        if options is not None and options is not DEFAULT_MAP_OPTIONS:
            self.options = options
        self.stages.append(stage)
        self.names.append(name)

    def fits_in_actors(self, op: Any, backend: Backend) -> bool:
        """Whether this run may run inside the actors of ``op``'s pool instead of tasks: the
        pool asks for no GPU and can grow to every CPU slot, so running the run's stages in
        the actors loses no parallelism and saves handing every block to another process.
        """
        options = op.options
        if not (self.stages or self.reads) or options.num_gpus or self.read_limit is not None:
            return False
        if not self.options.fuses_with(DEFAULT_MAP_OPTIONS):
            return False
        if any(getattr(stage, "is_class", False) for stage in self.stages):
            return False
        return options.compute.max_size >= backend.num_slots(THREAD)

    def restart(self, upstream_name: str) -> None:
        self.stages, self.names, self.reads = [], [], False
        self.source_name = upstream_name
        self.options = DEFAULT_MAP_OPTIONS
        self.read_limit = None
        self.python_reads = False

    def close(self, planner: Planner, upstream: PhysicalOperator) -> PhysicalOperator:
        if not self.stages and not self.reads:
            return upstream
        transform = FusedTransform(
            self.stages,
            self.source_name,
            self.context.target_min_block_size,
            self.context.target_max_block_size,
        )
        name = "->".join(self.names) if self.names else "Map"
        kind = _choose_kind(transform, name, planner.backend.name, self.context, self.python_reads)
        limit = _task_limit(self.options, planner.backend.name, self.context)
        if self.read_limit is not None:
            limit = self.read_limit if limit is None else min(limit, self.read_limit)
        op = planner.add(
            MapOperator(
                name, upstream, transform, kind, max_concurrency=limit, options=self.options
            )
        )
        op.abandon_tasks = not any(isinstance(s, WriteStage) for s in self.stages)
        self.restart(name)
        return op


def _resumable_write(plan: LogicalPlan) -> Write | None:
    """The resumable write of ``plan``, checked to run in the same tasks as the read: each
    write task records what its read task read, so that a rerun skips exactly that."""
    for position, op in enumerate(plan.ops):
        if isinstance(op, Write) and op.resumable:
            check_resumable(plan.ops[:position], op.datasink)
            if not isinstance(plan.source, ReadSource):
                raise ValueError("resume=True needs a read (files or sf.range) as the source.")
            return op
    return None


def check_resumable(ops: Any, datasink: Any) -> None:
    """Raise ValueError unless a write after ``ops`` runs in the same tasks as the read."""
    fused = all(
        isinstance(o, MapLike) and not getattr(o, "options", DEFAULT_MAP_OPTIONS).uses_actors
        for o in ops
    )
    if not fused or _needs_own_operator(datasink):
        raise ValueError(
            "resume=True needs the write to run in the same tasks as the read: no limit, "
            "shuffle, sort, groupby, union, zip, join or actor pool before it, and no "
            "min_rows_per_file."
        )


def _without_done(bundles: list[RefBundle], done: Any) -> list[RefBundle]:
    """The read tasks of ``bundles`` less the input pieces ``done`` records: tasks wholly
    done are dropped, the others read only what is left (keeping their index, which names
    their files)."""
    kept = []
    for bundle in bundles:
        task = bundle.ref
        left = task.without_done(done)
        if left is None:
            continue
        kept.append(
            bundle if left is task else RefBundle(left, left.metadata, 0, bundle.source_index)
        )
    return kept


def _task_limit(options: MapOptions, backend_name: str, context: DataContext) -> int | None:
    """The most concurrent tasks of a fused run: ``concurrency=n``, and locally the tasks
    whose ``num_cpus`` fit the machine's CPUs."""
    limit = options.task_limit
    cpus = options.num_cpus
    if backend_name == "local" and cpus is not None and cpus > 1:
        fit = max(1, int(context.effective_num_cpus() // cpus))
        limit = fit if limit is None else min(limit, fit)
    return limit


def _runs_in_actors(options: MapOptions, backend: Backend) -> bool:
    """Actor pools run callable classes; locally, functions that ask for GPUs also run in
    long-lived workers, the only way to give each its own CUDA_VISIBLE_DEVICES."""
    return options.uses_actors or (backend.name == "local" and (options.num_gpus or 0) > 0)


def _actor_operator(
    op: Any, upstream: PhysicalOperator, context: DataContext, fused: _Fusion | None = None
) -> PhysicalOperator:
    """The actor-pool operator of ``op``, running first the stages of ``fused`` if given."""
    options = op.options
    strategy = options.compute
    if not isinstance(strategy, ActorPoolStrategy):  # a GPU function on the local backend
        strategy = ActorPoolStrategy(min_size=1, max_size=options.task_limit)
    stages, names, source = [stage_for(op)], [op.name], upstream.name
    if fused is not None:
        stages, names, source = fused.stages + stages, fused.names + names, fused.source_name
    transform = FusedTransform(
        stages, source, context.target_min_block_size, context.target_max_block_size
    )
    batch_size = getattr(op, "batch_size", None)
    min_rows = batch_size if isinstance(batch_size, int) else None
    return ActorMapOperator("->".join(names), upstream, transform, strategy, options, min_rows)


def _needs_own_operator(datasink: Any) -> bool:
    """Writes that gather rows across blocks, or must run on the driver, are not fused."""
    return bool(datasink.min_rows_per_write) or not datasink.supports_distributed_writes


def _write_operator(op: Write, upstream: PhysicalOperator, min_bytes: int) -> MapOperator:
    sink = op.datasink
    minimum = sink.min_rows_per_write
    if minimum is not None and (
        isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1
    ):
        raise ValueError(
            f"{type(sink).__name__}.min_rows_per_write must be a positive int or None, got {minimum!r}."
        )
    stage = WriteStage(sink, op.name, op.write_uuid, op.resumable)
    transform = FusedTransform([stage], op.name, min_bytes)
    kind = THREAD if sink.supports_distributed_writes else DRIVER
    operator = MapOperator(op.name, upstream, transform, kind, min_rows_per_task=minimum)
    operator.abandon_tasks = False  # a write's tasks end before it is cleaned up
    return operator


def _reads_hold_the_gil(datasource: Any) -> bool:
    method = getattr(datasource, "reads_hold_the_gil", None)  # not on Ray Data's datasources
    return bool(method()) if callable(method) else False


def _choose_kind(
    transform: FusedTransform,
    name: str,
    backend_name: str,
    context: DataContext,
    python_reads: bool = False,
) -> str:
    """Where a fused run's tasks go: worker processes when its Python code holds the GIL
    (row functions, or a read that says so: ``Datasource.reads_hold_the_gil``)."""
    if backend_name != "local" or not (transform.python_heavy or python_reads):
        return THREAD
    from shardflow.engine.execution.backends.process_worker import in_worker

    if in_worker():  # a pipeline run inside a user function: no workers of workers
        return THREAD
    if not context.python_udfs_in_processes or context.effective_num_cpus() < 2:
        return THREAD
    try:
        cloudpickle.dumps(transform)
    except Exception as exc:
        if name not in _warned_unpicklable:
            _warned_unpicklable.add(name)
            logger.warning(
                "%s: the function cannot be pickled (%s), so it runs in threads of this process "
                "and shares one core for Python code.",
                name,
                exc,
            )
        return THREAD
    return PROCESS


def plan_physical(
    plan: LogicalPlan,
    backend: Backend,
    context: DataContext,
    read_tasks: ReadTaskCache | None = None,
) -> PhysicalPlan:
    """The physical plan of an optimized logical plan."""
    return Planner(backend, context, read_tasks or ReadTaskCache(context)).plan(plan)
