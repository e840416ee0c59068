"""Reading one Iceberg data file inside a read task.

A data file is a Parquet file whose columns are matched to the table's columns by field id
(or through the table's name mapping for files written without ids), so renamed, reordered,
added and promoted columns read correctly. For each file:

1. the columns the output, the filter and the equality deletes need are chosen by field id
   and read through :mod:`shardflow.connectors.parquet.reading`, one row group at a time, with the
   Iceberg filter translated to the file's own column names (row groups whose statistics
   rule it out are skipped);
2. rows named by position delete files are dropped before the filter is applied;
3. each batch is conformed to the table's schema (types, names, nulls or partition values
   for columns the file lacks);
4. rows matching an equality delete file are dropped, the rest of the engine predicate
   (what Iceberg cannot evaluate) is applied, and the projection selects and renames.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.iceberg import pyiceberg_api
from shardflow.connectors.iceberg.planning import PlannedFile
from shardflow.connectors.parquet.reading import open_parquet_fragment, read_parquet_fragment
from shardflow.sdk.expressions import Expr


@dataclass(frozen=True)
class ReadContext:
    """What every read task of one scan shares (picklable; built on the driver).

    Args:
        io: The table's FileIO.
        schema: The Iceberg schema of the snapshot read (all its columns, current names).
        specs: Partition specs by id.
        name_mapping: The table's name mapping, for files without field ids (or None).
        format_version: The table's format version.
        row_filter: Unbound Iceberg filter every row read must satisfy.
        residual: The part of the engine predicate Iceberg cannot evaluate (or None).
        projection: ``(column, output name)`` pairs; None for every column of ``schema``.
        output_schema: The Arrow schema of the blocks produced.
        case_sensitive: Whether column names match case-sensitively.
    """

    io: Any
    schema: Any
    specs: dict[int, Any]
    name_mapping: Any
    format_version: int
    row_filter: Any
    residual: Expr | None
    projection: tuple[tuple[str, str], ...] | None
    output_schema: pa.Schema
    case_sensitive: bool = True

    def columns(self) -> list[str]:
        if self.projection is None:
            return [f.name for f in self.schema.columns]
        return [src for src, _ in self.projection]


class DeleteCache:
    """Delete files read once per read task (one delete file often covers many data files)."""

    def __init__(self) -> None:
        self._positions: dict[str, dict[str, np.ndarray]] = {}
        self._keys: dict[str, pa.Table] = {}

    def positions(self, io: Any, delete_file: Any, data_path: str) -> np.ndarray | None:
        path = delete_file.file_path
        if path not in self._positions:
            by_file = pyiceberg_api.read_position_deletes(io, delete_file)
            self._positions[path] = {
                name: np.asarray(
                    values.to_numpy() if hasattr(values, "to_numpy") else values, dtype=np.int64
                )
                for name, values in by_file.items()
            }
        return self._positions[path].get(data_path)

    def equality_keys(self, ctx: ReadContext, delete_file: Any) -> pa.Table:
        path = delete_file.file_path
        if path not in self._keys:
            self._keys[path] = _read_equality_keys(ctx, delete_file)
        return self._keys[path]


def _fragment(io: Any, location: str) -> tuple[Any, Any]:
    """A Parquet fragment of ``location`` and the file object to close afterwards (or None)."""
    fs_by_scheme = getattr(io, "fs_by_scheme", None)
    if fs_by_scheme is not None and hasattr(io, "parse_location"):
        scheme, netloc, path = io.parse_location(location, io.properties)
        return open_parquet_fragment(path, fs_by_scheme(scheme, netloc), pre_buffer=True), None
    f = io.new_input(location).open()
    return open_parquet_fragment(f), f


def _file_schema(ctx: ReadContext, physical: pa.Schema, location: str) -> Any:
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    try:
        return pyarrow_to_schema(
            physical,
            ctx.name_mapping,
            downcast_ns_timestamp_to_us=True,
            format_version=ctx.format_version,
        )
    except ValueError as exc:
        raise ValueError(f"Cannot map the columns of {location} to the table: {exc}") from exc


def _read_ids(schema: Any) -> set:
    from pyiceberg.types import ListType, MapType

    return {i for i in schema.field_ids if not isinstance(schema.find_type(i), (MapType, ListType))}


def _read_equality_keys(ctx: ReadContext, delete_file: Any) -> pa.Table:
    from pyiceberg.schema import prune_columns

    ids = set(delete_file.equality_ids or ())
    if not ids:
        raise ValueError(f"Equality delete file {delete_file.file_path} names no equality columns.")
    key_schema = prune_columns(ctx.schema, ids, select_full_types=True)
    fragment, f = _fragment(ctx.io, delete_file.file_path)
    try:
        file_schema = _file_schema(ctx, fragment.physical_schema, delete_file.file_path)
        file_keys = prune_columns(file_schema, ids & file_schema.field_ids, select_full_types=False)
        tables = list(read_parquet_fragment(fragment, columns=[c.name for c in file_keys.columns]))
    finally:
        if f is not None:
            f.close()
    table = pa.concat_tables(tables)
    batches = [
        pyiceberg_api.to_requested_schema(key_schema, file_keys, b) for b in table.to_batches()
    ]
    if not batches:
        return pyiceberg_api.arrow_schema(key_schema).empty_table()
    return pa.Table.from_batches(batches)


def rows_in(table: pa.Table, keys: pa.Table, names: list[str]) -> np.ndarray:
    """Which rows of ``table`` have values of ``names`` equal to a row of ``keys``; nulls
    equal nulls (as in Iceberg equality deletes)."""
    import pyarrow.compute as pc

    if table.num_rows == 0 or keys.num_rows == 0:
        return np.zeros(table.num_rows, dtype=bool)
    if len(names) == 1:
        name = names[0]
        values = keys.column(name).combine_chunks().cast(table.schema.field(name).type)
        mask = pc.is_in(table.column(name), value_set=values, skip_nulls=False)
        return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
    codes = []
    for name in names:
        data = table.column(name).combine_chunks()
        both = pa.concat_arrays([data, keys.column(name).combine_chunks().cast(data.type)])
        encoded = pc.dictionary_encode(both, null_encoding="encode").indices
        codes.append(np.asarray(encoded.to_numpy(zero_copy_only=False), dtype=np.int64))
    matrix = np.ascontiguousarray(np.stack(codes, axis=1))
    rows = matrix.view(np.dtype((np.void, matrix.dtype.itemsize * len(names)))).ravel()
    n = table.num_rows
    return np.isin(rows[:n], rows[n:])


def read_planned_file(
    ctx: ReadContext, planned: PlannedFile, deletes: DeleteCache, batch_size: int | None = None
) -> Iterator[pa.Table]:
    """Yield the rows of one planned data file, as blocks of ``ctx.output_schema``."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.visitors import bind, translate_column_names
    from pyiceberg.io.pyarrow import expression_to_pyarrow
    from pyiceberg.schema import prune_columns

    data_file = planned.data_file
    location = data_file.file_path
    names = list(dict.fromkeys(ctx.columns()))
    needed = set(names) | (ctx.residual.referenced_columns() if ctx.residual is not None else set())
    bound_filter = bind(ctx.schema, ctx.row_filter, case_sensitive=ctx.case_sensitive)
    equality_names: list[list[str]] = []
    for delete_file in planned.equality_deletes:
        equality_names.append([ctx.schema.find_column_name(i) for i in delete_file.equality_ids])
    needed |= {n for group in equality_names for n in group}
    filter_ids = _filter_ids(bound_filter)
    read_schema = (
        ctx.schema.select(*sorted(needed), case_sensitive=ctx.case_sensitive) if needed else None
    )
    fragment, f = _fragment(ctx.io, location)
    try:
        file_schema = _file_schema(ctx, fragment.physical_schema, location)
        ids = (_read_ids(read_schema) if read_schema is not None else set()) | filter_ids
        file_project = prune_columns(
            file_schema, ids & file_schema.field_ids, select_full_types=False
        )
        missing = pyiceberg_api.missing_column_values(
            data_file,
            read_schema or ctx.schema,
            ctx.schema,
            ctx.specs.get(data_file.spec_id),
            file_schema.field_ids,
        )
        pa_filter = None
        if not isinstance(ctx.row_filter, AlwaysTrue):
            translated = translate_column_names(
                bound_filter,
                file_schema,
                case_sensitive=ctx.case_sensitive,
                projected_field_values=missing,
            )
            pa_filter = expression_to_pyarrow(
                bind(file_schema, translated, case_sensitive=ctx.case_sensitive), file_schema
            )
        positions = _positions(ctx, planned, deletes)
        produced = False
        for table in read_parquet_fragment(
            fragment,
            columns=[c.name for c in file_project.columns],
            filter=pa_filter,
            batch_size=batch_size,
            deleted_positions=positions,
            use_threads=f is None,  # opened by path: Arrow may decode columns in parallel
        ):
            if table.num_rows == 0:
                continue
            block = _finish(
                ctx,
                table,
                read_schema,
                file_project,
                planned,
                deletes,
                equality_names,
                names,
                missing,
            )
            if block.num_rows:
                produced = True
                yield block
        if not produced:
            yield ctx.output_schema.empty_table()
    finally:
        if f is not None:
            f.close()


