"""Delta Lake tables: :func:`read_delta` and :meth:`Dataset.write_delta`.

The connector lives in :mod:`shardflow.connectors.delta` and needs deltalake
(``pip install 'shardflow[delta]'``), imported only when a table is read or written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # engine.dataset mixes in DeltaWriteMixin, so it is imported lazily here
    from shardflow.engine.api.dataset import Dataset


def read_delta(
    path: str,
    version: int | None = None,
    *,
    storage_options: dict[str, str] | None = None,
    columns: list[str] | None = None,
    filter: Any = None,
    parallelism: int = -1,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    catalog: Any = None,
) -> Dataset:
    """Create a Dataset from a Delta Lake table.

    The table's log is read on the driver through deltalake, at ``version`` when given (time
    travel). Each data file becomes a Parquet fragment carrying its partition values and
    column statistics: ``filter`` (and ``Dataset.filter(expr=...)`` right after the read)
    skips the files that cannot hold matching rows (partition pruning, statistics) and is
    applied exactly to the rows read, and ``columns`` (and ``select_columns``) reads only
    those columns' chunks. Read tasks get files balanced by size; ``count()`` is answered
    from the log when no filter applies.

    Differences from Ray Data 2.60: ``filter`` is added; ``filesystem``, a catalog's
    filesystem (its ``storage_options`` are used), ``shuffle``, ``include_paths``, the
    Ray-only task arguments and ``**arrow_parquet_args`` are not taken (local tables are
    read through Arrow's local filesystem, others through deltalake's object store
    configured by ``storage_options``).

    Examples:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> import shardflow as sf
        >>> from deltalake import write_deltalake
        >>> path = tempfile.mkdtemp() + "/events"
        >>> write_deltalake(path, pa.table({"id": [1, 2, 3], "day": ["mon", "mon", "tue"]}),
        ...                 partition_by=["day"])
        >>> write_deltalake(path, pa.table({"id": [4], "day": ["tue"]}), mode="append")
        >>> sf.read_delta(path, filter=sf.col("day") == "tue").sort("id").take_all()
        [{'id': 3, 'day': 'tue'}, {'id': 4, 'day': 'tue'}]
        >>> sf.read_delta(path, version=0, columns=["id"]).count()
        3

    Args:
        path: The table's folder, or a URI (``s3://bucket/table``, ``gs://...``, ...).
            One table only.
        version: The version to read; the latest by default.
        storage_options: deltalake's object store options: credentials, region,
            ``AWS_ENDPOINT_URL`` for an S3-compatible server, ...
        columns: Columns to read; all by default.
        filter: Rows to read: a shardflow expression (``sf.col("day") == "tue"``) or a
            ``pyarrow.compute.Expression``.
        parallelism: Deprecated spelling of ``override_num_blocks`` (as in Ray Data).
        concurrency: The most read tasks running at once.
        override_num_blocks: Number of read tasks; by default from the data size, at most
            one per data file.
        catalog: A :class:`~shardflow.Catalog`: ``path`` is then a table's name, which the
            catalog resolves to a path and object-store options (merged under
            ``storage_options``, which win).

    Returns:
        A lazy Dataset; nothing is read until it is consumed.
    """
    from shardflow.connectors.delta import DeltaDatasource
    from shardflow.engine.api.create import read_datasource

    if not isinstance(path, str):
        raise ValueError("Only a single Delta Lake table path is supported.")
    if catalog is not None:
        from shardflow.sdk.catalog import ReaderFormat, resolve_for

        resolved = resolve_for(catalog, path, ReaderFormat.DELTA, "read_delta")
        if resolved.path is None:
            raise ValueError(
                f"read_delta: the catalog resolved {path!r} to no path; its resolve() must "
                "set ResolvedSource.path for Delta tables."
            )
        if resolved.filesystem is not None and not resolved.storage_options:
            raise ValueError(
                f"read_delta: the catalog resolved {path!r} to a filesystem only; shardflow "
                "reads Delta tables through deltalake's object store, so the catalog must "
                "give storage_options (credentials, region, endpoint) instead."
            )
        path = resolved.path
        if resolved.storage_options:
            storage_options = {**resolved.storage_options, **(storage_options or {})}
    datasource = DeltaDatasource(
        path, version, columns=columns, filter=filter, storage_options=storage_options
    )
    return read_datasource(
        datasource,
        parallelism=parallelism,
        concurrency=concurrency,
        override_num_blocks=override_num_blocks,
    )


class DeltaWriteMixin:
    """``Dataset.write_delta``."""

    def write_delta(
        self,
        path: str,
        *,
        mode: Any = "append",
        partition_by: list[str] | None = None,
        storage_options: dict[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        partition_cols: list[str] | None = None,
        ray_remote_args: dict[str, Any] | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Write the dataset into a Delta Lake table, in one Delta transaction.

        Write tasks write Parquet data files under the table's folder in parallel (one
        hive-style folder per partition); the driver then commits all of them in one
        transaction through deltalake, creating the table when it does not exist. Readers see
        all of the write or none of it: when a task or the commit fails, every file of the
        write is deleted and the table is as it was.

        ``mode="append"`` adds the rows; the dataset's columns must be columns of the table,
        with its types or narrower ones (``int32`` into ``long``, ``float32`` into
        ``double``); nullable columns it lacks are written as nulls. ``mode="overwrite"``
        replaces the table's rows, and its schema with the dataset's. Anything else raises an
        error naming the column before a file is written.

        Differences from Ray Data 2.60: ``schema_mode="merge"`` (adding new columns on
        append, in a commit of its own) is not done: a write is exactly one commit, so a new
        column raises (overwrite, or alter the table first); ``partition_cols`` is also
        taken, as deltalake's older name of ``partition_by``; ``filesystem`` and ``catalog``
        are not taken; ``ray_remote_args`` and ``concurrency`` are accepted and not applied.

        Examples:
            >>> import tempfile
            >>> import shardflow as sf
            >>> from deltalake import DeltaTable
            >>> path = tempfile.mkdtemp() + "/scores"
            >>> ds = sf.range(6).map_batches(lambda b: {"id": b["id"], "even": b["id"] % 2 == 0})
            >>> ds.write_delta(path, partition_by=["even"])
            >>> sf.range(2).map_batches(lambda b: {"id": b["id"] + 6, "even": b["id"] < 0}
            ...     ).write_delta(path)
            >>> DeltaTable(path).version(), sf.read_delta(path).count()
            (1, 8)
            >>> ds.limit(1).write_delta(path, mode="overwrite")
            >>> sf.read_delta(path).take_all()
            [{'id': 0, 'even': True}]

        Args:
            path: The table's folder or URI (``s3://bucket/table``, ...).
            mode: ``"append"`` (default) or ``"overwrite"`` (or a ``SaveMode``).
            partition_by: Columns to partition a new table by; an existing table keeps its
                own (giving others raises).
            storage_options: deltalake's object store options (credentials, endpoint, ...).
            name: The table's name, recorded when the write creates it.
            description: The table's description, recorded when the write creates it.
            partition_cols: Another name of ``partition_by``.
            ray_remote_args: Ray's arguments of the write tasks (accepted for compatibility).
            concurrency: The most write tasks at once (accepted for compatibility).
        """
        from shardflow.connectors.delta import DeltaDatasink

        if partition_cols is not None:
            if partition_by is not None and list(partition_by) != list(partition_cols):
                raise ValueError("partition_by and partition_cols differ; give one of them.")
            partition_by = partition_cols
        if ray_remote_args is not None and not isinstance(ray_remote_args, dict):
            raise TypeError("ray_remote_args must be a dict of ray.remote arguments.")
        if concurrency is not None and (
            isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
        ):
            raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}.")
        sink = DeltaDatasink(
            path,
            mode=mode,
            partition_by=partition_by,
            storage_options=storage_options,
            name=name,
            description=description,
        )
        self.write_datasink(sink)
