"""Statistics of an execution as data: ``Dataset.get_stats_summary`` and
``list_stats_summaries``, with the names of Ray Data's ``DatasetStatsSummary``.

``Dataset.stats()`` gives the same figures as a report; these classes give them to
programs (benchmarks, tests): per operator, min / max / mean / sum over its tasks of their
wall time, CPU time, rows and bytes out, and the nodes they ran on.

With ``DataContext.enable_stats_summary_collection`` set, every finished execution's summary
is kept in the driver (``list_stats_summaries`` returns them in the order they finished),
as Ray Data keeps them for its cluster.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from shardflow.engine.execution.stats import ExecutionStats, OperatorStats, fmt_bytes


@dataclass(frozen=True)
class StatsSummary:
    """Min, max, mean, sum and count of one figure over an operator's tasks."""

    min: int | float
    max: int | float
    mean: float
    sum: int | float
    count: int

    @classmethod
    def of(cls, values: list[int | float]) -> StatsSummary | None:
        if not values:
            return None
        total = sum(values)
        return cls(min(values), max(values), total / len(values), total, len(values))

    def to_dict(
        self, *, mean_as_int: bool = False, include_sum: bool = True, include_count: bool = True
    ) -> dict[str, int | float]:
        """The figures as a dict (``min``, ``max``, ``mean``, and ``sum`` and ``count``
        unless left out)."""
        result: dict[str, int | float] = {
            "min": self.min,
            "max": self.max,
            "mean": int(self.mean) if mean_as_int else self.mean,
        }
        if include_sum:
            result["sum"] = self.sum
        if include_count:
            result["count"] = self.count
        return result


@dataclass
class OperatorStatsSummary:
    """What one operator of an execution did, over its tasks."""

    operator_name: str
    is_sub_operator: bool
    time_total_s: float
    earliest_start_time: float | None
    latest_end_time: float | None
    block_execution_summary_str: str
    wall_time: StatsSummary | None = None
    cpu_time: StatsSummary | None = None
    total_input_num_rows: int | None = None
    output_num_rows: StatsSummary | None = None
    output_size_bytes: StatsSummary | None = None
    node_count: StatsSummary | None = None
    #: shardflow's own figures of the operator: tasks, rows and bytes out, spilled bytes,
    #: retries, peak queued bytes.
    extra_metrics: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, op: OperatorStats) -> OperatorStatsSummary:
        records = op.task_records
        starts = [r.start for r in records]
        ends = [r.end for r in records]
        cpu = [r.cpu_s for r in records if r.cpu_s is not None]
        return cls(
            operator_name=op.name,
            is_sub_operator=False,
            time_total_s=op.wall_time_s,
            earliest_start_time=min(starts) if starts else None,
            latest_end_time=max(ends) if ends else None,
            block_execution_summary_str=(
                f"{op.tasks_finished} tasks executed, {op.rows_out} rows and "
                f"{fmt_bytes(op.bytes_out)} output"
            ),
            wall_time=StatsSummary.of([r.wall_s for r in records]),
            cpu_time=StatsSummary.of(cpu),
            total_input_num_rows=op.rows_in or None,
            output_num_rows=StatsSummary.of([r.rows for r in records]),
            output_size_bytes=StatsSummary.of([r.bytes for r in records]),
            node_count=StatsSummary.of(list(op.tasks_per_node.values())),
            extra_metrics={
                "num_tasks": op.tasks,
                "num_tasks_finished": op.tasks_finished,
                "rows_out": op.rows_out,
                "bytes_out": op.bytes_out,
                "bytes_spilled": op.bytes_spilled,
                "tasks_retried": op.tasks_retried,
                "peak_queued_bytes": op.peak_queued_bytes,
            },
        )

    def num_rows_per_s(self) -> float:
        """Rows out per second of the operator's wall time."""
        rows = self.output_num_rows.sum if self.output_num_rows else 0
        return rows / self.time_total_s if self.time_total_s else 0.0


