"""Execution statistics: per operator wall time, rows and bytes out, tasks, memory."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


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

    def to_string(self) -> str:
        lines = [
            f"Execution on backend '{self.backend}': {self.wall_time_s:.3f}s wall, "
            f"{self.rows_out} rows out",
            f"Peak bytes in flight: {_fmt_bytes(self.peak_bytes_in_flight)} "
            f"(budget {_fmt_bytes(self.memory_budget_bytes)})",
        ]
        if self.bytes_spilled:
            lines.append(f"Spilled to disk: {_fmt_bytes(self.bytes_spilled)}")
        for i, op in enumerate(self.operators, 1):
            line = (
                f"Operator {i} {op.name}: {op.tasks} tasks, {op.wall_time_s:.3f}s wall, "
                f"{op.task_time_s:.3f}s in tasks, {op.rows_out} rows out, "
                f"{_fmt_bytes(op.bytes_out)} out, peak queued {_fmt_bytes(op.peak_queued_bytes)}"
            )
            if op.bytes_spilled:
                line += f", {_fmt_bytes(op.bytes_spilled)} spilled"
            if op.tasks_retried:
                line += f", {op.tasks_retried} tasks retried"
            if op.errored_blocks:
                line += f", {op.errored_blocks} failed blocks skipped"
            if op.skipped_files:
                line += f", {op.skipped_files} bad files skipped"
            if op.actors_started:
                line += f", {op.actors_started} actors started (at most {op.peak_actors} at once)"
            if len(op.tasks_per_node) > 1:
                line += f", tasks on {len(op.tasks_per_node)} nodes"
            read = op.local_input_bytes + op.remote_input_bytes
            if read:
                line += f", {100 * op.local_input_bytes / read:.0f}% of input bytes node-local"
            lines.append(line)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()
