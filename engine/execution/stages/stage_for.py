"""The stage that runs each one-to-one logical operation inside a fused map task."""

from __future__ import annotations

from typing import Any

from shardflow.engine.execution.stages.columns import AddColumnStage, ProjectStage
from shardflow.engine.execution.stages.transforms import (
    BatchMapStage,
    ExprFilterStage,
    FlatMapStage,
    RandomSampleStage,
    RowFilterStage,
    RowMapStage,
    Stage,
)
from shardflow.engine.plan.logical import (
    AddColumn,
    FilterExpr,
    FilterRows,
    FlatMap,
    MapBatches,
    MapRows,
    Project,
    RandomSample,
)


def _udf_args(op: Any) -> tuple:
    udf = op.udf
    return (udf.fn_args, udf.fn_kwargs, udf.fn_constructor_args, udf.fn_constructor_kwargs)


def stage_for(op: Any) -> Stage:
    """The executable stage of a one-to-one logical operation.

    An operation defined outside this module (XShards' shard maps) builds its own stage
    through a ``make_stage()`` method.
    """
    make_stage = getattr(op, "make_stage", None)
    if make_stage is not None:
        return make_stage()
    if isinstance(op, MapRows):
        return RowMapStage(op.udf.fn, op.name, *_udf_args(op))
    if isinstance(op, FlatMap):
        return FlatMapStage(op.udf.fn, op.name, *_udf_args(op))
    if isinstance(op, FilterRows):
        return RowFilterStage(op.udf.fn, op.name, *_udf_args(op))
    if isinstance(op, FilterExpr):
        from shardflow.sdk.expression_eval import random_executions

        return ExprFilterStage(op.expr, op.name, random_executions([op.expr]))
    if isinstance(op, MapBatches):
        fn_args, fn_kwargs, ctor_args, ctor_kwargs = _udf_args(op)
        return BatchMapStage(
            op.udf.fn,
            op.name,
            op.batch_size,
            op.batch_format,
            fn_args,
            fn_kwargs,
            ctor_args,
            ctor_kwargs,
            op.zero_copy_batch,
        )
    if isinstance(op, Project):
        return ProjectStage(
            op.name,
            select=None if op.select is None else list(op.select),
            drop=None if op.drop is None else list(op.drop),
            rename=op.rename,
            implicit=op.implicit,
        )
    if isinstance(op, AddColumn):
        return AddColumnStage(op.col, op.fn, op.name, op.batch_format)
    if isinstance(op, RandomSample):
        from shardflow.sdk.random_seeds import seed_for_execution

        return RandomSampleStage(op.fraction, seed_for_execution(op.seed), op.name)
    raise TypeError(f"No stage for logical operation {op!r}.")
