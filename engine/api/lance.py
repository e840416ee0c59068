"""Lance datasets: :func:`read_lance` and :meth:`Dataset.write_lance`.

The connector lives in :mod:`shardflow.connectors.lance` and needs pylance
(``pip install 'shardflow[lance]'``), imported only when a dataset is read or written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.sdk.save_mode import SaveMode

if TYPE_CHECKING:  # engine.dataset mixes in LanceWriteMixin, so it is imported lazily here
    from shardflow.engine.api.dataset import Dataset


def read_lance(
    uri: str | list[str],
    *,
    version: int | str | None = None,
    columns: list[str] | None = None,
    filter: str | None = None,
    storage_options: dict[str, str] | None = None,
    scanner_options: dict[str, Any] | None = None,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
) -> Dataset:
    """Create a Dataset from one or more Lance datasets.

    The datasets are opened at the call (a missing one raises here) and their versions are
    pinned, so the whole read sees one snapshot even while writers commit. Read tasks get
    contiguous runs of fragments balanced by rows and scan them with pylance. ``columns`` and
    ``select_columns`` / ``rename_columns`` after the read become the scan's projection;
    ``filter`` (a SQL WHERE clause) and ``Dataset.filter(expr=...)`` after the read become
    the scan's filter (an expression Lance cannot evaluate is applied with Arrow in the
    read tasks); ``limit`` stops each scan early; ``count()`` is answered from the manifest
    when there is no filter.

    Differences from Ray Data 2.60: ``filter`` is not deprecated (it is pushed into the same
    scan as ``Dataset.filter(expr=...)``, and both may be given); ``scanner_options`` may not
    set ``columns``, ``filter``, ``limit``, ``offset``, ``fragments`` or ``with_row_id``;
    unknown ``columns`` raise ValueError at the call.

    Examples:
        >>> import os, tempfile
        >>> import lance, pyarrow as pa
        >>> import shardflow as sf
        >>> uri = os.path.join(tempfile.mkdtemp(), "docs.lance")
        >>> table = pa.table({"id": list(range(10)), "label": [i % 3 for i in range(10)]})
        >>> _ = lance.write_dataset(table, uri)
        >>> ds = sf.read_lance(uri, columns=["id"], filter="label = 2")
        >>> [row["id"] for row in ds.take_all()]
        [2, 5, 8]
        >>> sf.read_lance(uri).filter(expr=sf.col("id") >= 8).count()
        2

    Args:
        uri: The URI of a Lance dataset (a local path, ``s3://``, ``gs://``, ``az://``), or a
            list of them read as one dataset (their schemas are unified; columns a dataset
            lacks are null).
        version: The version to read (a number or a tag); the latest by default.
        columns: The columns to read; all by default.
        filter: A SQL WHERE clause evaluated by Lance, e.g. ``"label = 2 AND text IS NOT
            NULL"``.
        storage_options: Lance's object store options (credentials, endpoint, region, ...).
        scanner_options: Other arguments of ``LanceDataset.scanner`` (``batch_size``,
            ``batch_readahead``, ``fragment_readahead``, ...).
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Number of read tasks; by default from the data size, at most
            one per fragment.

    Returns:
        A lazy Dataset; nothing is read until it is consumed.
    """
    from shardflow.connectors.lance import LanceDatasource
    from shardflow.engine.api.create import read_datasource

    datasource = LanceDatasource(
        uri,
        version=version,
        columns=columns,
        filter=filter,
        storage_options=storage_options,
        scanner_options=scanner_options,
    )
    return read_datasource(
        datasource, concurrency=concurrency, override_num_blocks=override_num_blocks
    )


class LanceWriteMixin:
    """``Dataset.write_lance``."""

    def write_lance(
        self,
        path: str,
        *,
        schema: Any = None,
        mode: Any = SaveMode.CREATE,
        min_rows_per_file: int = 1024 * 1024,
        max_rows_per_file: int = 64 * 1024 * 1024,
        data_storage_version: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Write the dataset to a Lance dataset, in one commit.

        Write tasks write Lance data files (fragments) in parallel; the driver then commits
        all of them in one new version, so readers see all of the write or none of it. If a
        task fails, the data files the write made are deleted and nothing is committed.
        ``mode="create"`` (the default) refuses an existing dataset; ``"overwrite"``
        replaces its rows (and schema) with the dataset's in a new version, older versions
        staying readable; ``"append"`` adds the rows, in the existing dataset's schema
        (columns the data lacks are written as nulls), and fails if another writer
        committed a conflicting change since the write started.

        Differences from Ray Data 2.60: a write of no rows whose schema is known still
        commits (an empty dataset for ``create``, an emptied one for ``overwrite``) where
        Ray Data commits nothing;
        ``table_id``, ``namespace_impl`` and ``namespace_properties`` (Lance namespaces),
        ``ray_remote_args`` and ``concurrency`` are not taken. Ray Data 2.60's ``write_lance`` fails with
        pylance 14 (it passes an argument pylance 14 no longer takes).

        Examples:
            >>> import os, tempfile
            >>> import lance
            >>> import shardflow as sf
            >>> uri = os.path.join(tempfile.mkdtemp(), "squares.lance")
            >>> squares = sf.range(100).map_batches(lambda b: {"id": b["id"], "sq": b["id"] ** 2})
            >>> squares.write_lance(uri)
            >>> lance.dataset(uri).count_rows()
            100
            >>> more = sf.range(5).map_batches(lambda b: {"id": b["id"], "sq": b["id"]})
            >>> more.write_lance(uri, mode="append")
            >>> sf.read_lance(uri).count()
            105

        Args:
            path: The URI of the Lance dataset (a local path, ``s3://``, ``gs://``, ...).
            schema: The schema to write; by default the data's (for ``append``, the existing
                dataset's).
            mode: ``"create"`` (or ``SaveMode.CREATE``), ``"append"`` or ``"overwrite"``.
            min_rows_per_file: Blocks are grouped so each write task gets at least this many
                rows.
            max_rows_per_file: The most rows in one data file.
            data_storage_version: The Lance file format version (``"stable"``, ``"2.1"``,
                ``"legacy"``, ...); pylance's default when None.
            storage_options: Lance's object store options (credentials, endpoint, ...).
        """
        from shardflow.connectors.lance import LanceDatasink

        sink = LanceDatasink(
            path,
            schema=schema,
            mode=mode,
            min_rows_per_file=min_rows_per_file,
            max_rows_per_file=max_rows_per_file,
            data_storage_version=data_storage_version,
            storage_options=storage_options,
        )
        self.write_datasink(sink)
