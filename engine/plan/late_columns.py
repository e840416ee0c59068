"""Late materialization of a top-k over a read: sort keys first, whole rows for the winners.

``read(...).sort(key).take(k)`` decodes every column of every row to keep k rows. When the
read's datasource offers it (``late_materialization(keys, data_context)``, Parquet's), the
optimizer rewrites the plan so that the read decodes only the key columns (plus a position
per row), the top-k runs on those narrow rows, and a step after the limit fetches the other
columns of the k winning rows only (``FetchLateColumns``). The rows, their order and the
schema are the plain plan's.

The datasource declines wherever the two could differ; a datasource without the method is
never rewritten. ``DataContext.set_config("late_materialization", False)`` turns it off.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from shardflow.engine.execution.exchange.key_bound import KeyBound
from shardflow.engine.execution.stages.udf import Stage
from shardflow.engine.plan.logical import Limit, LogicalPlan, MapLike, ReadSource, TopK
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import TaskContext

CONFIG_KEY = "late_materialization"
#: The most rows fetched late: beyond this, reading whole rows in parallel read tasks wins.
MAX_LATE_ROWS = 1024


@dataclass(frozen=True, eq=False)
class FetchLateColumns(MapLike):
    """After a top-k's limit: fill in the columns the read left out, for the rows kept.

    ``fetch`` is the datasource's picklable callable (block -> block)."""

    fetch: Any
    row_preserving = True

    @property
    def name(self) -> str:
        return "FetchLateColumns"

    def make_stage(self) -> Stage:
        return FetchLateColumnsStage(self.fetch, self.name)


class FetchLateColumnsStage(Stage):
    """Runs ``fetch`` on each block. Not user code: a failure (a file gone) is reported as
    a read's is, naming the file."""

    def __init__(self, fetch: Any, name: str):
        self.fetch, self.name = fetch, name

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        for block in blocks:
            yield self.fetch(block)


def late_columns(plan: LogicalPlan) -> LogicalPlan:
    """Rewrite ``ReadSource -> TopK -> Limit -> ...`` for late materialization, when the
    read has nothing else pushed into it and its datasource accepts."""
    from shardflow.engine.api.context import DataContext

    source, ops = plan.source, plan.ops
    if not isinstance(source, ReadSource) or source.per_task_row_limit is not None:
        return plan
    if len(ops) < 2 or not isinstance(ops[0], TopK) or not isinstance(ops[1], Limit):
        return plan
    top_k, limit = ops[0], ops[1]
    if limit.limit > top_k.limit or limit.limit > MAX_LATE_ROWS:
        return plan
    offer = getattr(source.datasource, "late_materialization", None)
    if offer is None:
        return plan
    context = DataContext.get_current()
    if not context.get_config(CONFIG_KEY, True):
        return plan
    bound = KeyBound(top_k.key.descending[0], limit.limit)
    planned = offer(top_k.key.columns, context, bound=bound)
    if planned is None:
        return plan
    narrow, fetch = planned
    rest = (replace(top_k, bound=bound), limit, FetchLateColumns(fetch)) + ops[2:]
    return LogicalPlan(replace(source, datasource=narrow), rest)
