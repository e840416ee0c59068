"""The timeline of an execution as a Chrome trace-event file.

The format is the JSON object form of the Trace Event Format (``{"traceEvents": [...]}``)
that Perfetto (ui.perfetto.dev) and chrome://tracing open: one complete event (``"ph": "X"``)
per task, with its start and duration in microseconds since the execution started, on the
"process" of its worker process (``pid``) and the "thread" that ran it (``tid``); metadata
events (``"ph": "M"``) name them. Each task's ``args`` hold its operator, index, rows, bytes
and CPU time.
"""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

from shardflow.engine.execution.stats import ExecutionStats, TaskRecord
from shardflow.engine.execution.task_timing import host


def trace_events(stats: ExecutionStats) -> list[dict[str, Any]]:
    """The trace events of every task of ``stats``, and the names of their workers."""
    records = stats.task_records()
    origin = min([r.start for r in records] + [stats.started_at_epoch or float("inf")])
    if origin == float("inf"):
        origin = 0.0
    events: list[dict[str, Any]] = []
    processes: dict[int, str] = {}
    threads: dict[tuple[int, int], str] = {}
    for record in records:
        pid, tid = _ids(record)
        processes.setdefault(pid, _process_name(record))
        threads.setdefault((pid, tid), record.worker or f"thread {tid}")
        events.append(
            {
                "name": record.operator + (f" [{record.phase}]" if record.phase else ""),
                "cat": record.phase or "task",
                "ph": "X",
                "ts": round((record.start - origin) * 1e6, 3),
                "dur": round(record.wall_s * 1e6, 3),
                "pid": pid,
                "tid": tid,
                "args": _args(record),
            }
        )
    for pid, name in processes.items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
    for (pid, tid), name in threads.items():
        events.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )
    return events


def write_chrome_trace(stats: ExecutionStats, path: str) -> str:
    """Write the trace of ``stats`` to ``path`` (JSON); returns ``path``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"timeline: path must be a str or os.PathLike, got {type(path).__name__}.")
    document = {
        "traceEvents": trace_events(stats),
        "displayTimeUnit": "ms",
        "otherData": {
            "backend": stats.backend,
            "wall_time_s": round(stats.wall_time_s, 6),
            "rows_out": stats.rows_out,
            "operators": [op.name for op in stats.operators],
        },
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)
    return str(path)


def _ids(record: TaskRecord) -> tuple[int, int]:
    """Integer process and thread ids (trace viewers need integers); the same pid on another
    node gets a row of its own."""
    pid = record.pid if record.pid is not None else 0
    if record.node and record.node != host():
        pid += (zlib.crc32(record.node.encode()) % 1000 + 1) * 10_000_000
    tid = record.thread % (2**31) if record.thread else 0
    return pid, tid


def _process_name(record: TaskRecord) -> str:
    where = f" on {record.node}" if record.node else ""
    return f"pid {record.pid}{where}" if record.pid is not None else "driver"


def _args(record: TaskRecord) -> dict[str, Any]:
    args: dict[str, Any] = {
        "operator": record.operator,
        "task": record.index,
        "rows": record.rows,
        "bytes": record.bytes,
    }
    if record.cpu_s is not None:
        args["cpu_ms"] = round(record.cpu_s * 1e3, 3)
    if record.peak_rss is not None:
        args["worker_peak_rss_bytes"] = record.peak_rss
    if record.attempt:
        args["attempt"] = record.attempt
    return args
