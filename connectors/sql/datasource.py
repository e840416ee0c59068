"""SQLDatasource: reads the result of a query through a DB-API 2 connection
(see :func:`shardflow.read_sql`)."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.sql import sharding
from shardflow.connectors.sql.arrow_types import (
    JSON_TYPE_NAMES,
    converters_for,
    empty_table,
    rows_to_table,
)
from shardflow.connectors.sql.dbapi import (
    POSTGRES,
    close_quietly,
    describe_query,
    dialect_of,
    execute,
    open_connection,
    rollback_quietly,
    step_error,
    transaction,
)
from shardflow.connectors.sql.postgres_copy import copy_blocks, copy_columns
from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask

logger = logging.getLogger(__name__)

# Rows of the first fetch of a task; later fetches aim at blocks of _TARGET_BLOCK_BYTES.
_FIRST_FETCH_ROWS = 4096
_MAX_FETCH_ROWS = 262_144
_TARGET_BLOCK_BYTES = 8 * 1024 * 1024


def _cursor(connection: Any, dialect: str) -> Any:
    """A cursor that streams: PostgreSQL's client-side cursors hold the whole result in
    memory after ``execute``, so a server-side (named) cursor is used there."""
    if dialect == POSTGRES:
        cursor = connection.cursor(name=f"shardflow_{uuid.uuid4().hex[:16]}")
        _text_json(cursor)
        return cursor
    return connection.cursor()


def _text_json(cursor: Any) -> None:
    """psycopg 3 parses JSON into Python objects: keep the server's text instead."""
    adapters = getattr(cursor, "adapters", None)
    if adapters is None:
        return
    try:
        from psycopg.types.string import TextLoader
    except ImportError:
        return
    for name in JSON_TYPE_NAMES:
        adapters.register_loader(name, TextLoader)


