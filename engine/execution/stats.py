"""Execution statistics: per operator wall and CPU time, rows, bytes and memory, with
min / max / mean over its tasks; what the consumer waited; every task for the timeline.

Workers measure their tasks themselves (engine/execution/task_timing.py); the task pool
turns each finished task into a :class:`TaskRecord` of its operator. ``str()`` of
:class:`ExecutionStats` is the report ``Dataset.stats()`` returns; ``timeline()`` writes the
tasks as a Chrome trace (engine/execution/timeline.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def fmt_bytes(n: float) -> str:
    """``n`` bytes, in the largest unit that keeps the number at or above 1."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def fmt_seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f}us"
    if s < 1:
        return f"{s * 1e3:.1f}ms"
    return f"{s:.2f}s"


@dataclass
class TaskRecord:
    """One finished task: when and where it ran, its CPU time, what it produced.

    ``start`` and ``end`` are wall-clock seconds since the epoch, measured in the worker
    (the driver's clock for tasks that did not report theirs); ``worker`` names the thread or
    process it ran in, ``phase`` the step of an exchange (``"map"`` or ``"reduce"``).
    """

    operator: str
    index: int
    start: float
    end: float
    cpu_s: float | None = None
    rows: int = 0
    bytes: int = 0
    pid: int | None = None
    thread: int = 0
    worker: str = ""
    node: str = ""
    peak_rss: int | None = None
    phase: str = ""
    attempt: int = 0

    @property
    def wall_s(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class PhaseStats:
    """Tasks of one step of an operator (an exchange's map or reduce)."""

    tasks: int = 0
    finished: int = 0
    rows: int = 0
    total: int | None = None  # tasks the step will run, once known


@dataclass
class OperatorStats:
    """What one operator did during an execution."""

    name: str
    tasks: int = 0
    tasks_finished: int = 0
    rows_out: int = 0
    bytes_out: int = 0
    task_time_s: float = 0.0
    peak_queued_bytes: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    skipped_files: int = 0
    bytes_spilled: int = 0
    tasks_retried: int = 0
    errored_blocks: int = 0
    actors_started: int = 0
    peak_actors: int = 0
    #: Ray backend: tasks that ended on each node (by node id).
    tasks_per_node: Counter = field(default_factory=Counter)
    #: Actor pools on Ray: input bytes found on the chosen actor's node, and elsewhere.
    local_input_bytes: int = 0
    remote_input_bytes: int = 0
    rows_in: int = 0
    task_records: list[TaskRecord] = field(default_factory=list)
    phases: dict[str, PhaseStats] = field(default_factory=dict)
    #: Actors of an actor pool: starting, ready and running a task, ready and idle.
    actors_starting: int = 0
    actors_running: int = 0
    actors_idle: int = 0
    inputs_pending: int = 0  # inputs waiting for an actor or a free slot

    @property
    def wall_time_s(self) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished_at if self.finished_at is not None else time.perf_counter()
        return end - self.started_at

    def mark_started(self) -> None:
        if self.started_at is None:
            self.started_at = time.perf_counter()

    def mark_finished(self) -> None:
        self.finished_at = time.perf_counter()

    def phase(self, name: str) -> PhaseStats:
        found = self.phases.get(name)
        if found is None:
            found = self.phases[name] = PhaseStats()
        return found

    def summary_line(self, number: int) -> str:
        """The first line of this operator in the report (one line per operator)."""
        line = (
            f"Operator {number} {self.name}: {self.tasks} tasks, {self.wall_time_s:.3f}s wall, "
            f"{self.task_time_s:.3f}s in tasks, {self.rows_out} rows out, "
            f"{fmt_bytes(self.bytes_out)} out, peak queued {fmt_bytes(self.peak_queued_bytes)}"
        )
        if self.bytes_spilled:
            line += f", {fmt_bytes(self.bytes_spilled)} spilled"
        if self.tasks_retried:
            line += f", {self.tasks_retried} tasks retried"
        if self.errored_blocks:
            line += f", {self.errored_blocks} failed blocks skipped"
        if self.skipped_files:
            line += f", {self.skipped_files} bad files skipped"
        if self.actors_started:
            line += f", {self.actors_started} actors started (at most {self.peak_actors} at once)"
        if len(self.tasks_per_node) > 1:
            line += f", tasks on {len(self.tasks_per_node)} nodes"
        read = self.local_input_bytes + self.remote_input_bytes
        if read:
            line += f", {100 * self.local_input_bytes / read:.0f}% of input bytes node-local"
        return line

    def detail_lines(self) -> list[str]:
        """Per-task figures: min, max, mean (and total) over the operator's tasks."""
        records = self.task_records
        if not records:
            return []
        lines = []
        for phase in sorted({r.phase for r in records}):
            group = [r for r in records if r.phase == phase]
            prefix = f"[{phase}] " if phase else ""
            lines += _task_lines(prefix, group)
        nodes = {r.node for r in records if r.node}
        workers = {(r.node, r.pid, r.thread) for r in records}
        lines.append(
            f"* Ran on {len(workers)} worker(s)"
            + (f" on {len(nodes)} node(s)" if len(nodes) > 1 else "")
        )
        if self.wall_time_s > 0 and self.rows_out:
            lines.append(f"* Throughput: {self.rows_out / self.wall_time_s:,.0f} rows/s")
        return lines


def _task_lines(prefix: str, records: list[TaskRecord]) -> list[str]:
    walls = [r.wall_s for r in records]
    lines = [
        f"* {prefix}Task wall time: {_spread(walls, fmt_seconds)}, {fmt_seconds(sum(walls))} total"
    ]
    cpus = [r.cpu_s for r in records if r.cpu_s is not None]
    if cpus:
        lines.append(
            f"* {prefix}Task CPU time: {_spread(cpus, fmt_seconds)}, {fmt_seconds(sum(cpus))} total"
        )
    rows = [r.rows for r in records]
    lines.append(f"* {prefix}Rows out per task: {_spread(rows, _fmt_count)}, {sum(rows)} total")
    sizes = [r.bytes for r in records]
    lines.append(
        f"* {prefix}Bytes out per task: {_spread(sizes, fmt_bytes)}, {fmt_bytes(sum(sizes))} total"
    )
    peaks = [r.peak_rss for r in records if r.peak_rss is not None]
    if peaks:
        lines.append(f"* {prefix}Peak memory of the worker (RSS): {_spread(peaks, fmt_bytes)}")
    return lines


def _fmt_count(n: float) -> str:
    return f"{n:.1f}" if isinstance(n, float) and not n.is_integer() else f"{int(n)}"


def _spread(values: list[Any], fmt: Callable[[Any], str]) -> str:
    mean = sum(values) / len(values)
    return f"{fmt(min(values))} min, {fmt(max(values))} max, {fmt(mean)} mean"


@dataclass
class ConsumerTimer:
    """Where a consumer of batches spent its time: blocked waiting for the next batch, or
    in its own code between batches (``iter_batches`` and friends)."""

    blocked_s: float = 0.0
    user_s: float = 0.0
    batches: int = 0
    first_batch_s: float | None = None

    def timed(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, timing each wait for the next one and the consumer's time between."""
        iterator = iter(items)
        started = time.perf_counter()
        while True:
            asked = time.perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                self.blocked_s += time.perf_counter() - asked
                return
            got = time.perf_counter()
            self.blocked_s += got - asked
            if self.first_batch_s is None:
                self.first_batch_s = got - started
            self.batches += 1
            yield item
            self.user_s += time.perf_counter() - got


@dataclass
class ExecutionStats:
    """Statistics of one execution of a dataset; ``str()`` gives a readable report."""

    backend: str
    memory_budget_bytes: int
    operators: list[OperatorStats] = field(default_factory=list)
    peak_bytes_in_flight: int = 0
    wall_time_s: float = 0.0
    rows_out: int = 0
    bytes_spilled: int = 0
    started_at_epoch: float = 0.0
    driver_peak_rss: int | None = None
    consumer: ConsumerTimer | None = None

    def to_string(self) -> str:
        lines = [
            f"Execution on backend '{self.backend}': {self.wall_time_s:.3f}s wall, "
            f"{self.rows_out} rows out",
            f"Peak bytes in flight: {fmt_bytes(self.peak_bytes_in_flight)} "
            f"(budget {fmt_bytes(self.memory_budget_bytes)})",
        ]
        if self.driver_peak_rss:
            lines.append(f"Peak memory of the driver (RSS): {fmt_bytes(self.driver_peak_rss)}")
        if self.bytes_spilled:
            lines.append(f"Spilled to disk: {fmt_bytes(self.bytes_spilled)}")
        for i, op in enumerate(self.operators, 1):
            lines.append(op.summary_line(i))
            lines.extend(f"    {line}" for line in op.detail_lines())
        consumer = self.consumer
        if consumer is not None and consumer.batches:
            lines.append(
                f"Consumer: {consumer.batches} batches; waited {fmt_seconds(consumer.blocked_s)} "
                f"for batches (first after {fmt_seconds(consumer.first_batch_s or 0.0)}), "
                f"{fmt_seconds(consumer.user_s)} in its own code between batches"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()

    def task_records(self) -> list[TaskRecord]:
        return [r for op in self.operators for r in op.task_records]

    def timeline(self, path: str) -> str:
        """Write every task of this execution to ``path`` as a Chrome trace (JSON), for
        Perfetto (ui.perfetto.dev) or chrome://tracing; returns ``path``."""
        from shardflow.engine.execution.timeline import write_chrome_trace

        return write_chrome_trace(self, path)


class DatasetStats(str):
    """What ``Dataset.stats()`` returns: the report as a string (as in Ray Data), which can
    also write the execution's timeline.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range(100).map_batches(lambda b: b)
        >>> _ = ds.take_all()
        >>> "MapBatches" in ds.stats()
        True
        >>> ds.stats().timeline("/tmp/shardflow-timeline.json")  # doctest: +SKIP
        '/tmp/shardflow-timeline.json'
    """

    _execution: ExecutionStats | None

    def __new__(cls, text: str, execution: ExecutionStats | None = None) -> DatasetStats:
        made = super().__new__(cls, text)
        made._execution = execution
        return made

    def timeline(self, path: str) -> str:
        """Write the tasks of the execution as a Chrome trace-event file at ``path``.

        Open it in https://ui.perfetto.dev or chrome://tracing: one row per worker (thread
        or process, on each node), one slice per task, named after its operator, with its
        rows, bytes and CPU time.

        Args:
            path: Where to write the JSON file (a local path).

        Returns:
            ``path``.

        Raises:
            ValueError: When the dataset has not been executed yet.
        """
        if self._execution is None:
            raise ValueError(
                "The dataset has not been executed yet, so there is no timeline: consume it "
                "first (take_all(), iter_batches(), write_*(), ...)."
            )
        return self._execution.timeline(path)
