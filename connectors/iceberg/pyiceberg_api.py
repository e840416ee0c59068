"""Everything the Iceberg connector takes from pyiceberg, imported in one place.

pyiceberg is an optional dependency (``pip install 'shardflow[iceberg]'``): nothing here is
imported by ``import shardflow``, and :func:`require_pyiceberg` turns its absence into an
ImportError that says what to install.

Most names are pyiceberg's public API. A few helpers are private in pyiceberg 0.12 and have no
public equivalent: conforming a record batch to a requested schema (field-id mapping, type
promotion, defaults), reading a delete file, the identity-partition values of columns a
data file lacks, splitting rows by partition, the Parquet writer options of a table's
properties, and writing Arrow data as data files. The ``iceberg`` extra pins pyiceberg below
0.13 so these are checked by the test suite before an upgrade.
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk.optional import require


def require_pyiceberg(what: str) -> None:
    """Raise an ImportError naming the extra to install when pyiceberg is missing."""
    require("pyiceberg", "iceberg", what)


def load_catalog(catalog_kwargs: dict[str, Any]) -> Any:
    """A pyiceberg catalog from Ray Data-style ``catalog_kwargs`` (``name`` plus properties)."""
    from pyiceberg.catalog import load_catalog as _load_catalog

    kwargs = dict(catalog_kwargs)
    name = kwargs.pop("name", "default")
    return _load_catalog(name, **kwargs)


def load_table(catalog: Any, table_identifier: str) -> Any:
    """Load a table, with an error that names the table and the catalog when it is missing."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return catalog.load_table(table_identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise ValueError(
            f"Iceberg table {table_identifier!r} does not exist in catalog "
            f"{getattr(catalog, 'name', '?')!r} ({exc}). Create it first, e.g. with "
            "catalog.create_table(identifier, schema=...)."
        ) from exc


def without_history(table_metadata: Any) -> Any:
    """A copy of table metadata without its snapshots and logs (what writing files needs)."""
    try:
        return table_metadata.model_copy(
            update={
                "snapshots": [],
                "snapshot_log": [],
                "metadata_log": [],
                "refs": {},
                "current_snapshot_id": None,
                "statistics": [],
            }
        )
    except Exception:  # a pyiceberg without these fields: ship it whole
        return table_metadata


# -- private pyiceberg helpers (see the module docstring) -------------------------------------


def to_requested_schema(
    requested: Any, file_schema: Any, batch: Any, missing_values: dict[int, Any] | None = None
) -> Any:
    """Conform a record batch read with ``file_schema`` to the Iceberg schema ``requested``
    (``missing_values``: values by field id for columns the file lacks)."""
    from pyiceberg.io.pyarrow import _to_requested_schema

    return _to_requested_schema(
        requested,
        file_schema,
        batch,
        downcast_ns_timestamp_to_us=True,
        projected_missing_fields=missing_values or {},
        allow_timestamp_tz_mismatch=True,
    )


def arrow_schema(schema: Any) -> Any:
    """The Arrow schema blocks of an Iceberg schema have: ``string``/``binary``/``list``, not
    their ``large_`` variants (as pyiceberg's own ``to_arrow`` gives), without field ids."""
    from pyiceberg.io.pyarrow import _pyarrow_schema_ensure_small_types, schema_to_pyarrow

    return _pyarrow_schema_ensure_small_types(schema_to_pyarrow(schema, include_field_ids=False))


def read_position_deletes(io: Any, delete_file: Any) -> dict[str, Any]:
    """``{data file path: positions}`` from one position delete file (or deletion vector)."""
    from pyiceberg.io.pyarrow import _read_deletes

    return _read_deletes(io, delete_file)


def missing_column_values(
    data_file: Any, read_schema: Any, table_schema: Any, spec: Any | None, file_field_ids: Any
) -> dict[int, Any]:
    """Values of columns a data file lacks that its identity partition holds (by field id)."""
    from pyiceberg.io.pyarrow import _get_column_projection_values

    return _get_column_projection_values(data_file, read_schema, table_schema, spec, file_field_ids)


def write_data_files(
    table_metadata: Any, table: Any, io: Any, write_uuid: Any, counter: Any
) -> list:
    """Write Arrow data as data files of the table with pyiceberg's own writer (split by
    partition and target size); returns their DataFile entries, not yet committed."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    return list(
        _dataframe_to_data_files(
            table_metadata=table_metadata, df=table, io=io, write_uuid=write_uuid, counter=counter
        )
    )


def split_by_partition(table_metadata: Any, table: Any) -> list:
    """``[(partition key or None, rows)]``: the table's rows split by the table's partition
    spec (one part with key None for an unpartitioned table)."""
    from pyiceberg.io.pyarrow import _determine_partitions

    spec = table_metadata.spec()
    if spec.is_unpartitioned():
        return [(None, table)]
    return [
        (p.partition_key, p.arrow_table_partition)
        for p in _determine_partitions(spec=spec, schema=table_metadata.schema(), arrow_table=table)
    ]


def with_field_ids(file_schema: Any, table: Any) -> Any:
    """The table with Parquet field ids in its schema (the Iceberg schema's columns, in order)."""
    import pyarrow as pa
    from pyiceberg.io import pyarrow as pio

    model = pio.ParquetFormatModel()
    task_schema = pio.pyarrow_to_schema(table.schema, name_mapping=file_schema.name_mapping)
    batches = [
        pio._to_requested_schema(
            file_schema,
            task_schema,
            batch,
            downcast_ns_timestamp_to_us=True,
            include_field_ids=True,
            format_model=model,
        )
        for batch in table.to_batches()
    ]
    return pa.Table.from_batches(batches)


def parquet_writer_options(properties: dict[str, str]) -> dict[str, Any]:
    """pyarrow ParquetWriter options from the table's ``write.parquet.*`` properties."""
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    return _get_parquet_writer_kwargs(properties)