class SQLReadTask:
    """The picklable body of one read task: run one query, stream its rows as blocks."""

    def __init__(self, connection_factory: Callable[[], Any], query: Any, params: Any, what: str):
        self.connection_factory = connection_factory
        self.query = query  # a str, or a function of the dialect giving one
        self.params = params
        self.what = what

    def __repr__(self) -> str:
        return f"SQLReadTask({self.what})"

    def __call__(self) -> Iterator[Block]:
        connection = open_connection(self.connection_factory, self.what)
        try:
            dialect = dialect_of(connection)
            sharding.prepare_connection(connection, dialect)
            query = self.query(dialect) if callable(self.query) else self.query
            streams = True
            if dialect == POSTGRES and hasattr(connection, "pipeline"):  # psycopg 3, not 2
                streams, blocks = self._copy(connection, query)
                if blocks is not None:
                    yield from blocks
                    return
            try:
                cursor = _cursor(connection, dialect) if streams else connection.cursor()
                execute(cursor, query, self.params)
            except Exception as exc:
                raise step_error(exc, self.what, "executing the query") from exc
            yield from self._blocks(cursor, dialect)
            try:
                cursor.close()
            except Exception:
                pass
        finally:
            # A read changes nothing: end the transaction without committing (this also
            # ends it when the consumer stopped early, a limit say).
            rollback_quietly(connection)
            close_quietly(connection)

    def _copy(self, connection: Any, query: str) -> tuple[bool, Iterator[Block] | None]:
        """The rows through COPY when every column's text parses exactly, else None; and
        whether the statement can be a subquery (of COPY, or of a server-side cursor)."""
        inner = sharding.strip_semicolon(query)
        try:
            cursor = connection.cursor()
            _text_json(cursor)
            execute(cursor, f"SELECT * FROM ({inner}) AS shardflow_describe LIMIT 0", self.params)
            description = cursor.description
            cursor.close()
        except Exception:
            # Not a query that can be a subquery (SHOW, EXPLAIN, ...): a client-side cursor
            # runs it as written (such results are small), and reports its errors.
            rollback_quietly(connection)
            return False, None
        columns = copy_columns(description) if description else None
        if columns is None:
            return True, None
        return True, self._copied(connection, inner, columns)

    def _copied(self, connection: Any, query: str, columns: list) -> Iterator[Block]:
        produced = False
        try:
            for block in copy_blocks(connection, query, self.params, columns):
                produced = True
                yield block
        except GeneratorExit:
            raise
        except Exception as exc:
            raise step_error(exc, self.what, "copying rows (COPY ... TO STDOUT)") from exc
        if not produced:
            yield pa.schema([pa.field(n, t) for n, t, _ in columns]).empty_table()

    def _blocks(self, cursor: Any, dialect: str) -> Iterator[Block]:
        description = cursor.description
        if description is None:
            raise ValueError(
                f"{self.what}: the statement returned no result set; read_sql needs a query "
                "that returns rows (SELECT ...)."
            )
        names = [str(d[0]) for d in description]
        converters = converters_for(description, dialect)
        size, produced = _FIRST_FETCH_ROWS, False
        while True:
            try:
                rows = cursor.fetchmany(size)
            except Exception as exc:
                raise step_error(exc, self.what, "fetching rows") from exc
            if not rows:
                break
            try:
                block = rows_to_table(rows, names, converters)
            except Exception as exc:
                raise step_error(exc, self.what, "converting rows to Arrow") from exc
            produced = True
            yield block
            per_row = max(1, block.nbytes // max(1, block.num_rows))
            size = max(_FIRST_FETCH_ROWS, min(_MAX_FETCH_ROWS, _TARGET_BLOCK_BYTES // per_row))
        if not produced:
            yield empty_table(names, converters)


class SQLDatasource(Datasource):
    """Reads the rows of a query through a DB-API 2 connection. See :func:`shardflow.read_sql`.

    Args:
        sql: The query.
        connection_factory: A function of no arguments returning a DB-API 2 connection; it
            is called once per read task (in the task's worker), so it must be picklable
            when tasks run in other processes (a module-level function or a
            ``functools.partial``).
        shard_hash_fn: Name of the SQL hash function applied to the shard keys.
        shard_keys: Columns of the result to split the read by; None reads in one task.
        sql_params: Parameters bound to the query, in the driver's placeholder style.
    """

    MIN_ROWS_PER_READ_TASK = 50

    def __init__(
        self,
        sql: str,
        connection_factory: Callable[[], Any],
        shard_hash_fn: str = sharding.DEFAULT_HASH_FN,
        shard_keys: list[str] | None = None,
        sql_params: Any = None,
    ):
        if not isinstance(sql, str) or not sql.strip():
            raise ValueError(f"sql must be a query string such as 'SELECT * FROM t', got {sql!r}.")
        if not callable(connection_factory):
            raise TypeError(
                "connection_factory must be a function of no arguments returning a DB-API 2 "
                f"connection (e.g. lambda: sqlite3.connect('db.sqlite')), got "
                f"{type(connection_factory).__name__}."
            )
        self.sql = sql
        self.connection_factory = connection_factory
        self.shard_keys = sharding.check_shard_keys(shard_keys)
        self.shard_hash_fn = sharding.check_hash_fn(shard_hash_fn)
        self.sql_params = sql_params
        self._what = f"SQL query {describe_query(sql)}"

    def get_name(self) -> str:
        return "SQL"

    def __repr__(self) -> str:
        # Never the factory (a partial of a connection string) nor the parameters.
        return f"SQLDatasource(sql={describe_query(self.sql)}, shard_keys={self.shard_keys})"

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def _shard_plan(self, parallelism: int) -> int | None:
        """Rows of the result when the database evaluates the shard predicate, else None."""
        keys, fn = self.shard_keys or [], self.shard_hash_fn
        with transaction(self.connection_factory, self._what) as connection:
            dialect = dialect_of(connection)
            sharding.prepare_connection(connection, dialect)
            cursor = connection.cursor()
            predicate = sharding.shard_predicate(keys, fn, dialect, 0, parallelism)
            try:
                execute(
                    cursor,
                    sharding.count_query(sharding.sharded_query(self.sql, predicate)),
                    self.sql_params,
                )
                cursor.fetchone()
            except Exception as exc:
                logger.info("The database cannot shard %s: %s", self._what, exc)
                return None
            try:
                execute(cursor, sharding.count_query(self.sql), self.sql_params)
                return int(cursor.fetchone()[0])
            except Exception as exc:
                raise step_error(exc, self._what, "counting rows to plan shards") from exc

    def supports_sharding(self, parallelism: int) -> bool:
        """Whether the read can run as ``parallelism`` shards (shard keys are given and the
        database evaluates the shard predicate)."""
        if parallelism <= 1 or self.shard_keys is None:
            return False
        return self._shard_plan(parallelism) is not None

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        limit = self.effective_pushdowns(per_task_row_limit).limit
        num_shards = 1
        if self.shard_keys is not None and parallelism > 1:
            rows = self._shard_plan(parallelism)
            if rows == 0:
                return []
            if rows is None:
                logger.info("Reading %s in one task: the database cannot shard it.", self._what)
            else:
                wanted = math.ceil(rows / self.MIN_ROWS_PER_READ_TASK)
                num_shards = max(1, min(parallelism, wanted))
        metadata = BlockMetadata(num_rows=None, size_bytes=None)
        if num_shards == 1:
            task = SQLReadTask(self.connection_factory, self.sql, self.sql_params, self._what)
            return [ReadTask(task, metadata, per_task_row_limit=limit)]
        tasks = []
        for shard in range(num_shards):
            keys = self.shard_keys or []
            query = _ShardQuery(self.sql, keys, self.shard_hash_fn, shard, num_shards)
            what = f"{self._what} (shard {shard + 1} of {num_shards})"
            task = SQLReadTask(self.connection_factory, query, self.sql_params, what)
            tasks.append(ReadTask(task, metadata, per_task_row_limit=limit))
        return tasks


class _ShardQuery:
    """The query of one shard, made when the task knows its connection's dialect."""

    def __init__(self, sql: str, keys: list[str], hash_fn: str, shard: int, num_shards: int):
        self.sql, self.keys, self.hash_fn = sql, keys, hash_fn
        self.shard, self.num_shards = shard, num_shards

    def __call__(self, dialect: str) -> str:
        predicate = sharding.shard_predicate(
            self.keys, self.hash_fn, dialect, self.shard, self.num_shards
        )
        return sharding.sharded_query(self.sql, predicate)
