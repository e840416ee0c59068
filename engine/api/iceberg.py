"""Iceberg tables: :func:`read_iceberg` and :meth:`Dataset.write_iceberg`.

The connector lives in :mod:`shardflow.connectors.iceberg` and needs pyiceberg
(``pip install 'shardflow[iceberg]'``), imported only when a table is read or written.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # engine.dataset mixes in IcebergWriteMixin, so it is imported lazily here
    from shardflow.engine.api.dataset import Dataset


def read_iceberg(
    table_identifier: str,
    *,
    row_filter: Any = None,
    parallelism: int = -1,
    selected_fields: tuple[str, ...] = ("*",),
    snapshot_id: int | None = None,
    scan_kwargs: dict[str, Any] | None = None,
    catalog_kwargs: dict[str, Any] | None = None,
    catalog: Any = None,
    override_num_blocks: int | None = None,
    as_of_timestamp: datetime.datetime | int | None = None,
) -> Dataset:
    """Create a Dataset from an Iceberg table.

    The scan is planned on the driver through pyiceberg: manifests and data files that
    cannot hold matching rows are skipped (partition values and column statistics), and each
    data file is paired with the position and equality delete files that apply to it. Read
    tasks get files balanced by size and read them one row group at a time, with the filter
    applied exactly. ``Dataset.filter(expr=...)``, ``select_columns`` and ``limit`` right
    after the read are pushed into the same scan, and ``count()`` is answered from the
    manifests when no filter or delete file stands in the way.

    Differences from Ray Data 2.60: ``row_filter`` and ``selected_fields`` are not
    deprecated (they are pushed into the same scan as ``filter``/``select_columns``), and
    ``row_filter`` also takes a shardflow expression; ``catalog`` may also be a pyiceberg
    Catalog; ``as_of_timestamp`` is added; a ``limit`` in
    ``scan_kwargs`` limits the whole dataset (Ray Data applies it per read task); strings
    are read as Arrow ``string`` (as pyiceberg's ``to_arrow()`` gives), not ``large_string``;
    and tables with equality deletes are read (pyiceberg's planner refuses them).

    Examples:
        >>> import os, tempfile
        >>> import pyarrow as pa
        >>> import shardflow as sf
        >>> from pyiceberg.catalog.sql import SqlCatalog
        >>> folder = tempfile.mkdtemp()
        >>> catalog_kwargs = {"name": "default", "type": "sql",
        ...                   "uri": f"sqlite:///{folder}/catalog.db", "warehouse": f"file://{folder}"}
        >>> catalog = SqlCatalog(**catalog_kwargs)
        >>> catalog.create_namespace("db")
        >>> data = pa.table({"id": pa.array(range(10), pa.int64()),
        ...                  "name": [f"n{i}" for i in range(10)]})
        >>> catalog.create_table("db.events", schema=data.schema).append(data)
        >>> ds = sf.read_iceberg("db.events", catalog_kwargs=catalog_kwargs)
        >>> ds.count()
        10
        >>> ds.filter(expr=sf.col("id") >= 8).select_columns(["name"]).take_all()
        [{'name': 'n8'}, {'name': 'n9'}]

    Args:
        table_identifier: Fully qualified table name, e.g. ``"db_name.table_name"``.
        row_filter: Rows to read: a pyiceberg ``BooleanExpression``, a string in Iceberg's
            filter syntax (``"id > 3 and name = 'a'"``), or a shardflow expression
            (``sf.col("id") > 3``).
        parallelism: Deprecated spelling of ``override_num_blocks`` (as in Ray Data).
        selected_fields: Columns to read; ``("*",)`` reads all.
        snapshot_id: Read the table as of this snapshot (time travel); the current snapshot
            by default.
        scan_kwargs: Options of the scan: ``case_sensitive`` (column names, default True),
            ``options`` (scan properties), ``limit`` (rows), ``snapshot_id``.
        catalog_kwargs: Arguments of ``pyiceberg.catalog.load_catalog``: ``name`` (default
            ``"default"``) and the catalog's properties (``type``, ``uri``, ``warehouse``,
            ``s3.endpoint``, ...).
        catalog: A :class:`~shardflow.Catalog`, which resolves ``table_identifier`` to
            ``catalog_kwargs`` (and perhaps another identifier); ignored, with a warning,
            when ``catalog_kwargs`` is given, as in Ray Data. Or a pyiceberg Catalog to use
            instead of ``catalog_kwargs``.
        override_num_blocks: Number of read tasks; by default from the data size, at most
            one task per data file.
        as_of_timestamp: Read the snapshot that was current at this time (a datetime, naive
            meaning UTC, or milliseconds since the epoch).

    Returns:
        A lazy Dataset; nothing is read until it is consumed.
    """
    from shardflow.connectors.iceberg import IcebergDatasource
    from shardflow.engine.api.create import read_datasource
    from shardflow.sdk.catalog import Catalog

    if isinstance(catalog, Catalog):
        if catalog_kwargs:
            import warnings

            warnings.warn(
                "read_iceberg: `catalog` and `catalog_kwargs` are both given; using "
                "`catalog_kwargs` and ignoring `catalog`.",
                stacklevel=2,
            )
        else:
            from shardflow.sdk.catalog import ReaderFormat, resolve_for

            resolved = resolve_for(catalog, table_identifier, ReaderFormat.ICEBERG, "read_iceberg")
            catalog_kwargs = resolved.catalog_kwargs or {}
            if resolved.table_identifier is not None:
                table_identifier = resolved.table_identifier
        catalog = None
    scan_kwargs = dict(scan_kwargs or {})
    limit = scan_kwargs.pop("limit", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"scan_kwargs['limit'] must be an int >= 0, got {limit!r}.")
    datasource = IcebergDatasource(
        table_identifier,
        row_filter=row_filter,
        selected_fields=selected_fields,
        snapshot_id=snapshot_id,
        scan_kwargs=scan_kwargs,
        catalog_kwargs=catalog_kwargs,
        catalog=catalog,
        as_of_timestamp=as_of_timestamp,
    )
    dataset = read_datasource(
        datasource, parallelism=parallelism, override_num_blocks=override_num_blocks
    )
    return dataset if limit is None else dataset.limit(limit)


class IcebergWriteMixin:
    """``Dataset.write_iceberg``."""

    def write_iceberg(
        self,
        table_identifier: str,
        catalog_kwargs: dict[str, Any] | None = None,
        catalog: Any = None,
        snapshot_properties: dict[str, str] | None = None,
        mode: Any = "append",
        overwrite_filter: Any = None,
        upsert_kwargs: dict[str, Any] | None = None,
        overwrite_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """Write the dataset into an existing Iceberg table, in one commit.

        Write tasks write Parquet data files in parallel; the driver then commits all of
        them in one snapshot, so readers see all of the write or none of it. If a task fails,
        or the commit does, every file the write made is deleted and the table's snapshot is
        unchanged. A commit that meets a concurrent one is planned again on the table's fresh
        state (a few times) or fails with ``IcebergCommitConflictError``.

        The dataset's columns must be columns of the table, with the table's types or types
        that convert to them without loss (``int32`` into ``long``, ``float32`` into
        ``double``, ``large_string`` into ``string``, ...); optional table columns the
        dataset lacks are written as nulls. Anything else raises an error naming the column
        before any file is written.

        Differences from Ray Data 2.60: the table schema is not evolved automatically (Ray
        Data adds new columns and widens types in a separate commit before writing; here a
        write is exactly one commit, so evolve the schema first); ``overwrite`` with no rows
        empties the rows it replaces (Ray Data commits nothing); ``upsert`` raises when a key
        appears twice in the dataset; ``catalog`` is a pyiceberg Catalog; ``mode`` also takes
        plain strings; ``ray_remote_args`` and ``concurrency`` are not taken; ``branch`` is
        not supported in ``upsert_kwargs``/``overwrite_kwargs``. Each snapshot records the
        write's id as ``shardflow.write-id`` in its summary.

        Examples:
            >>> import os, tempfile
            >>> import pyarrow as pa
            >>> import shardflow as sf
            >>> from pyiceberg.catalog.sql import SqlCatalog
            >>> folder = tempfile.mkdtemp()
            >>> catalog_kwargs = {"name": "default", "type": "sql",
            ...                   "uri": f"sqlite:///{folder}/catalog.db", "warehouse": f"file://{folder}"}
            >>> catalog = SqlCatalog(**catalog_kwargs)
            >>> catalog.create_namespace("db")
            >>> schema = pa.schema([("id", pa.int64()), ("score", pa.float64())])
            >>> table = catalog.create_table("db.scores", schema=schema)
            >>> ds = sf.range(100).map_batches(lambda b: {"id": b["id"], "score": b["id"] / 2})
            >>> ds.write_iceberg("db.scores", catalog_kwargs=catalog_kwargs)
            >>> sf.from_items([{"id": 1, "score": -1.0}]).write_iceberg(
            ...     "db.scores", catalog_kwargs=catalog_kwargs, mode="upsert",
            ...     upsert_kwargs={"join_cols": ["id"]})
            >>> table.refresh().scan(row_filter="id <= 1").to_arrow().sort_by("id").to_pylist()
            [{'id': 0, 'score': 0.0}, {'id': 1, 'score': -1.0}]

        Args:
            table_identifier: Fully qualified table name, e.g. ``"db_name.table_name"``.
            catalog_kwargs: Arguments of ``pyiceberg.catalog.load_catalog`` (``name`` and
                the catalog's properties).
            catalog: A pyiceberg Catalog to use instead of ``catalog_kwargs``.
            snapshot_properties: Extra properties for the snapshot's summary.
            mode: ``"append"`` (default) adds the rows; ``"overwrite"`` replaces the table's
                rows (or those matching ``overwrite_filter``); ``"upsert"`` replaces the rows
                whose join columns match a row of the dataset and adds the others.
            overwrite_filter: With ``"overwrite"``, the rows to replace: a shardflow
                expression, a pyiceberg ``BooleanExpression`` or a filter string.
            upsert_kwargs: With ``"upsert"``: ``join_cols`` (the columns identifying a row;
                the table's identifier fields by default) and ``case_sensitive``.
            overwrite_kwargs: With ``"overwrite"``: ``case_sensitive``.
        """
        from shardflow.connectors.iceberg import IcebergDatasink

        sink = IcebergDatasink(
            table_identifier,
            catalog_kwargs=catalog_kwargs,
            snapshot_properties=snapshot_properties,
            mode=mode,
            overwrite_filter=overwrite_filter,
            upsert_kwargs=upsert_kwargs,
            overwrite_kwargs=overwrite_kwargs,
            catalog=catalog,
        )
        self.write_datasink(sink)
