"""Inside write tasks: check blocks against the table's schema and write them as data files.

A dataset is written to an existing table. Its columns must be columns of the table (by
name); each must have the table's type or one that converts to it without loss (a narrower
integer or float, a decimal of lower precision, ``large_`` string types, nanosecond
timestamps holding whole microseconds). Table columns the dataset lacks are written as nulls
when they are optional. Anything else is an error naming the column, raised before a file is
written: on the driver when the schema is known up front, otherwise by the write task before
it writes its first file.

Data files are named ``00000-<n>-<write uuid>.parquet`` (pyiceberg's pattern), with ``n``
in a range of its own for each write task, so that after a failure every file of the write
can be found and deleted.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from typing import Any

import pyarrow as pa

from shardflow.connectors.iceberg import pyiceberg_api
from shardflow.connectors.parquet.encodings import dictionary_columns

logger = logging.getLogger(__name__)

FILES_PER_TASK = 100_000  # counter range of one write task's file names
REWRITE_COUNTER_START = 1_000_000_000  # file names of rows an upsert rewrites


class IcebergSchemaError(ValueError):
    """A dataset column does not fit the Iceberg table's schema."""


def _is_int(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _int_fits(source: pa.DataType, target: pa.DataType) -> bool:
    if pa.types.is_signed_integer(source) == pa.types.is_signed_integer(target):
        return source.bit_width <= target.bit_width
    return pa.types.is_signed_integer(target) and source.bit_width < target.bit_width


def _normalized(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_normalized(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(_normalized(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _normalized(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_normalized(t.key_type), _normalized(t.item_type))
    return t


def type_fits(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` convert to ``target`` without changing meaning."""
    if pa.types.is_null(source):
        return True
    if pa.types.is_dictionary(source):
        return type_fits(source.value_type, target)
    source, target = _normalized(source), _normalized(target)
    if source.equals(target):
        return True
    if _is_int(source) and _is_int(target):
        return _int_fits(source, target)
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return source.bit_width <= target.bit_width
    if pa.types.is_decimal(source) and pa.types.is_decimal(target):
        return source.scale == target.scale and source.precision <= target.precision
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return (source.tz is None) == (target.tz is None)  # units: checked per value on cast
    if pa.types.is_date(source) and pa.types.is_date32(target):
        return True
    if pa.types.is_fixed_size_binary(source) and pa.types.is_binary(target):
        return True
    return False


class TableSchemaCheck:
    """The table's schema as Arrow, and the check and conversion of dataset blocks to it."""

    def __init__(self, iceberg_schema: Any, table_name: str):
        self.table_name = table_name
        self.arrow = pyiceberg_api.arrow_schema(iceberg_schema)
        self.required = {f.name for f in iceberg_schema.columns if f.required}
        self._checked: dict[pa.Schema, None] = {}

    def check(self, schema: pa.Schema) -> None:
        """Raise :class:`IcebergSchemaError` naming the first column that does not fit."""
        if schema in self._checked:
            return
        names = self.arrow.names
        for field in schema:
            if field.name not in names:
                raise IcebergSchemaError(
                    f"Column {field.name!r} of the dataset is not in Iceberg table "
                    f"{self.table_name!r} (columns: {', '.join(names)}). Drop it "
                    "(Dataset.drop_columns) or add it to the table first "
                    "(table.update_schema().add_column(...))."
                )
            target = self.arrow.field(field.name).type
            if not type_fits(field.type, target):
                raise IcebergSchemaError(
                    f"Column {field.name!r} has type {field.type} in the dataset but {target} in "
                    f"Iceberg table {self.table_name!r}, and {field.type} does not convert to "
                    f"{target} without loss. Cast the column, or widen the table's column first "
                    "(table.update_schema().update_column(...))."
                )
        missing = sorted(self.required - set(schema.names))
        if missing:
            raise IcebergSchemaError(
                f"Iceberg table {self.table_name!r} requires column(s) {missing}, which the "
                "dataset does not have."
            )
        self._checked[schema] = None

    def conform(self, block: pa.Table) -> pa.Table:
        """The block with the table's columns, order and types (checked first)."""
        self.check(block.schema)
        columns = []
        for field in self.arrow:
            if field.name not in block.column_names:
                columns.append(pa.nulls(block.num_rows, field.type))
                continue
            column = block.column(field.name)
            if field.name in self.required and column.null_count:
                raise IcebergSchemaError(
                    f"Column {field.name!r} is required in Iceberg table {self.table_name!r} "
                    f"but {column.null_count} of the dataset's values are null."
                )
            if not column.type.equals(field.type):
                try:
                    column = column.cast(field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise IcebergSchemaError(
                        f"Column {field.name!r} does not convert from {column.type} to "
                        f"{field.type} for Iceberg table {self.table_name!r} without loss: {exc}"
                    ) from None
            columns.append(column)
        return pa.Table.from_arrays(columns, schema=self.arrow)


def write_files(
    table_metadata: Any,
    io: Any,
    table: pa.Table,
    write_uuid: str,
    counter: itertools.count[int],
) -> list[Any]:
    """Write a conformed table as Parquet data files of the table (one per partition, split
    at the table's target file size); returns their DataFile entries, uncommitted."""
    from pyiceberg.schema import sanitize_column_names

    if table.num_rows == 0:
        return []
    properties = table_metadata.properties or {}
    schema = table_metadata.schema()
    if (
        properties.get("write.format.default", "parquet").lower() != "parquet"
        or sanitize_column_names(schema) != schema
    ):  # another format, or names Parquet cannot hold: pyiceberg's own writer
        return pyiceberg_api.write_data_files(
            table_metadata, table, io, uuid.UUID(write_uuid), counter
        )
    target = int(properties.get("write.target-file-size-bytes", 512 * 1024 * 1024))
    files = []
    for partition_key, rows in pyiceberg_api.split_by_partition(table_metadata, table):
        pieces = max(1, -(-rows.nbytes // max(target, 1)))
        step = -(-rows.num_rows // pieces)
        for start in range(0, rows.num_rows, step):
            name = f"00000-{next(counter)}-{write_uuid}.parquet"
            files.append(
                _write_one(table_metadata, io, rows.slice(start, step), partition_key, name)
            )
    return files


def _write_one(table_metadata: Any, io: Any, rows: pa.Table, partition_key: Any, name: str) -> Any:
    """Write one data file (field ids, the table's Parquet options) and describe it."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.table.locations import load_location_provider
    from pyiceberg.typedef import Record

    properties = table_metadata.properties or {}
    schema = table_metadata.schema()
    provider = load_location_provider(table_metadata.location, properties)
    path = provider.new_data_location(data_file_name=name, partition_key=partition_key)
    data = pyiceberg_api.with_field_ids(schema, rows)
    row_group_rows = int(properties.get("write.parquet.row-group-limit", 1048576))
    output = io.new_output(path)
    with output.create(overwrite=True) as stream:
        writer = pq.ParquetWriter(
            stream,
            schema=data.schema,
            store_decimal_as_integer=True,
            # The same choice as write_parquet (see connectors/parquet/encodings.py).
            use_dictionary=dictionary_columns(rows),
            **pyiceberg_api.parquet_writer_options(properties),
        )
        try:
            writer.write(data, row_group_size=row_group_rows)
        finally:
            writer.close()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=writer.writer.metadata,
        stats_columns=compute_statistics_plan(schema, properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition_key.partition if partition_key else Record(),
        file_size_in_bytes=len(output),
        sort_order_id=None,
        spec_id=table_metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


def task_counter(task_idx: int) -> itertools.count[int]:
    """File-name numbers of one write task (a range no other task of the write uses)."""
    return itertools.count(int(task_idx) * FILES_PER_TASK)


def data_location(table_metadata: Any) -> str:
    """Where the table's data files go."""
    properties = table_metadata.properties or {}
    location = properties.get("write.data.path") or f"{table_metadata.location.rstrip('/')}/data"
    return location.rstrip("/")


def _list_files(io: Any, location: str) -> list[tuple[str, str]]:
    """``(uri, path)`` of every file under ``location``."""
    fs_by_scheme = getattr(io, "fs_by_scheme", None)
    if fs_by_scheme is not None and hasattr(io, "parse_location"):
        import pyarrow.fs as pafs

        scheme, netloc, path = io.parse_location(location, io.properties)
        fs = fs_by_scheme(scheme, netloc)
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
        prefix = f"{scheme}://" if scheme != "file" else "file://"
        return [(prefix + i.path, i.path) for i in infos if i.type == pafs.FileType.File]
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(location)
    protocol = fs.protocol[0] if isinstance(fs.protocol, (list, tuple)) else fs.protocol
    return [(f"{protocol}://{p}", p) for p in fs.find(path)]


def delete_files(io: Any, locations: list[str]) -> list[str]:
    """Delete files, logging (not raising) what cannot be deleted; returns those left."""
    left = []
    for location in locations:
        try:
            io.delete(location)
        except FileNotFoundError:
            pass
        except Exception as exc:  # keep deleting the others
            logger.warning("Could not delete %s: %s", location, exc)
            left.append(location)
    return left


def delete_files_of_write(io: Any, table_metadata: Any, write_uuid: str) -> list[str]:
    """Delete every data file a write (by its uuid) left under the table's data location."""
    try:
        found = _list_files(io, data_location(table_metadata))
    except Exception as exc:
        logger.warning("Could not list the data files of write %s: %s", write_uuid, exc)
        return []
    ours = [uri for uri, path in found if write_uuid in path.rsplit("/", 1)[-1]]
    left = delete_files(io, ours)
    return [uri for uri in ours if uri not in left]


def concat_keys(tables: list[pa.Table | None]) -> pa.Table | None:
    """The join-column values written by all tasks (for an upsert)."""
    tables = [t for t in tables if t is not None and t.num_rows]
    return pa.concat_tables(tables) if tables else None
