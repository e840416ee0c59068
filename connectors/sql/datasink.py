"""SQLDatasink: writes rows with ``executemany`` through a DB-API 2 connection
(see :meth:`shardflow.Dataset.write_sql`).

Guarantees, as documented in docs/connectors.md:

* each write task inserts its rows in batches inside one transaction, committed at the end
  of the task or rolled back on any error, so a task's rows land all together or not at all;
* for a plain ``INSERT INTO table [(columns)] VALUES (...)`` the whole write is all or
  nothing: tasks insert into a staging table and the driver moves every row into the target
  in one transaction at the end (:mod:`.staging`). Other statements, and databases where
  the staging table cannot be created, get the per-task guarantee only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from shardflow.connectors.sql.dbapi import describe_query, execute, step_error, transaction
from shardflow.connectors.sql.staging import InsertStatement, parse_insert, target_of
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import Datasink, TaskCancelled, TaskContext, WriteResult

logger = logging.getLogger(__name__)

# Rows per executemany call: large enough to amortize a round trip, small enough that a
# batch's Python objects stay small.
ROWS_PER_BATCH = 1024


def _rows(block: pa.Table) -> Iterable[list[tuple[Any, ...]]]:
    for start in range(0, block.num_rows, ROWS_PER_BATCH):
        piece = block.slice(start, ROWS_PER_BATCH)
        columns = [column.to_pylist() for column in piece.columns]
        yield list(zip(*columns)) if columns else [() for _ in range(piece.num_rows)]


class SQLDatasink(Datasink[int]):
    """Writes a dataset with a DB-API 2 ``executemany`` statement. See
    :meth:`shardflow.Dataset.write_sql`.

    Args:
        sql: The statement run for every row, e.g. ``"INSERT INTO t VALUES (?, ?)"``, with
            one placeholder per column of the dataset, in the dataset's column order.
        connection_factory: A function of no arguments returning a DB-API 2 connection;
            called on the driver and once per write task.
        atomic: True: all or nothing for the whole write, through a staging table (raises
            when the statement or the database does not allow it); False: one transaction
            per write task; None (default): all or nothing where possible, else per task.
    """

    def __init__(
        self, sql: str, connection_factory: Callable[[], Any], *, atomic: bool | None = None
    ):
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError(
                f"sql must be a statement such as 'INSERT INTO t VALUES (?, ?)', got {sql!r}."
            )
        if not callable(connection_factory):
            raise TypeError(
                "connection_factory must be a function of no arguments returning a DB-API 2 "
                f"connection, got {type(connection_factory).__name__}."
            )
        if atomic is not None and not isinstance(atomic, bool):
            raise TypeError(f"atomic must be True, False or None, got {atomic!r}.")
        self.sql = sql
        self.connection_factory = connection_factory
        self.atomic = atomic
        self._insert: InsertStatement | None = parse_insert(sql)
        if atomic and self._insert is None:
            raise ValueError(
                f"atomic=True needs a plain 'INSERT INTO table [(columns)] VALUES (...)' "
                f"statement, whose rows can be staged; got {describe_query(sql)}. Pass "
                "atomic=False for one transaction per write task."
            )
        self._what = target_of(sql)
        self._staging: str | None = None
        self._task_sql = sql

    def get_name(self) -> str:
        return "SQL"

    def __repr__(self) -> str:
        return f"SQLDatasink(sql={describe_query(self.sql)}, staging={self._staging!r})"

    @property
    def staging_table(self) -> str | None:
        """The staging table of the running write, or None (per-task transactions)."""
        return self._staging

    # -- driver -----------------------------------------------------------------------------

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Create the staging table (when the write is all or nothing)."""
        self._staging, self._task_sql = None, self.sql
        if self._insert is None or self.atomic is False:
            return
        staging = self._insert.staging_name(uuid.uuid4().hex[:16])
        try:
            with transaction(self.connection_factory, self._what) as connection:
                try:
                    execute(connection.cursor(), self._insert.create_staging(staging))
                except Exception as exc:
                    raise step_error(
                        exc, self._what, f"creating the staging table {staging}"
                    ) from exc
        except Exception as exc:
            if self.atomic:
                raise
            logger.warning(
                "Writing to %s with one transaction per write task (not all or nothing): %s",
                self._what,
                exc,
            )
            return
        self._staging = staging
        self._task_sql = self._insert.into(staging)

    def on_write_complete(self, write_result: WriteResult[int]) -> None:
        """Move the staged rows into the target in one transaction, then drop the staging."""
        if self._staging is None or self._insert is None:
            return
        staging = self._staging
        try:
            with transaction(self.connection_factory, self._what) as connection:
                cursor = connection.cursor()
                try:
                    execute(cursor, self._insert.move_rows(staging))
                except Exception as exc:
                    raise step_error(
                        exc, self._what, f"moving the staged rows from {staging} (commit)"
                    ) from exc
                try:
                    execute(cursor, f"DROP TABLE {staging}")
                except Exception as exc:
                    raise step_error(exc, self._what, f"dropping {staging}") from exc
        except BaseException:
            self._drop_staging()
            raise
        self._staging = None

    def on_write_failed(self, error: Exception) -> None:
        """Drop the staging table: the target was not touched."""
        self._drop_staging()

    def _drop_staging(self) -> None:
        staging, self._staging = self._staging, None
        if staging is None:
            return
        try:
            with transaction(self.connection_factory, self._what) as connection:
                execute(connection.cursor(), f"DROP TABLE IF EXISTS {staging}")
        except Exception as exc:
            logger.warning(
                "Could not drop the staging table %s of a failed write to %s; drop it by hand: %s",
                staging,
                self._what,
                exc,
            )

    # -- write tasks ------------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> int:
        """Insert the blocks' rows in batches, in one transaction committed at the end."""
        rows = 0
        where = self._what if self._staging is None else f"{self._what} (staged in {self._staging})"
        with transaction(self.connection_factory, where) as connection:
            cursor = connection.cursor()
            for block in blocks:
                for batch in _rows(block):
                    if ctx.cancelled():
                        raise TaskCancelled(f"the write to {self._what} was cancelled")
                    try:
                        cursor.executemany(self._task_sql, batch)
                    except Exception as exc:
                        raise step_error(
                            exc, where, f"inserting rows (write task {ctx.task_idx})"
                        ) from exc
                    rows += len(batch)
        return rows