def _filter_ids(bound_filter: Any) -> set:
    from pyiceberg.expressions.visitors import extract_field_ids

    return set(extract_field_ids(bound_filter))


def _positions(ctx: ReadContext, planned: PlannedFile, deletes: DeleteCache) -> np.ndarray | None:
    found = [deletes.positions(ctx.io, d, planned.path) for d in planned.position_deletes]
    found = [p for p in found if p is not None and p.size]
    if not found:
        return None
    return np.concatenate(found)


def _finish(
    ctx: ReadContext,
    table: pa.Table,
    read_schema: Any,
    file_project: Any,
    planned: PlannedFile,
    deletes: DeleteCache,
    equality_names: list[list[str]],
    names: list[str],
    missing: dict[int, Any],
) -> pa.Table:
    if read_schema is None:
        return table.select([])  # no column needed (count): keep only the number of rows
    batches = [
        pyiceberg_api.to_requested_schema(read_schema, file_project, batch, missing)
        for batch in table.to_batches()
    ]
    table = pa.Table.from_batches(batches)
    for delete_file, key_names in zip(planned.equality_deletes, equality_names):
        keys = deletes.equality_keys(ctx, delete_file)
        table = table.filter(pa.array(~rows_in(table, keys, key_names)))
    if ctx.residual is not None and table.num_rows:
        table = table.filter(ctx.residual.to_pyarrow())
    table = table.select(names)
    if ctx.projection is not None:
        table = table.select([src for src, _ in ctx.projection]).rename_columns(
            [out for _, out in ctx.projection]
        )
    if not table.schema.equals(ctx.output_schema):
        table = table.cast(ctx.output_schema)
    return table
