"""A plan cut into independent pieces: sub-plans that each run alone and together give the
plan's rows, in order, each row exactly once.

Hand-offs to other systems use them where the other system schedules the work: a Dask
partition, a PyTorch DataLoader worker or a Spark task runs one piece as a plan of its own,
so no process ever holds more than its pieces. A plan can be cut when its operations are all
one-to-one (maps, filters, projections: they run inside each read task): a read is cut into
its read tasks, blocks in hand into single blocks. Limits, exchanges, unions, zips, joins and
writes depend on rows of other pieces; such a plan is materialized first (see ``pieces_of``).
"""

from __future__ import annotations

from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.plan.logical import BlocksSource, LogicalPlan, MapLike, ReadSource
from shardflow.engine.plan.optimizer import optimize
from shardflow.engine.plan.planner import datasource_reads_in_driver, plan_read_tasks
from shardflow.sdk.datasource import Datasource, ReadTask


class PlannedReadTasks(Datasource):
    """Read tasks planned already (one piece of another datasource's read).

    Pushdowns were applied when the tasks were planned, so this source declares none.
    """

    def __init__(self, tasks: list[ReadTask], name: str, reads_in_driver: bool = False):
        self._tasks = list(tasks)
        self._name = name
        self._reads_in_driver = reads_in_driver

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ReadTask]:
        return list(self._tasks)

    def estimate_inmemory_data_size(self) -> int | None:
        sizes = [t.metadata.size_bytes for t in self._tasks]
        return None if any(s is None for s in sizes) else int(sum(sizes))

    def get_name(self) -> str:
        return self._name

    def reads_in_driver(self) -> bool:
        return self._reads_in_driver


def can_cut(plan: LogicalPlan) -> bool:
    """Whether ``plan`` (optimized) cuts into independent pieces without running it."""
    return isinstance(plan.source, (ReadSource, BlocksSource)) and all(
        isinstance(op, MapLike) for op in plan.ops
    )


def cut_plan(plan: LogicalPlan, context: DataContext | None = None) -> list[LogicalPlan] | None:
    """The independent pieces of ``plan``, in order, or None when it cannot be cut.

    Plans the read's tasks once (on the driver, reading only metadata such as listings).
    """
    plan = optimize(plan)
    if not can_cut(plan):
        return None
    source = plan.source
    if isinstance(source, BlocksSource):
        metas = source.metadata or (None,) * len(source.blocks)
        return [
            LogicalPlan(
                BlocksSource((block,), source.name, None if meta is None else (meta,)), plan.ops
            )
            for block, meta in zip(source.blocks, metas)
        ]
    tasks = plan_read_tasks(source, context or DataContext.get_current())
    name = source.datasource.get_name()
    in_driver = datasource_reads_in_driver(source.datasource)
    return [
        LogicalPlan(
            ReadSource(PlannedReadTasks([task], name, in_driver), concurrency=source.concurrency),
            plan.ops,
        )
        for task in tasks
    ]


def pieces_of(dataset: Any) -> list[Any]:
    """Datasets that together give ``dataset``'s rows in order, each runnable on its own.

    A plan that cannot be cut is materialized first (its blocks stay where the backend keeps
    them: this process's memory on the local backend, the object store on Ray), and each of
    its blocks is one piece.
    """
    from shardflow.engine.api.dataset import Dataset

    plans = cut_plan(dataset._plan)
    if plans is None:
        plans = cut_plan(dataset.materialize()._plan)
        assert plans is not None  # a materialized plan is blocks in hand
    return [Dataset(plan) for plan in plans]


def join_pieces(plans: list[LogicalPlan]) -> LogicalPlan | None:
    """One plan running ``plans`` (pieces of one plan, from ``cut_plan``) in order, or None
    for no pieces. Its tasks read exactly what theirs read."""
    if not plans:
        return None
    first = plans[0]
    if isinstance(first.source, BlocksSource):
        blocks = tuple(b for p in plans for b in p.source.blocks)
        metas = [p.source.metadata for p in plans]
        joined = None if any(m is None for m in metas) else tuple(m for ms in metas for m in ms)
        return LogicalPlan(BlocksSource(blocks, first.source.name, joined), first.ops)
    tasks = [t for p in plans for t in p.source.datasource.get_read_tasks(1)]
    datasource = first.source.datasource
    return LogicalPlan(
        ReadSource(
            PlannedReadTasks(tasks, datasource.get_name(), datasource.reads_in_driver()),
            concurrency=first.source.concurrency,
        ),
        first.ops,
    )
