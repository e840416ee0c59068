"""Apache Hudi tables: :func:`read_hudi`.

The connector lives in :mod:`shardflow.connectors.hudi` and needs hudi, hudi-rs's Python
bindings (``pip install 'shardflow[hudi]'``), imported only when a table is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_hudi(
    table_uri: str,
    *,
    query_type: str = "snapshot",
    filters: list[tuple[str, str, str]] | None = None,
    hudi_options: dict[str, str] | None = None,
    storage_options: dict[str, str] | None = None,
    num_cpus: float | None = None,
    num_gpus: float | None = None,
    memory: float | None = None,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    label_selector: dict[str, str] | None = None,
    fallback_strategy: list[dict[str, Any]] | None = None,
    max_calls: int | None = None,
    resources: dict[str, float] | None = None,
    accelerator_type: str | None = None,
    runtime_env: dict[str, Any] | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> Dataset:
    """Create a Dataset from an `Apache Hudi <https://hudi.apache.org>`_ table.

    The driver opens the table through hudi (hudi-rs) and plans the file slices the query
    reads; read tasks get slices balanced by size and read their base files (read-optimized:
    a merge-on-read table's log files are not merged, as in Ray Data 2.60). Rows keep Hudi's
    meta columns (``_hoodie_commit_time``, ``_hoodie_record_key``, ...) before the table's
    own, as Ray Data returns them.

    A ``"snapshot"`` query reads the latest version of every record. An ``"incremental"``
    query reads the records committed after the instant
    ``hoodie.read.file_group.start_timestamp`` and up to
    ``hoodie.read.file_group.end_timestamp`` (the latest when not given), from
    ``hudi_options``; hudi 0.5's names of these keys, ``hoodie.read.start.timestamp`` and
    ``hoodie.read.end.timestamp``, are taken too, with either version of hudi.

    Differences from Ray Data 2.60: ``filters`` select rows exactly (Ray Data prunes
    partitions with them, and a filter on another column keeps every row), and a filter on
    a column the table lacks raises ValueError; a missing table raises FileNotFoundError and
    a table or file hudi cannot read a ValueError naming it (Ray Data raises hudi's
    HudiCoreError); a relative local path is taken; hudi 0.5 works too (Ray Data 2.60 needs
    hudi 0.4's API). The Ray task arguments (``num_cpus``, ``memory``, ``label_selector``,
    ``ray_remote_args``, ...) are checked and not applied.

    Examples:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> import shardflow as sf
        >>> from shardflow.connectors.hudi.sample_tables import SampleHudiTable
        >>> table = SampleHudiTable(tempfile.mkdtemp() + "/trips", partition_field="city")
        >>> first = table.commit(pa.table({"id": [1, 2, 3], "city": ["sf", "la", "sf"],
        ...                                "fare": [9.5, 3.0, 7.25]}))
        >>> second = table.commit(pa.table({"id": [1], "city": ["sf"], "fare": [12.0]}))
        >>> ds = sf.read_hudi(table.path, filters=[("city", "=", "sf")])
        >>> ds.select_columns(["id", "fare"]).sort("id").take_all()
        [{'id': 1, 'fare': 12.0}, {'id': 3, 'fare': 7.25}]
        >>> changes = sf.read_hudi(table.path, query_type="incremental",
        ...     hudi_options={"hoodie.read.file_group.start_timestamp": first})
        >>> changes.select_columns(["id", "fare"]).take_all()
        [{'id': 1, 'fare': 12.0}]

    Args:
        table_uri: The table's folder, or a URI (``s3://bucket/table``, ``gs://...``).
        query_type: ``"snapshot"`` (default) or ``"incremental"``.
        filters: ``(column, op, value)`` tuples a row must all satisfy; ``op`` is one of
            ``"="``, ``"!="``, ``"<"``, ``"<="``, ``">"``, ``">="`` and ``value`` a string,
            cast to the column's type. Filters on partition columns also skip partitions.
        hudi_options: Hudi read configurations (``hoodie.*``), among them the incremental
            query's bounds.
        storage_options: hudi-rs's object store options: credentials, region,
            ``aws_endpoint_url`` for an S3-compatible server, ...
        num_cpus: Ray Data's CPUs per read task (checked, not applied).
        num_gpus: Ray Data's GPUs per read task (checked, not applied).
        memory: Ray Data's heap memory per read task (checked, not applied).
        concurrency: The most read tasks running at once.
        override_num_blocks: Number of read tasks; by default from the data size, at most
            one per file slice.
        label_selector: Ray's node labels for read tasks (checked, not applied).
        fallback_strategy: Ray's fallback labels (checked, not applied).
        max_calls: Ray's tasks per worker (checked, not applied).
        resources: Ray's custom resources per read task (checked, not applied).
        accelerator_type: Ray's accelerator type (checked, not applied).
        runtime_env: Ray's runtime environment (checked, not applied).
        ray_remote_args: Further ``ray.remote`` arguments (checked, not applied).

    Returns:
        A lazy Dataset; nothing is read until it is consumed.
    """
    from shardflow.connectors.hudi import HudiDatasource
    from shardflow.engine.api.create import read_datasource
    from shardflow.engine.api.read_task_args import check_read_task_args

    given: dict[str, Any] = {
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "memory": memory,
        "label_selector": label_selector,
        "fallback_strategy": fallback_strategy,
        "max_calls": max_calls,
        "resources": resources,
        "accelerator_type": accelerator_type,
        "runtime_env": runtime_env,
        "ray_remote_args": ray_remote_args,
    }
    check_read_task_args("read_hudi", given)
    datasource = HudiDatasource(
        table_uri,
        query_type=query_type,
        filters=filters,
        hudi_options=hudi_options,
        storage_options=storage_options,
    )
    return read_datasource(
        datasource, concurrency=concurrency, override_num_blocks=override_num_blocks
    )
