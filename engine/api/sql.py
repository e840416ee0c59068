"""SQL databases: :func:`read_sql` and :meth:`Dataset.write_sql`.

The connector lives in :mod:`shardflow.connectors.sql` and works with any DB-API 2
(PEP 249) driver: the user's connection factory imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # engine.dataset mixes in SQLWriteMixin, so it is imported lazily here
    from shardflow.engine.api.dataset import Dataset


def read_sql(
    sql: str,
    connection_factory: Callable[[], Any],
    *,
    sql_params: Any = None,
    shard_keys: list[str] | None = None,
    shard_hash_fn: str = "MD5",
    parallelism: int = -1,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
) -> Dataset:
    """Create a Dataset from the rows of a query, through a DB-API 2 (PEP 249) connection.

    Without ``shard_keys`` the query runs in one read task. With them, the read is split
    into parallel tasks, each running the query with a condition that keeps the rows whose
    hashed keys fall in its shard (``MOD(ABS(hash(keys)), n) = i``; every row lands in
    exactly one shard, rows with NULL keys included). Each task streams its rows with
    ``fetchmany`` (on PostgreSQL through a server-side cursor), so a big result never sits
    whole in memory, and turns them into Arrow blocks of a few MiB.

    Column types come from the cursor's description where the driver gives them
    (PostgreSQL: integers, floats, ``numeric(p, s)`` as ``decimal128(p, s)`` (unconstrained
    ``numeric`` as ``decimal128(38, 18)``), ``timestamp with time zone`` as UTC timestamps,
    ``bytea`` as binary, ``json``/``jsonb`` as their text, arrays as lists, ``uuid`` and
    other types as strings); otherwise (sqlite3) from the first non-null values of each
    column.

    Differences from Ray Data 2.60: rows whose shard keys are NULL are read (Ray Data's
    shard condition drops them); the default ``shard_hash_fn="MD5"`` shards PostgreSQL
    (with ``hashtextextended``) and SQLite (with a function registered on the connection)
    instead of falling back to one task; read tasks do not claim row counts they do not
    know; typed columns as above (Ray Data infers types from each block's values); the
    Ray-only task arguments (``num_cpus``, ``ray_remote_args``, ...) are not taken.

    Examples:
        >>> import os, sqlite3, tempfile
        >>> import shardflow as sf
        >>> path = os.path.join(tempfile.mkdtemp(), "movies.db")
        >>> with sqlite3.connect(path) as connection:
        ...     _ = connection.execute("CREATE TABLE movie(title TEXT, year INT, score REAL)")
        ...     _ = connection.executemany("INSERT INTO movie VALUES (?, ?, ?)",
        ...         [("Grail", 1975, 8.2), ("Brian", 1979, 8.0), ("Rocky II", 1979, 7.3)])
        >>> ds = sf.read_sql("SELECT title, score FROM movie WHERE year = 1979",
        ...                  lambda: sqlite3.connect(path))
        >>> ds.sort("title").take_all()
        [{'title': 'Brian', 'score': 8.0}, {'title': 'Rocky II', 'score': 7.3}]
        >>> sf.read_sql("SELECT * FROM movie", lambda: sqlite3.connect(path),
        ...             shard_keys=["title"], override_num_blocks=2).count()
        3

    Args:
        sql: The query to run.
        connection_factory: A function of no arguments returning a DB-API 2 connection
            (``lambda: psycopg.connect(conninfo)``). It is called in every read task, so
            when tasks run in other processes it must be picklable (cloudpickle is used).
        sql_params: Parameters bound to the query, in the driver's placeholder style.
        shard_keys: Columns of the result to split the read by.
        shard_hash_fn: The SQL hash function applied to the shard keys. ``"MD5"`` (the
            default) uses each database's own way on PostgreSQL and SQLite; another name is
            used as written.
        parallelism: Deprecated spelling of ``override_num_blocks`` (as in Ray Data).
        concurrency: The most read tasks running at once.
        override_num_blocks: Number of shards (read tasks) when ``shard_keys`` are given; at
            most one task per 50 rows.

    Returns:
        A lazy Dataset; nothing is read until it is consumed.

    Raises:
        ValueError: ``override_num_blocks > 1`` without ``shard_keys``, or a database that
            cannot evaluate the shard condition.
    """
    from shardflow.connectors.sql import SQLDatasource
    from shardflow.engine.api.create import read_datasource

    datasource = SQLDatasource(
        sql,
        connection_factory,
        shard_hash_fn=shard_hash_fn,
        shard_keys=shard_keys,
        sql_params=sql_params,
    )
    if override_num_blocks is not None and override_num_blocks > 1:
        if shard_keys is None:
            raise ValueError("shard_keys must be provided when override_num_blocks > 1")
        if not datasource.supports_sharding(override_num_blocks):
            raise ValueError(
                "Database does not support sharding. Please set override_num_blocks to 1."
            )
    return read_datasource(
        datasource,
        parallelism=parallelism,
        concurrency=concurrency,
        override_num_blocks=override_num_blocks,
    )


class SQLWriteMixin:
    """``Dataset.write_sql``."""

    def write_sql(
        self,
        sql: str,
        connection_factory: Callable[[], Any],
        ray_remote_args: dict[str, Any] | None = None,
        concurrency: int | None = None,
        *,
        atomic: bool | None = None,
    ) -> None:
        """Write the dataset's rows with a DB-API 2 statement, run through ``executemany``.

        Each write task inserts its rows in batches in one transaction, committed when the
        task ends and rolled back when it fails. For a plain
        ``INSERT INTO table [(columns)] VALUES (...)`` the whole write is all or nothing:
        tasks insert into a staging table (``shardflow_staging_<id>``, created empty with the
        target's columns when the write starts), and when every task has succeeded the rows
        are moved into the target with one ``INSERT ... SELECT`` in one transaction and the
        staging table is dropped; a failed write drops it and leaves the target as it was.
        Constraints of the target (keys, ``NOT NULL``, checks) are then checked at that last
        step. Other statements (``ON CONFLICT``, ``RETURNING``, ``UPDATE``, ...) and
        databases where the staging table cannot be created get the per-task guarantee
        only: rows of tasks that finished stay when another task fails.

        Errors name the table and the step that failed (connecting, inserting rows,
        moving the staged rows, ...), with the driver's exception type where it takes a
        message (``sqlite3.IntegrityError``, ``psycopg.errors.UniqueViolation``, ...);
        connection strings and passwords never appear in them.

        Differences from Ray Data 2.60: Ray Data commits each task's rows on its own (no
        staging), in batches of 128 rows; ``atomic`` is added; ``ray_remote_args`` is
        accepted and ignored on the local backend; ``concurrency`` is not applied.

        Examples:
            >>> import os, sqlite3, tempfile
            >>> import shardflow as sf
            >>> path = os.path.join(tempfile.mkdtemp(), "movies.db")
            >>> with sqlite3.connect(path) as connection:
            ...     _ = connection.execute("CREATE TABLE movie(title TEXT, year INT)")
            >>> sf.from_items([{"title": "Grail", "year": 1975}, {"title": "Brian", "year": 1979}]
            ...     ).write_sql("INSERT INTO movie VALUES (?, ?)", lambda: sqlite3.connect(path))
            >>> sqlite3.connect(path).execute("SELECT * FROM movie ORDER BY year").fetchall()
            [('Grail', 1975), ('Brian', 1979)]

        Args:
            sql: The statement, with one placeholder per column of the dataset in the
                dataset's column order (``?`` for sqlite3, ``%s`` for psycopg).
            connection_factory: A function of no arguments returning a DB-API 2 connection;
                called on the driver and in every write task.
            ray_remote_args: Ray's arguments of the write tasks (accepted for compatibility).
            concurrency: The most write tasks at once (accepted for compatibility).
            atomic: None (default): all or nothing where the statement and the database
                allow it, else one transaction per task; True: all or nothing, or raise;
                False: one transaction per task, no staging table.
        """
        from shardflow.connectors.sql import SQLDatasink

        if ray_remote_args is not None and not isinstance(ray_remote_args, dict):
            raise TypeError("ray_remote_args must be a dict of ray.remote arguments.")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}.")
        self.write_datasink(SQLDatasink(sql, connection_factory, atomic=atomic))