@dataclass
class DatasetStatsSummary:
    """The statistics of one execution of a dataset (or of none, before it runs).

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range(100, override_num_blocks=2).map_batches(lambda b: b)
        >>> _ = ds.take_all()
        >>> summary = ds.get_stats_summary()
        >>> [op.output_num_rows.sum for op in summary.operators_stats]
        [100]
    """

    operators_stats: list[OperatorStatsSummary]
    iter_stats: Any
    parents: list[DatasetStatsSummary]
    number: int
    dataset_uuid: str
    time_total_s: float
    base_name: str
    extra_metrics: dict[str, Any]
    global_bytes_spilled: int
    global_bytes_restored: int
    dataset_bytes_spilled: int
    _report: str = field(default="", repr=False)

    @classmethod
    def of(cls, stats: ExecutionStats | None, dataset_uuid: str) -> DatasetStatsSummary:
        if stats is None:
            return cls([], None, [], 0, dataset_uuid, 0.0, "", {}, 0, 0, 0, "")
        operators = [OperatorStatsSummary.of(op) for op in stats.operators]
        consumer = stats.consumer
        iter_stats = None
        if consumer is not None and consumer.batches:
            iter_stats = {
                "batches": consumer.batches,
                "blocked_s": consumer.blocked_s,
                "user_s": consumer.user_s,
                "first_batch_s": consumer.first_batch_s,
            }
        return cls(
            operators_stats=operators,
            iter_stats=iter_stats,
            parents=[],
            number=len(operators),
            dataset_uuid=dataset_uuid,
            time_total_s=stats.wall_time_s,
            base_name="->".join(op.operator_name for op in operators),
            extra_metrics={
                "backend": stats.backend,
                "rows_out": stats.rows_out,
                "peak_bytes_in_flight": stats.peak_bytes_in_flight,
                "memory_budget_bytes": stats.memory_budget_bytes,
                "driver_peak_rss": stats.driver_peak_rss,
            },
            global_bytes_spilled=stats.bytes_spilled,
            global_bytes_restored=0,
            dataset_bytes_spilled=stats.bytes_spilled,
            _report=stats.to_string(),
        )

    def to_string(self, *args: Any, **kwargs: Any) -> str:
        """The report ``Dataset.stats()`` gives for this execution (Ray Data's arguments
        are accepted and change nothing)."""
        return self._report or "This dataset has not been executed yet."

    def get_total_wall_time(self) -> float:
        """Seconds from the first task's start to the last task's end."""
        starts = [o.earliest_start_time for o in self.operators_stats if o.earliest_start_time]
        ends = [o.latest_end_time for o in self.operators_stats if o.latest_end_time]
        return max(ends) - min(starts) if starts and ends else 0.0

    def get_total_cpu_time(self) -> float:
        """CPU seconds of every task."""
        return float(sum(o.cpu_time.sum for o in self.operators_stats if o.cpu_time))

    def num_rows_per_s(self) -> float:
        """Rows out per second of the execution's wall time."""
        rows = self.extra_metrics.get("rows_out", 0)
        return rows / self.time_total_s if self.time_total_s else 0.0


_collected: list[DatasetStatsSummary] = []
_collected_lock = threading.Lock()

#: On the Ray backend summaries go to one actor per cluster (as Ray Data's do), so that
#: those of executions run elsewhere (a streaming_split's coordinator, another driver)
#: are listed too.
SUMMARY_ACTOR_NAME = "shardflow_stats_summaries"
SUMMARY_ACTOR_NAMESPACE = "shardflow"


class _SummaryStore:
    def __init__(self) -> None:
        self._summaries: list[DatasetStatsSummary] = []

    def append(self, summary: DatasetStatsSummary) -> None:
        self._summaries.append(summary)

    def list(self) -> list[DatasetStatsSummary]:
        return self._summaries


def _summary_actor() -> Any:
    """The cluster's store of summaries (a detached Ray actor, made on first use)."""
    import ray

    store = ray.remote(num_cpus=0)(_SummaryStore)
    return store.options(
        name=SUMMARY_ACTOR_NAME,
        namespace=SUMMARY_ACTOR_NAMESPACE,
        get_if_exists=True,
        lifetime="detached",
    ).remote()


def _on_ray() -> bool:
    from shardflow.engine.execution.runtime import current_backend

    return current_backend().name == "ray"


def record_finished_execution(stats: ExecutionStats, dataset_uuid: str) -> None:
    """Keep the summary of a finished execution for ``list_stats_summaries``."""
    summary = DatasetStatsSummary.of(stats, dataset_uuid)
    if stats.backend == "ray":
        import ray

        # Waits for the store, so the summary is listed once the execution has returned.
        ray.get(_summary_actor().append.remote(summary))
        return
    with _collected_lock:
        _collected.append(summary)


def list_stats_summaries() -> list[DatasetStatsSummary]:
    """The summaries of executions that finished while
    ``DataContext.enable_stats_summary_collection`` was set, oldest first, as Ray Data's
    ``list_stats_summaries``: on the Ray backend those of the whole cluster, on the local
    backend those of this process.

    Returns:
        A list of :class:`DatasetStatsSummary`.

    Examples:
        >>> import shardflow as sf
        >>> context = sf.DataContext.get_current()
        >>> context.enable_stats_summary_collection = True
        >>> before = len(sf.list_stats_summaries())
        >>> _ = sf.range(10).map_batches(lambda b: b).take_all()
        >>> len(sf.list_stats_summaries()) - before
        1
        >>> context.enable_stats_summary_collection = False
    """
    if _on_ray():
        import ray

        return list(ray.get(_summary_actor().list.remote()))
    with _collected_lock:
        return list(_collected)
