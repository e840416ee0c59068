"""The write contract: a Datasink writes blocks in parallel tasks and commits on the driver.

The engine calls, in order:

1. ``on_write_start(schema)`` once on the driver, before any write task runs;
2. ``write(blocks, ctx)`` in parallel workers, once per write task, each returning a small
   picklable value (paths staged, rows written);
3. ``on_write_complete(WriteResult(...))`` once on the driver when every write task
   succeeded: this is the commit, the moment output becomes visible;
4. or, when any write task fails, ``on_write_failed(error)`` once on the driver, and never
   ``on_write_complete``: the sink removes what it staged so the destination is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa

from shardflow.sdk.block import Block

WriteReturnType = TypeVar("WriteReturnType")


def _never() -> bool:
    return False


@dataclass
class TaskContext:
    """What a write task knows about itself.

    Args:
        task_idx: Index of the task among the write tasks of this write, from 0.
        op_name: Name of the operator running the task.
        write_uuid: An id unique to this write, shared by all its tasks.
        cancelled: Returns True once the task should stop (the write failed elsewhere or the
            user stopped it). A long ``write`` should check it between files and stop
            writing; the engine checks it before each block it hands to ``write``.
        input_pieces: In a resumable write, what the task reads, by identity (a list of
            :class:`~shardflow.sdk.input_identity.InputPiece`): the sink records it with the
            files it staged. None otherwise.
    """

    task_idx: int
    op_name: str = "Write"
    write_uuid: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    cancelled: Callable[[], bool] = field(default=_never, repr=False, compare=False)
    input_pieces: list[Any] | None = field(default=None, repr=False, compare=False)


class TaskCancelled(Exception):
    """Raised inside a task that stopped because ``TaskContext.cancelled()`` became true."""


@dataclass
class WriteResult(Generic[WriteReturnType]):
    """The outcome of all write tasks, given to ``Datasink.on_write_complete``.

    Args:
        num_rows: Rows written by all tasks.
        size_bytes: In-memory bytes of the blocks written.
        write_returns: What each ``write`` call returned, in task order.
    """

    num_rows: int
    size_bytes: int
    write_returns: list[WriteReturnType]


class Datasink(Generic[WriteReturnType]):
    """Base class for destinations. Subclass it and implement ``write``.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.sdk import Datasink
        >>> class CountingSink(Datasink):
        ...     def write(self, blocks, ctx):
        ...         return sum(b.num_rows for b in blocks)
        ...     def on_write_complete(self, write_result):
        ...         self.total = sum(write_result.write_returns)
        >>> sink = CountingSink()
        >>> sf.range(10).write_datasink(sink)
        >>> sink.total
        10
    """

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Called once on the driver before any write task; may create or check the target."""

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> WriteReturnType:
        """Write blocks; runs in a worker, in parallel with other write tasks.

        Returns:
            A small picklable value passed back to ``on_write_complete``.
        """
        raise NotImplementedError

    def on_write_complete(self, write_result: WriteResult[WriteReturnType]) -> None:
        """Called once on the driver after every write task succeeded: commit here."""

    def on_write_failed(self, error: Exception) -> None:
        """Called once on the driver when any write task failed: undo what was staged."""

    def get_name(self) -> str:
        """A short name for progress bars and stats."""
        name = type(self).__name__
        return (
            name[: -len("Datasink")] if name.endswith("Datasink") and name != "Datasink" else name
        )

    @property
    def supports_distributed_writes(self) -> bool:
        """False when ``write`` must run on the driver process (e.g. a local-only client)."""
        return True

    @property
    def min_rows_per_write(self) -> int | None:
        """When set, the engine groups blocks so each write task gets at least this many rows."""
        return None


def summarize_writes(returns: list[Any], num_rows: int, size_bytes: int) -> WriteResult[list[Any]]:
    """Build the WriteResult handed to ``on_write_complete``."""
    return WriteResult(num_rows=num_rows, size_bytes=size_bytes, write_returns=list(returns))
