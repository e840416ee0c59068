"""Logical optimizations: push projection, filters and limits into reads.

Fusion of consecutive map-like operations into one task happens in the planner, which
builds one FusedTransform per run of map-like operations.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shardflow.engine.plan.late_columns import late_columns
from shardflow.engine.plan.logical import (
    Aggregate,
    FilterExpr,
    Join,
    Limit,
    LogicalPlan,
    Mix,
    Project,
    ReadSource,
    Sort,
    TopK,
    Union,
    Zip,
    is_row_preserving,
    projection_map_of,
)
from shardflow.sdk.expressions import and_all


def optimize(plan: LogicalPlan) -> LogicalPlan:
    """Apply every rule; the result computes exactly the same rows as ``plan``.

    Plans held by operations that combine datasets (union, zip, join) are optimized too.
    """
    plan = replace(plan, ops=tuple(_optimize_inputs(op) for op in plan.ops))
    plan = _project_before_aggregate(plan)
    plan = _merge_limits(plan)
    plan = _top_k(plan)
    plan = _push_filters(plan)
    plan = _push_projection(plan)
    plan = _push_limit(plan)
    plan = _encoded_group_keys(plan)
    plan = late_columns(plan)
    return plan


def _optimize_inputs(op: Any) -> Any:
    if isinstance(op, (Union, Mix, Zip)):
        return replace(op, others=tuple(optimize(p) for p in op.others))
    if isinstance(op, Join):
        return replace(op, right=optimize(op.right))
    return op


def _project_before_aggregate(plan: LogicalPlan) -> LogicalPlan:
    """An aggregation that reads only some columns gets a projection in front of it, which
    the next rule pushes into the read (when only filters come before the aggregation)."""
    ops = list(plan.ops)
    position = 0
    while position < len(ops) and isinstance(ops[position], FilterExpr):
        position += 1
    if position == len(ops) or not isinstance(ops[position], Aggregate):
        return plan
    needed = _columns_read(ops[position])
    if not needed:  # custom aggregations, or nothing but row counts
        return plan
    for op in ops[:position]:
        needed += [c for c in sorted(op.expr.referenced_columns()) if c not in needed]
    ops.insert(0, Project(select=tuple(needed), implicit=True))
    return replace(plan, ops=tuple(ops))


def _columns_read(op: Aggregate) -> Any:
    """The columns an aggregation reads, or None when a custom one may read any."""
    needed = list(op.keys)
    for agg in op.aggs:
        targets = agg.target_columns()
        if not targets and not _reads_no_column(agg):
            return None
        needed += [c for c in targets if c not in needed]
    return needed


def _reads_no_column(agg: Any) -> bool:
    from shardflow.engine.api.aggregate import Count

    return type(agg) is Count and agg.get_target_column() is None


def _encoded_group_keys(plan: LogicalPlan) -> LogicalPlan:
    """A group-by right after a read whose source can deliver string columns as Arrow
    dictionaries (Parquet's dictionary-encoded columns, read without decoding each value)
    gets its key columns so: the partial aggregation groups by the dictionary codes, and
    its output keys are plain strings as before. Keys an aggregation also reads, or that the
    read renames, stay plain."""
    source = plan.source
    if not plan.ops or not isinstance(plan.ops[0], Aggregate) or not isinstance(source, ReadSource):
        return plan
    encode = getattr(source.datasource, "with_encoded_columns", None)
    op = plan.ops[0]
    if encode is None or not op.keys:
        return plan
    projection = source.datasource.get_projection_map()
    read = {c for agg in op.aggs for c in agg.target_columns()}
    keys = tuple(
        k for k in op.keys if k not in read and (projection is None or projection.get(k) == k)
    )
    if not keys:
        return plan
    source = replace(source, datasource=encode(keys))
    ops = (replace(op, encoded_keys=keys),) + plan.ops[1:]
    return LogicalPlan(source, ops)


def _merge_limits(plan: LogicalPlan) -> LogicalPlan:
    ops: list[Any] = []
    for op in plan.ops:
        if isinstance(op, Limit) and ops and isinstance(ops[-1], Limit):
            ops[-1] = Limit(min(ops[-1].limit, op.limit))
        else:
            ops.append(op)
    return replace(plan, ops=tuple(ops))


def _top_k(plan: LogicalPlan) -> LogicalPlan:
    """A sort followed by a limit (after row-preserving operations only) becomes a top-k:
    each task keeps its first rows in sort order, and only those are merged. The limit
    stays (it also cuts the merged rows)."""
    ops = list(plan.ops)
    for position, op in enumerate(ops):
        if not isinstance(op, Sort):
            continue
        for later in ops[position + 1 :]:
            if isinstance(later, Limit):
                ops[position] = TopK(op.key, later.limit, op.boundaries)
                break
            if not is_row_preserving(later):
                break
    return replace(plan, ops=tuple(ops))


def _push_filters(plan: LogicalPlan) -> LogicalPlan:
    """Leading expression filters (before anything that renames or computes columns)."""
    source = plan.source
    if not isinstance(source, ReadSource) or not source.datasource.supports_predicate_pushdown():
        return plan
    leading = []
    for op in plan.ops:
        if not isinstance(op, FilterExpr) or op.expr.runs_python():
            break  # a filter calling Python code (a udf) stays a stage of its own
        leading.append(op)
    if not leading:
        return plan
    datasource = source.datasource.apply_predicate(and_all(op.expr for op in leading))
    rest = plan.ops[len(leading) :]
    if not datasource.is_predicate_pushdown_exact():
        rest = tuple(leading) + rest
    return LogicalPlan(replace(source, datasource=datasource), tuple(rest))


def _push_projection(plan: LogicalPlan) -> LogicalPlan:
    """Leading select/rename operations, and those right after re-applied filters."""
    source = plan.source
    if not isinstance(source, ReadSource) or not source.datasource.supports_projection_pushdown():
        return plan
    ops = list(plan.ops)
    filters = []
    while ops and isinstance(ops[0], FilterExpr):
        filters.append(ops.pop(0))
    needed = set()
    for op in filters:
        needed |= op.expr.referenced_columns()
    current = source.datasource.get_projection_map()
    pushed = 0
    for op in ops:
        if not isinstance(op, Project):
            break
        new_map = projection_map_of(op, current)
        if new_map is None:
            break
        if not needed <= {src for src, out in new_map.items() if src == out}:
            break  # the re-applied filter still needs its columns under their source names
        current = new_map
        pushed += 1
    if not pushed:
        return plan
    datasource = source.datasource.apply_projection(current)
    return LogicalPlan(replace(source, datasource=datasource), tuple(filters + ops[pushed:]))


def _push_limit(plan: LogicalPlan) -> LogicalPlan:
    """A limit after row-preserving operations caps each read task (the limit stays too)."""
    source = plan.source
    if not isinstance(source, ReadSource):
        return plan
    for op in plan.ops:
        if isinstance(op, Limit):
            limit = op.limit
            if source.per_task_row_limit is not None:
                limit = min(limit, source.per_task_row_limit)
            return LogicalPlan(replace(source, per_task_row_limit=limit), plan.ops)
        if not is_row_preserving(op):
            return plan
    return plan
