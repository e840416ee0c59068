"""IcebergDatasink: writes a dataset into an existing Iceberg table in one commit.

See :meth:`shardflow.Dataset.write_iceberg`. Write tasks check their blocks against the
table's schema and write Parquet data files in parallel (:mod:`.writing`); the driver
commits them all in one snapshot (:mod:`.commit`). A failed write deletes every file it
wrote and leaves the table's snapshot as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shardflow.connectors.iceberg import pyiceberg_api
from shardflow.connectors.iceberg.commit import Committer, RowRemoval, new_write_uuid
from shardflow.connectors.iceberg.expressions import check_row_filter, parse_row_filter
from shardflow.connectors.iceberg.writing import (
    IcebergSchemaError,
    TableSchemaCheck,
    concat_keys,
    delete_files,
    delete_files_of_write,
    task_counter,
    write_files,
)
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import Datasink, TaskContext, WriteResult

logger = logging.getLogger(__name__)

MODES = ("append", "overwrite", "upsert")
_UPSERT_KWARGS = ("join_cols", "case_sensitive")
_OVERWRITE_KWARGS = ("case_sensitive",)
# A write task writes what it has buffered once this many bytes of blocks are waiting.
_BUFFER_BYTES = 128 * 1024 * 1024


def _mode(mode: Any) -> str:
    value = getattr(mode, "value", mode)
    if not isinstance(value, str) or value.lower() not in MODES:
        raise ValueError(
            f"mode must be one of {list(MODES)} (or a SaveMode with one of them), got {mode!r}."
        )
    return value.lower()


def _check_kwargs(kwargs: dict[str, Any] | None, allowed: tuple, what: str) -> dict[str, Any]:
    kwargs = dict(kwargs or {})
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"Unknown {what} {unknown}; supported: {list(allowed)}.")
    if not isinstance(kwargs.get("case_sensitive", True), bool):
        raise TypeError(f"{what}['case_sensitive'] must be a bool.")
    return kwargs


@dataclass
class IcebergWriteResult:
    """What one write task returns: its data files (uncommitted) and, for an upsert, the
    values of the join columns it wrote."""

    data_files: list[Any] = field(default_factory=list)
    upsert_keys: pa.Table | None = None
    num_rows: int = 0


class IcebergDatasink(Datasink[IcebergWriteResult]):
    """Writes into an existing Iceberg table. See :meth:`shardflow.Dataset.write_iceberg`."""

    def __init__(
        self,
        table_identifier: str,
        catalog_kwargs: dict[str, Any] | None = None,
        snapshot_properties: dict[str, str] | None = None,
        mode: Any = "append",
        overwrite_filter: Any = None,
        upsert_kwargs: dict[str, Any] | None = None,
        overwrite_kwargs: dict[str, Any] | None = None,
        *,
        catalog: Any = None,
    ):
        pyiceberg_api.require_pyiceberg("write_iceberg")
        if not isinstance(table_identifier, str) or not table_identifier.strip():
            raise ValueError(
                "table_identifier must be a table name such as 'db.table', "
                f"got {table_identifier!r}."
            )
        self._mode = _mode(mode)
        if upsert_kwargs and self._mode != "upsert":
            raise ValueError(
                f"upsert_kwargs can only be given with mode='upsert', not {self._mode!r}."
            )
        if (overwrite_kwargs or overwrite_filter is not None) and self._mode != "overwrite":
            raise ValueError(
                "overwrite_filter and overwrite_kwargs can only be given with mode='overwrite', "
                f"not {self._mode!r}."
            )
        self._upsert_kwargs = _check_kwargs(upsert_kwargs, _UPSERT_KWARGS, "upsert_kwargs")
        self._overwrite_kwargs = _check_kwargs(
            overwrite_kwargs, _OVERWRITE_KWARGS, "overwrite_kwargs"
        )
        join_cols = self._upsert_kwargs.get("join_cols")
        if join_cols is not None and (
            isinstance(join_cols, str)
            or not join_cols
            or not all(isinstance(c, str) for c in join_cols)
        ):
            raise TypeError(
                "upsert_kwargs['join_cols'] must be a non-empty list of column names, "
                f"got {join_cols!r}."
            )
        check_row_filter(overwrite_filter)
        if snapshot_properties is not None and (
            not isinstance(snapshot_properties, dict)
            or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in snapshot_properties.items()
            )
        ):
            raise TypeError("snapshot_properties must be a dict of strings to strings.")
        if catalog_kwargs is not None and not isinstance(catalog_kwargs, dict):
            raise TypeError("catalog_kwargs must be a dict of catalog properties.")
        if catalog is not None and catalog_kwargs:
            raise ValueError("catalog_kwargs cannot be given together with catalog.")
        if catalog is not None and not hasattr(catalog, "load_table"):
            raise TypeError(f"catalog must be a pyiceberg Catalog, got {type(catalog).__name__}.")
        self.table_identifier = table_identifier
        self._catalog_kwargs = dict(catalog_kwargs or {})
        self._catalog = catalog
        self._snapshot_properties = dict(snapshot_properties or {})
        self._overwrite_filter = overwrite_filter
        self._metadata: Any = None
        self._io: Any = None
        self._write_uuid: str | None = None
        self._schema_check: TableSchemaCheck | None = None
        self._join_cols: list[str] = []

    def get_name(self) -> str:
        return "Iceberg"

    def __getstate__(self) -> dict[str, Any]:
        # Write tasks need the table's schema, spec, properties and FileIO: not the catalog (a
        # database or HTTP client), nor the table's history, which can be long.
        state = self.__dict__.copy()
        state["_catalog"] = None
        if self._metadata is not None:
            state["_metadata"] = pyiceberg_api.without_history(self._metadata)
        return state

    @property
    def mode(self) -> str:
        return self._mode

    # -- driver -----------------------------------------------------------------------------

    def _load_table(self) -> Any:
        catalog = self._catalog
        if catalog is None:
            catalog = pyiceberg_api.load_catalog(self._catalog_kwargs)
        return pyiceberg_api.load_table(catalog, self.table_identifier)

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Load the table, and check ``schema`` against it when known (before any file)."""
        table = self._load_table()
        self._metadata = table.metadata
        self._io = table.io
        self._write_uuid = new_write_uuid()
        table_schema = self._metadata.schema()
        self._schema_check = TableSchemaCheck(table_schema, self.table_identifier)
        if self._mode == "upsert":
            self._join_cols = self._resolve_join_cols(table_schema)
        if self._mode == "overwrite":
            parse_row_filter(
                self._overwrite_filter,
                table_schema,
                self._overwrite_kwargs.get("case_sensitive", True),
            )  # a filter naming an unknown column fails here, before anything is written
        if schema is not None and len(schema.names):
            self._schema_check.check(schema)
            missing = [c for c in self._join_cols if c not in schema.names]
            if missing:
                raise IcebergSchemaError(f"The dataset lacks the upsert join column(s) {missing}.")

    def _resolve_join_cols(self, table_schema: Any) -> list[str]:
        join_cols = self._upsert_kwargs.get("join_cols")
        case_sensitive = self._upsert_kwargs.get("case_sensitive", True)
        if not join_cols:
            join_cols = [
                table_schema.find_column_name(i) for i in table_schema.identifier_field_ids
            ]
            if not join_cols:
                raise ValueError(
                    f"mode='upsert' needs the columns that identify a row: give "
                    f"upsert_kwargs={{'join_cols': [...]}}, or set identifier fields on Iceberg "
                    f"table {self.table_identifier!r}."
                )
        resolved = []
        for name in join_cols:
            try:
                found = table_schema.find_field(name, case_sensitive=case_sensitive)
            except ValueError:
                raise ValueError(
                    f"Upsert join column {name!r} is not in Iceberg table "
                    f"{self.table_identifier!r} "
                    f"(columns: {', '.join(table_schema.column_names)})."
                ) from None
            resolved.append(table_schema.find_column_name(found.field_id))
        return resolved

    def on_write_complete(self, write_result: WriteResult[IcebergWriteResult]) -> None:
        """Commit every data file written, in one snapshot (see :mod:`.commit`)."""
        results = [r for r in write_result.write_returns if r is not None]
        data_files = [f for r in results for f in r.data_files]
        try:
            removal = self._removal(results)
        except Exception:
            delete_files(self._io, [f.file_path for f in data_files])
            raise
        committer = Committer(
            self._load_table, self.table_identifier, self._write_uuid, self._snapshot_properties
        )
        committer.commit(data_files, removal)

    def _removal(self, results: list[IcebergWriteResult]) -> RowRemoval | None:
        import pyarrow.compute as pc

        if self._mode == "overwrite":
            case_sensitive = self._overwrite_kwargs.get("case_sensitive", True)
            iceberg_filter, residual = parse_row_filter(
                self._overwrite_filter, self._metadata.schema(), case_sensitive
            )
            return RowRemoval(iceberg_filter, residual, case_sensitive=case_sensitive)
        if self._mode != "upsert":
            return None
        keys = concat_keys([r.upsert_keys for r in results])
        if keys is None:
            return None
        valid = None
        for name in self._join_cols:
            term = pc.is_valid(keys.column(name))
            valid = term if valid is None else pc.and_(valid, term)
        keys = keys.filter(valid)  # a null key matches no existing row (rows are inserted)
        if keys.num_rows == 0:
            return None
        distinct = keys.group_by(self._join_cols).aggregate([([], "count_all")])
        duplicated = distinct.filter(pc.greater(distinct.column("count_all"), 1))
        if duplicated.num_rows:
            example = duplicated.slice(0, 1).drop_columns(["count_all"]).to_pylist()[0]
            raise ValueError(
                f"mode='upsert' got {duplicated.num_rows} key(s) more than once in the dataset, "
                f"e.g. {example}; each value of the join columns {self._join_cols} must appear "
                "once. Nothing was committed."
            )
        return RowRemoval(keys=keys, join_cols=list(self._join_cols))

    def on_write_failed(self, error: Exception) -> None:
        """Delete every data file the write left (the table itself was not changed)."""
        if self._metadata is None or self._write_uuid is None:
            return
        deleted = delete_files_of_write(self._io, self._metadata, self._write_uuid)
        if deleted:
            logger.info(
                "Deleted %d data file(s) of the failed write to %s.",
                len(deleted),
                self.table_identifier,
            )

    # -- write tasks --------------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> IcebergWriteResult:
        """Check blocks against the table and write them as Parquet data files (uncommitted)."""
        if self._metadata is None or self._schema_check is None:
            raise RuntimeError("IcebergDatasink.write was called before on_write_start.")
        counter = task_counter(ctx.task_idx)
        pending: list[pa.Table] = []
        pending_bytes = rows = 0
        files: list[Any] = []
        keys: list[pa.Table] = []
        try:
            for block in blocks:
                if not block.num_columns and not block.num_rows:
                    continue
                self._schema_check.check(block.schema)
                if not block.num_rows:
                    continue
                conformed = self._schema_check.conform(block)
                if self._join_cols:
                    keys.append(conformed.select(self._join_cols))
                pending.append(conformed)
                pending_bytes += conformed.nbytes
                rows += conformed.num_rows
                if pending_bytes >= _BUFFER_BYTES:
                    files += self._flush(pending, counter)
                    pending, pending_bytes = [], 0
            files += self._flush(pending, counter)
        except BaseException:
            delete_files(self._io, [f.file_path for f in files])
            raise
        return IcebergWriteResult(files, concat_keys(keys), rows)

    def _flush(self, tables: list[pa.Table], counter: Any) -> list[Any]:
        if not tables:
            return []
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        return write_files(self._metadata, self._io, table, self._write_uuid, counter)
