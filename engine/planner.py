"""From an optimized logical plan to a physical plan of fused operators."""

from __future__ import annotations

import inspect
import logging
import math
from typing import Any, List, Optional

import cloudpickle

from shardflow.engine.backends.base import DRIVER, PROCESS, THREAD
from shardflow.engine.context import DataContext
from shardflow.engine.logical import BlocksSource, LimitOp, LogicalPlan, MapOp, ReadSource, WriteOp
from shardflow.engine.physical import LimitOperator, MapOperator, PhysicalPlan
from shardflow.engine.transforms import FusedTransform, WriteStage
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


def plan_read_tasks(source: ReadSource, context: DataContext) -> List[ReadTask]:
    """Ask the datasource for its read tasks, passing only arguments its signature accepts."""
    datasource = source.datasource
    parallelism = source.parallelism if source.parallelism and source.parallelism > 0 else auto_parallelism(datasource, context)
    kwargs = {}
    params = inspect.signature(datasource.get_read_tasks).parameters
    accepts_any = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    if source.per_task_row_limit is not None and ("per_task_row_limit" in params or accepts_any):
        kwargs["per_task_row_limit"] = source.per_task_row_limit
    if "data_context" in params or accepts_any:
        kwargs["data_context"] = context
    tasks = datasource.get_read_tasks(parallelism, **kwargs)
    if tasks is None:
        raise TypeError(f"{type(datasource).__name__}.get_read_tasks returned None; return a list of ReadTask.")
    tasks = list(tasks)
    for task in tasks:
        if not isinstance(task, ReadTask):
            raise TypeError(
                f"{type(datasource).__name__}.get_read_tasks must return ReadTask objects; got "
                f"{type(task).__name__}."
            )
    if source.per_task_row_limit is not None:
        tasks = _tasks_for_limit([t.with_row_limit(source.per_task_row_limit) for t in tasks], source.per_task_row_limit)
    return tasks


def _tasks_for_limit(tasks: List[ReadTask], limit: int) -> List[ReadTask]:
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


def plan_physical(plan: LogicalPlan, backend_name: str, context: DataContext) -> PhysicalPlan:
    """Fuse runs of map-like operations into MapOperators, split at limits."""
    source = plan.source
    metadata = None
    if isinstance(source, ReadSource):
        items: List[Any] = plan_read_tasks(source, context)
        source_name = source.name
    elif isinstance(source, BlocksSource):
        items = list(source.blocks)
        source_name = source.name
        metadata = list(source.metadata) if source.metadata is not None else None
    else:
        raise TypeError(f"Unknown source {source!r}.")

    operators: List[Any] = []
    names: List[str] = [source_name] if isinstance(source, ReadSource) else []
    min_bytes = context.target_min_block_size
    fused: Optional[FusedTransform] = FusedTransform([], source_name, min_bytes)
    passthrough = isinstance(source, BlocksSource)

    def close_map() -> None:
        nonlocal fused, names, passthrough
        if fused is not None and (fused.stages or not passthrough):
            name = "->".join(names) if names else "Map"
            operators.append(MapOperator(name, fused, _choose_kind(fused, name, backend_name, context)))
        fused, names, passthrough = None, [], False

    for op in plan.ops:
        if isinstance(op, LimitOp):
            close_map()
            operators.append(LimitOperator(op.name, op.limit))
            continue
        if fused is None:
            fused = FusedTransform([], op.name, min_bytes)
        if isinstance(op, MapOp):
            fused = fused.then(op.stage)
        elif isinstance(op, WriteOp) and _needs_own_operator(op.datasink):
            close_map()
            operators.append(_write_operator(op, min_bytes))
            continue
        elif isinstance(op, WriteOp):
            fused = fused.then(WriteStage(op.datasink, op.name, op.write_uuid))
        else:
            raise TypeError(f"Unknown operation {op!r}.")
        names.append(op.name)
    close_map()
    return PhysicalPlan(items, source_name, operators, metadata)


def _needs_own_operator(datasink: Any) -> bool:
    """Writes that gather rows across blocks, or must run on the driver, are not fused."""
    return bool(datasink.min_rows_per_write) or not datasink.supports_distributed_writes


def _write_operator(op: WriteOp, min_bytes: int) -> MapOperator:
    sink = op.datasink
    minimum = sink.min_rows_per_write
    if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1):
        raise ValueError(f"{type(sink).__name__}.min_rows_per_write must be a positive int or None, got {minimum!r}.")
    transform = FusedTransform([WriteStage(sink, op.name, op.write_uuid)], op.name, min_bytes)
    kind = THREAD if sink.supports_distributed_writes else DRIVER
    return MapOperator(op.name, transform, kind, min_rows_per_task=minimum)


def _choose_kind(transform: FusedTransform, name: str, backend_name: str, context: DataContext) -> str:
    if backend_name != "local" or not transform.python_heavy:
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
                "and shares one core for Python code.", name, exc
            )
        return THREAD
    return PROCESS
