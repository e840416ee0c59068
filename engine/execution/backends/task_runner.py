"""The loop every backend runs for one task: gate, produce, report."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from shardflow.engine.execution import task_timing
from shardflow.engine.execution.errors import TaskFailure
from shardflow.sdk import task_stats
from shardflow.sdk.block import Block, BlockMetadata

BLOCK, DONE, ERROR = "block", "done", "error"


def drive_task(spec: Any, blocks: Iterator[Block], store: Callable[[Block], Any]) -> None:
    """Pull blocks from ``blocks`` one at a time, each after the gate allows, and post events.

    ``store`` turns a produced block into the reference handed to the executor.
    """
    task_stats.reset()
    begun = task_timing.begin()
    try:
        while True:
            if not spec.gate.acquire():
                _close(blocks)
                break
            try:
                block = next(blocks)
            except StopIteration:
                spec.gate.unused()
                break
            spec.gate.produced(block.nbytes)
            spec.events.put((BLOCK, spec.task_id, store(block), BlockMetadata.of(block)))
        counters: dict[str, Any] = dict(task_stats.take())
        counters["timing"] = task_timing.finish(begun)
        spec.events.put((DONE, spec.task_id, counters, None))
    except BaseException as exc:  # reported to the driver, never swallowed
        spec.gate.unused()
        spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))


def _close(blocks: Iterator[Block]) -> None:
    close = getattr(blocks, "close", None)
    if close is not None:
        close()
