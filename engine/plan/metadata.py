"""What a plan's output is known to be without running it: its schema and its row count.

Both start from the source (blocks in hand, or the read tasks a datasource planned) and
follow the operations that keep them computable: a filter or a sort keeps the schema, a
projection reshapes it, a map makes it unknown; a row-preserving operation or an exchange
that only moves rows keeps the count, a limit caps it. ``schema(fetch_if_missing=False)``,
``count()`` and ``repr`` use these answers to avoid an execution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from shardflow.engine.plan.logical import (
    BlocksSource,
    FilterExpr,
    FilterRows,
    Limit,
    LogicalPlan,
    Mix,
    Project,
    RandomizeBlockOrder,
    RandomSample,
    RandomShuffle,
    ReadSource,
    Repartition,
    Sort,
    TopK,
    Union,
    is_row_preserving,
)

# Operations that move or drop rows but never change the columns.
_SCHEMA_KEEPING = (
    Limit,
    FilterExpr,
    FilterRows,
    RandomSample,
    Sort,
    TopK,
    RandomShuffle,
    RandomizeBlockOrder,
    Repartition,
    Union,
    Mix,
)
# Operations that move rows between blocks but keep every row.
_COUNT_KEEPING = (Sort, RandomShuffle, RandomizeBlockOrder, Repartition)


def source_schema(
    source: Any, read_tasks: Any, resolve: Callable[[Any], pa.Table]
) -> pa.Schema | None:
    """The schema of a plan's source, when known without running a task.

    Args:
        source: A BlocksSource or ReadSource.
        read_tasks: The execution's ReadTaskCache (its tasks may declare a schema).
        resolve: Turns a block reference of a materialized source into its table.
    """
    if isinstance(source, BlocksSource):
        if source.metadata is None:
            return _unified([b.schema for b in source.blocks if b.num_columns])
        for block_ref, meta in zip(source.blocks, source.metadata):
            if meta.num_rows:
                return resolve(block_ref).schema
        return None
    if isinstance(source, ReadSource):
        tasks = read_tasks.get(source)
        if tasks and tasks[0].schema is not None:
            return tasks[0].schema
    return None


def _unified(schemas: list[pa.Schema]) -> pa.Schema | None:
    """One schema for blocks built apart (a column all null in one block and typed in
    another has the type), or the first block's when they do not unify."""
    if not schemas:
        return None
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return schemas[0]


def schema_after(op: Any, schema: pa.Schema) -> pa.Schema | None:
    """The output schema of ``op`` given its input schema, or None when not known."""
    if isinstance(op, _SCHEMA_KEEPING):
        return schema
    if isinstance(op, Project):
        return _project(op, schema)
    output_schema = getattr(op, "output_schema", None)  # operations that can tell (with_column)
    if output_schema is not None:
        return output_schema(schema)
    return None


def _project(op: Project, schema: pa.Schema) -> pa.Schema | None:
    names = schema.names
    if op.select is not None:
        if any(c not in names for c in op.select):
            return None
        return pa.schema([schema.field(c) for c in op.select])
    if op.drop is not None:
        if any(c not in names for c in op.drop):
            return None
        kept = [schema.field(i) for i, c in enumerate(names) if c not in op.drop]
        return pa.schema(kept) if kept else None
    rename = op.rename or {}
    new_names = [rename.get(c, c) for c in names]
    if any(c not in names for c in rename) or len(set(new_names)) != len(new_names):
        return None  # the run raises the error
    return pa.schema([f.with_name(n) for f, n in zip(schema, new_names)])


def plan_schema(
    plan: LogicalPlan, read_tasks: Any, resolve: Callable[[Any], pa.Table]
) -> pa.Schema | None:
    """The output schema of ``plan`` when known without running it, else None."""
    schema = source_schema(plan.source, read_tasks, resolve)
    for op in plan.ops:
        if schema is None:
            return None
        schema = schema_after(op, schema)
    return schema


def source_num_rows(source: Any, read_tasks: Any) -> int | None:
    """The row count of a plan's source when its metadata gives it, else None."""
    if isinstance(source, BlocksSource):
        if source.metadata is None:
            return sum(b.num_rows for b in source.blocks)
        rows: list[int | None] = [m.num_rows for m in source.metadata]
    elif isinstance(source, ReadSource):
        rows = [t.metadata.num_rows for t in read_tasks.get(source)]
    else:
        return None
    return None if any(r is None for r in rows) else sum(rows)  # type: ignore[misc]


def plan_num_rows(plan: LogicalPlan, read_tasks: Any) -> int | None:
    """The row count of ``plan`` when metadata gives it without running anything, else None."""
    for op in plan.ops:
        if isinstance(op, Project) and op.drop is not None:
            return None  # dropping every column leaves no rows, as in Ray Data
        if not (isinstance(op, (Limit, TopK) + _COUNT_KEEPING) or is_row_preserving(op)):
            return None
    total = source_num_rows(plan.source, read_tasks)
    if total is None:
        return None
    for op in plan.ops:
        if isinstance(op, (Limit, TopK)):
            total = min(total, op.limit)
    return total
