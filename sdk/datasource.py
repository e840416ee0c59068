"""The read contract: a Datasource plans ReadTasks; each ReadTask yields blocks.

The names and signatures follow Ray Data, so a datasource written for ``ray.data`` ports
by changing its imports.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block, BlockMetadata, to_block
from shardflow.sdk.expressions import Expr
from shardflow.sdk.input_identity import DoneInputs, InputItem, InputPiece
from shardflow.sdk.pushdowns import NO_PUSHDOWNS, Pushdowns


class ReadTask:
    """A picklable unit of reading: calling it yields blocks.

    The engine plans read tasks on the driver and runs them in workers (threads, processes
    or Ray tasks), so ``read_fn`` must be picklable (cloudpickle is used) and must not rely
    on state of the driver process.

    Args:
        read_fn: Function taking no arguments that returns an iterable of blocks. Blocks may
            be given as ``pyarrow.Table``, ``pandas.DataFrame`` or dict of arrays.
        metadata: What the planner knows about the output (rows, bytes, input files).
        schema: The output schema, when known without reading.
        per_task_row_limit: When set, the task stops after this many rows.

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.sdk import BlockMetadata, ReadTask
        >>> task = ReadTask(lambda: [pa.table({"x": [1, 2, 3]})], BlockMetadata(3, 24))
        >>> [b.num_rows for b in task()]
        [3]
    """

    def __init__(
        self,
        read_fn: Callable[[], Iterable[Any]],
        metadata: BlockMetadata,
        schema: pa.Schema | None = None,
        per_task_row_limit: int | None = None,
    ):
        if not callable(read_fn):
            raise TypeError(f"read_fn must be callable, got {type(read_fn).__name__}.")
        if per_task_row_limit is not None and per_task_row_limit < 0:
            raise ValueError("per_task_row_limit must be >= 0 or None.")
        self._read_fn = read_fn
        self._metadata = metadata
        self._schema = schema
        self._per_task_row_limit = per_task_row_limit

    @property
    def metadata(self) -> BlockMetadata:
        return self._metadata

    @property
    def schema(self) -> pa.Schema | None:
        return self._schema

    @property
    def read_fn(self) -> Callable[[], Iterable[Any]]:
        return self._read_fn

    @property
    def per_task_row_limit(self) -> int | None:
        return self._per_task_row_limit

    def with_row_limit(self, limit: int | None) -> ReadTask:
        """A copy of this task that stops after ``limit`` rows (the smaller limit wins)."""
        if limit is None:
            return self
        current = self._per_task_row_limit
        new_limit = limit if current is None else min(current, limit)
        rows = self._metadata.num_rows
        metadata = BlockMetadata(
            num_rows=None if rows is None else min(rows, new_limit),
            size_bytes=self._metadata.size_bytes,
            exec_stats=self._metadata.exec_stats,
            input_files=self._metadata.input_files,
        )
        return ReadTask(self._read_fn, metadata, self._schema, new_limit)

    # -- resumable writes (see shardflow.sdk.input_identity) -------------------------------

    def input_pieces(self) -> list[InputPiece] | None:
        """What this task reads, by identity, when its ``read_fn`` can tell; else None."""
        pieces = getattr(self._read_fn, "input_pieces", None)
        return None if pieces is None else list(pieces())

    def without_done(self, done: DoneInputs) -> ReadTask | None:
        """This task less the input pieces ``done`` records: None when nothing is left.

        Raises:
            TypeError: when the task's ``read_fn`` cannot tell what it reads.
        """
        remaining = getattr(self._read_fn, "remaining", None)
        if remaining is None:
            raise TypeError(
                f"{type(self._read_fn).__name__} does not say what it reads "
                "(input_pieces/remaining), so a resumed write cannot skip its finished parts."
            )
        read_fn = remaining(done)
        if read_fn is None:
            return None
        if read_fn is self._read_fn:
            return self
        metadata = BlockMetadata(
            num_rows=None,
            size_bytes=self._metadata.size_bytes,
            input_files=self._metadata.input_files,
        )
        return ReadTask(read_fn, metadata, self._schema, self._per_task_row_limit)

    def __call__(self) -> Iterator[Block]:
        remaining = self._per_task_row_limit
        if remaining == 0:
            # Nothing to read, but the first block's empty slice still tells the schema.
            for data in self._read_fn():
                yield to_block(data).slice(0, 0)
                return
            return
        for data in self._read_fn():
            block = to_block(data)
            if remaining is not None:
                if block.num_rows >= remaining:
                    yield block.slice(0, remaining)
                    return
                remaining -= block.num_rows
            yield block

    def __repr__(self) -> str:
        return (
            f"ReadTask(num_rows={self._metadata.num_rows}, size_bytes={self._metadata.size_bytes})"
        )


class Datasource:
    """Base class for sources of data. Subclass it and implement ``get_read_tasks``.

    The engine calls these methods on the driver when the dataset is executed (never at
    construction), then runs the returned read tasks in parallel workers.

    Examples:
        >>> import pyarrow as pa
        >>> import shardflow as sf
        >>> from shardflow.sdk import BlockMetadata, Datasource, ReadTask
        >>> class Squares(Datasource):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def estimate_inmemory_data_size(self):
        ...         return self.n * 8
        ...     def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        ...         n = self.n
        ...         return [ReadTask(lambda: [pa.table({"sq": [i * i for i in range(n)]})],
        ...                          BlockMetadata(num_rows=n, size_bytes=n * 8))]
        >>> sf.read_datasource(Squares(4)).take_all()
        [{'sq': 0}, {'sq': 1}, {'sq': 4}, {'sq': 9}]
    """

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        """Plan the read as about ``parallelism`` tasks.

        Called once per execution on the driver. Must not read the data itself; it may read
        metadata (file footers, listings). The engine passes ``per_task_row_limit`` and
        ``data_context`` only when the signature accepts them.

        Args:
            parallelism: The requested number of tasks; a hint, not a requirement.
            per_task_row_limit: When set, each task may stop after this many rows.
            data_context: The DataContext of the execution.

        Returns:
            A list of read tasks; an empty list means an empty dataset.
        """
        raise NotImplementedError

    def estimate_inmemory_data_size(self) -> int | None:
        """Bytes the data will take in memory, or None when unknown."""
        return None

    def input_items(self) -> list[InputItem] | None:
        """Every input this source reads, by identity, or None (the default) when it cannot
        tell. A source that tells, and whose read tasks' ``read_fn`` implement
        ``input_pieces`` and ``remaining``, supports resumable writes (see
        :mod:`shardflow.sdk.input_identity`). Called on the driver."""
        return None

    def get_name(self) -> str:
        """A short name for progress bars and stats, e.g. ``"Parquet"``."""
        name = type(self).__name__
        return (
            name[: -len("Datasource")]
            if name.endswith("Datasource") and name != "Datasource"
            else name
        )

    def reads_hold_the_gil(self) -> bool:
        """Whether the read tasks spend most of their time in Python code that holds the GIL
        (records decoded one at a time in Python: TFRecords, Avro, tar members, images
        through Pillow).

        Called on the driver when the read is planned. The local backend runs such read
        tasks in its worker processes, as it runs Python row functions, so that they use
        every core; other reads run in threads, where Arrow and NumPy release the GIL.
        Default False.
        """
        return False

    # -- pushdowns ------------------------------------------------------------------------
    #
    # The optimizer calls apply_projection / apply_predicate (and apply_limit) on the driver
    # only when the matching supports_* method returns True. By default each returns a copy
    # of the source whose ``pushdowns`` holds the new value; a connector that opts in reads
    # ``self.pushdowns`` when it plans and runs its reads.

    _pushdowns: Pushdowns  # set on copies only; read through ``pushdowns``

    @property
    def pushdowns(self) -> Pushdowns:
        """Columns, filter and row limit pushed into this source (immutable)."""
        return self.__dict__.get("_pushdowns", NO_PUSHDOWNS)

    def with_pushdowns(self, pushdowns: Pushdowns) -> Datasource:
        """A shallow copy of this source holding ``pushdowns``.

        Override to drop caches that depend on what is read (a planned scan, say); call
        ``super().with_pushdowns(pushdowns)`` for the copy.
        """
        if not isinstance(pushdowns, Pushdowns):
            raise TypeError(f"with_pushdowns takes a Pushdowns, got {type(pushdowns).__name__}.")
        clone = copy.copy(self)
        clone._pushdowns = pushdowns
        return clone

    def effective_pushdowns(self, per_task_row_limit: int | None = None) -> Pushdowns:
        """``self.pushdowns`` with the engine's ``per_task_row_limit`` folded in (for
        ``get_read_tasks``)."""
        return self.pushdowns.with_limit(per_task_row_limit)

    # -- projection pushdown -------------------------------------------------------------

    def supports_projection_pushdown(self) -> bool:
        """Whether the source can read only some columns (and rename them)."""
        return False

    def get_projection_map(self) -> dict[str, str] | None:
        """The current projection as ``{source column: output name}``; None means all columns."""
        return self.pushdowns.projection_map()

    def apply_projection(self, projection_map: dict[str, str] | None) -> Datasource:
        """Return a copy of this source that reads only the keys of ``projection_map``,
        renamed to its values. Called on the driver by the optimizer."""
        return self.with_pushdowns(self.pushdowns.with_projection(projection_map))

    # -- predicate pushdown --------------------------------------------------------------

    def supports_predicate_pushdown(self) -> bool:
        """Whether the source can skip rows that fail a predicate (an engine expression)."""
        return False

    def get_current_predicate(self) -> Expr | None:
        """The predicate already pushed into this source, or None."""
        return self.pushdowns.filter

    def apply_predicate(self, predicate_expr: Expr) -> Datasource:
        """Return a copy of this source that also applies ``predicate_expr`` (AND-ed with the
        current one). Called on the driver by the optimizer."""
        if not isinstance(predicate_expr, Expr):
            raise TypeError(
                f"apply_predicate needs an engine expression, got {type(predicate_expr).__name__}."
            )
        return self.with_pushdowns(self.pushdowns.with_filter(predicate_expr))

    def is_predicate_pushdown_exact(self) -> bool:
        """Whether rows read after ``apply_predicate`` satisfy the predicate exactly.

        When False (the default) the engine filters again after reading, so a source that only
        prunes (by row group statistics, say) is still correct.
        """
        return False

    # -- limit pushdown ------------------------------------------------------------------

    def apply_limit(self, limit: int) -> Datasource:
        """Return a copy of this source whose read tasks each stop after ``limit`` rows.

        The engine may instead pass ``per_task_row_limit`` to ``get_read_tasks``;
        :meth:`effective_pushdowns` combines both.
        """
        return self.with_pushdowns(self.pushdowns.with_limit(limit))
