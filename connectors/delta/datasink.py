"""DeltaDatasink: writes a dataset into a Delta Lake table in one transaction
(see :meth:`shardflow.Dataset.write_delta`).

Write tasks write Parquet data files (named after the write's id) under the table's folder,
hive-style folders for partitions, and return their AddActions; the driver then commits all
of them in one Delta transaction through deltalake (creating the table when it does not
exist). Until that commit no reader sees the files; when a task or the commit fails, every
file of the write is deleted and the table is as it was.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shardflow.connectors.delta import files, table_access
from shardflow.connectors.delta.schemas import conform, delta_ready_schema, merge_schemas
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import Datasink, TaskCancelled, TaskContext, WriteResult
from shardflow.sdk.save_mode import SaveMode, to_save_mode

logger = logging.getLogger(__name__)

MODES = (SaveMode.APPEND, SaveMode.OVERWRITE)


@dataclass
class DeltaWriteResult:
    """What one write task returns: the AddActions of its files (not committed yet) and the
    schema of what it wrote."""

    add_actions: list[Any] = field(default_factory=list)
    schema: pa.Schema | None = None
    num_rows: int = 0


class DeltaWriteError(RuntimeError):
    """A write to a Delta table failed; the message names the table and the step."""


class DeltaDatasink(Datasink[DeltaWriteResult]):
    """Writes into a Delta Lake table, creating it if needed. See
    :meth:`shardflow.Dataset.write_delta`."""

    #: A write task writes a data file once this many bytes of one partition are waiting.
    file_bytes = 128 * 1024 * 1024

    def __init__(
        self,
        path: str,
        *,
        mode: Any = SaveMode.APPEND,
        partition_by: list[str] | None = None,
        storage_options: dict[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
    ):
        table_access.require_deltalake("write_delta")
        self.uri = table_access.table_uri(path)
        self.mode = to_save_mode(mode, MODES)
        if partition_by is not None and (
            isinstance(partition_by, str)
            or not isinstance(partition_by, (list, tuple))
            or not all(isinstance(c, str) for c in partition_by)
        ):
            raise TypeError(f"partition_by must be a list of column names, got {partition_by!r}.")
        for text, label in ((name, "name"), (description, "description")):
            if text is not None and not isinstance(text, str):
                raise TypeError(f"{label} must be a string, got {type(text).__name__}.")
        self.partition_by = list(partition_by or [])
        self._storage_options = table_access.check_storage_options(storage_options)
        self._name, self._description = name, description
        self._write_id: str | None = None
        self._table_schema: pa.Schema | None = None
        self._exists = False
        self._root_existed = True
        self._dataset_schema: pa.Schema | None = None

    def get_name(self) -> str:
        return "Delta"

    def __repr__(self) -> str:
        return f"DeltaDatasink({table_access.shown(self.uri)!r}, mode={self.mode.value!r})"

    def _where(self) -> str:
        return f"Delta table {table_access.shown(self.uri)}"

    def _fail(self, step: str, exc: BaseException) -> DeltaWriteError:
        return DeltaWriteError(f"{self._where()}: {step} failed: {type(exc).__name__}: {exc}")

    # -- driver -----------------------------------------------------------------------------

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Read the table's schema and partition columns when it exists; check the dataset's
        schema against them when known (before any file is written)."""
        self._write_id = uuid.uuid4().hex
        self._exists = table_access.table_exists(self.uri, self._storage_options)
        self._root_existed = not table_access.is_local(self.uri) or os.path.isdir(self.uri)
        self._table_schema = None
        self._dataset_schema = schema if schema is not None and len(schema.names) else None
        if self._exists:
            table = table_access.open_table(self.uri, self._storage_options)
            existing = list(table.metadata().partition_columns)
            if self.partition_by and self.partition_by != existing:
                raise ValueError(
                    f"{self._where()} is partitioned by {existing}, not {self.partition_by}; "
                    "write with the table's partition columns (or partition_by=None)."
                )
            self.partition_by = existing
            if self.mode == SaveMode.APPEND:
                self._table_schema = pa.schema(table.schema().to_arrow())
        if schema is not None and len(schema.names):
            self._check(schema)

    def _check(self, schema: pa.Schema) -> None:
        missing = [c for c in self.partition_by if c not in schema.names]
        if missing:
            raise ValueError(
                f"{self._where()}: the dataset lacks the partition column(s) {missing}."
            )
        if self._table_schema is not None:
            merge_schemas(self._table_schema, schema, self._where())
        else:
            delta_ready_schema(schema, self._where())

    def on_write_complete(self, write_result: WriteResult[DeltaWriteResult]) -> None:
        """Commit every file written, in one Delta transaction."""
        results = [r for r in write_result.write_returns if r is not None]
        actions = [a for r in results for a in r.add_actions]
        try:
            schema = self._commit_schema([r.schema for r in results if r.schema is not None])
            if schema is None:
                return  # no rows and no schema: nothing to create or change
            self._commit(actions, schema)
        except BaseException as exc:
            self._delete_files()
            if isinstance(exc, (ValueError, TypeError)):
                raise
            raise self._fail("the commit", exc) from exc

    def _commit_schema(self, schemas: list[pa.Schema]) -> pa.Schema | None:
        if self._table_schema is not None:
            return self._table_schema
        if not schemas and self._dataset_schema is not None:
            schemas = [self._dataset_schema]  # no task saw a block: the schema planned
        if not schemas:
            return None
        return delta_ready_schema(pa.unify_schemas(schemas), self._where())

    def _commit(self, actions: list[Any], schema: pa.Schema) -> None:
        from deltalake import Schema as DeltaSchema
        from deltalake.transaction import create_table_with_add_actions

        if not self._exists:
            create_table_with_add_actions(
                self.uri,
                DeltaSchema.from_arrow(schema),
                actions,
                mode="error",
                partition_by=self.partition_by or None,
                name=self._name,
                description=self._description,
                storage_options=self._storage_options or None,
            )
            return
        table = table_access.open_table(self.uri, self._storage_options)
        table.create_write_transaction(
            actions,
            mode=self.mode.value,
            schema=schema,
            partition_by=self.partition_by or None,
        )

    def on_write_failed(self, error: Exception) -> None:
        """Delete every data file of the write: the table's log was not touched."""
        self._delete_files()

    def _delete_files(self) -> None:
        if self._write_id is None:
            return
        try:
            filesystem = table_access.filesystem(self.uri, self._storage_options)
            leftover = files.files_of_write(filesystem, self._write_id)
            files.delete_paths(filesystem, leftover)
            if table_access.is_local(self.uri):
                files.remove_empty_folders(filesystem)
                if not self._root_existed and not os.listdir(self.uri):
                    os.rmdir(self.uri)
        except Exception as exc:
            logger.warning(
                "Could not delete the files of the failed write to %s: %s", self._where(), exc
            )

    # -- write tasks ------------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> DeltaWriteResult:
        """Write the blocks as Parquet data files (not committed) and return their actions."""
        if self._write_id is None:
            raise RuntimeError("DeltaDatasink.write was called before on_write_start.")
        if table_access.is_local(self.uri):
            os.makedirs(self.uri, exist_ok=True)
        filesystem = table_access.filesystem(self.uri, self._storage_options)
        result = DeltaWriteResult()
        pending: dict[tuple, list[pa.Table]] = {}
        pending_bytes: dict[tuple, int] = {}
        counter = [0]
        written: list[str] = []
        try:
            for block in blocks:
                if ctx.cancelled():
                    raise TaskCancelled(f"the write to {self._where()} was cancelled")
                if not block.num_columns:
                    continue
                block = self._prepare(block)
                if result.schema is None:
                    result.schema = block.schema
                if not block.num_rows:
                    continue
                for key, part in self._split(block):
                    pending.setdefault(key, []).append(part)
                    pending_bytes[key] = pending_bytes.get(key, 0) + part.nbytes
                    if pending_bytes[key] >= self.file_bytes:
                        self._flush(
                            filesystem, key, pending.pop(key), ctx, counter, result, written
                        )
                        pending_bytes.pop(key)
            for key in list(pending):
                self._flush(filesystem, key, pending.pop(key), ctx, counter, result, written)
        except BaseException:
            files.delete_paths(filesystem, written)
            raise
        return result

    def _prepare(self, block: pa.Table) -> pa.Table:
        if self._table_schema is not None:
            return conform(block, self._table_schema, self._where())
        missing = [c for c in self.partition_by if c not in block.column_names]
        if missing:
            raise ValueError(
                f"{self._where()}: the dataset lacks the partition column(s) {missing}."
            )
        return block.cast(delta_ready_schema(block.schema, self._where()))

    def _split(self, block: pa.Table) -> Iterable[tuple[tuple, pa.Table]]:
        if not self.partition_by:
            yield (), block
            return
        keys = block.select(self.partition_by)
        groups = keys.group_by(self.partition_by, use_threads=False).aggregate([])
        if groups.num_rows == 1:
            yield tuple(groups.to_pylist()[0][c] for c in self.partition_by), block
            return
        import pyarrow.compute as pc

        for values in groups.to_pylist():
            mask = None
            for column in self.partition_by:
                value = values[column]
                term = (
                    pc.is_null(block.column(column))
                    if value is None
                    else pc.equal(
                        block.column(column), pa.scalar(value, block.schema.field(column).type)
                    )
                )
                term = pc.fill_null(term, False)
                mask = term if mask is None else pc.and_(mask, term)
            yield tuple(values[c] for c in self.partition_by), block.filter(mask)

    def _flush(
        self,
        filesystem: Any,
        key: tuple,
        tables: list[pa.Table],
        ctx: TaskContext,
        counter: list[int],
        result: DeltaWriteResult,
        written: list[str],
    ) -> None:
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        texts = [files.partition_value_text(v) for v in key]
        data = table.drop_columns(self.partition_by) if self.partition_by else table
        folder = files.partition_folder(self.partition_by, texts) if self.partition_by else ""
        name = files.file_name(self._write_id or "", ctx.task_idx, counter[0])
        counter[0] += 1
        relative = f"{folder}/{name}" if folder else name
        try:
            size = files.write_parquet(filesystem, relative, data)
        except Exception as exc:
            raise self._fail(f"writing data file {relative}", exc) from exc
        written.append(relative)
        result.num_rows += table.num_rows
        result.add_actions.append(
            files.add_action(
                relative,  # deltalake percent-encodes it in the log
                size,
                dict(zip(self.partition_by, texts)),
                files.statistics(data),
            )
        )
