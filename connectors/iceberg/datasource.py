"""IcebergDatasource: reads an Iceberg table (see :func:`shardflow.read_iceberg`)."""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.connectors.iceberg import pyiceberg_api
from shardflow.connectors.iceberg.expressions import (
    check_row_filter,
    parse_row_filter,
    split_predicate,
)
from shardflow.connectors.iceberg.planning import PlannedFile, balance, plan_files, resolve_snapshot
from shardflow.connectors.iceberg.reading import DeleteCache, ReadContext, read_planned_file
from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.expressions import Expr
from shardflow.sdk.file_reading import file_error
from shardflow.sdk.pushdowns import Pushdowns
from shardflow.sdk.retry import RetryConfig, is_transient_error

logger = logging.getLogger(__name__)

_SCAN_KWARGS = ("case_sensitive", "options", "limit", "snapshot_id")
# Decoded Arrow bytes per byte of Parquet, for size estimates (as for Parquet files).
_ENCODING_RATIO = 5.0


def _as_millis(as_of_timestamp: Any) -> int | None:
    if as_of_timestamp is None:
        return None
    if isinstance(as_of_timestamp, datetime.datetime):
        moment = as_of_timestamp
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
        return int(moment.timestamp() * 1000)
    if isinstance(as_of_timestamp, int) and not isinstance(as_of_timestamp, bool):
        return as_of_timestamp
    raise TypeError(
        "as_of_timestamp must be a datetime (naive means UTC) or milliseconds since the epoch; "
        f"got {type(as_of_timestamp).__name__}."
    )


@dataclass
class _Scan:
    """A planned scan, cached on the datasource between planning calls."""

    context: ReadContext
    files: list[PlannedFile]
    field_ids: set | None
    table_name: str


class IcebergReadTask:
    """The picklable body of one read task: the planned files of one group, read in order."""

    def __init__(
        self,
        context: ReadContext,
        files: Sequence[PlannedFile],
        table_name: str,
        retry: RetryConfig,
        batch_size: int | None = None,
    ):
        self.context = context
        self.files = list(files)
        self.table_name = table_name
        self.retry = retry
        self.batch_size = batch_size

    def __call__(self) -> Iterator[Block]:
        deletes = DeleteCache()
        produced = False
        for planned in self.files:
            for block in self._read_with_retries(planned, deletes):
                produced = True
                yield block
        if not produced:
            yield self.context.output_schema.empty_table()

    def _read_with_retries(self, planned: PlannedFile, deletes: DeleteCache) -> Iterator[Block]:
        emitted, attempt = 0, 1
        where = f"{planned.path} (a data file of Iceberg table {self.table_name})"
        while True:
            to_skip = emitted
            try:
                for block in read_planned_file(self.context, planned, deletes, self.batch_size):
                    if not block.num_rows:
                        continue
                    if to_skip:
                        if block.num_rows <= to_skip:
                            to_skip -= block.num_rows
                            continue
                        block, to_skip = block.slice(to_skip), 0
                    emitted += block.num_rows
                    yield block
                return
            except Exception as exc:
                if is_transient_error(exc) and attempt < self.retry.max_attempts:
                    wait = self.retry.backoff_s(attempt)
                    logger.info(
                        "Transient error reading %s, retrying in %.2fs: %s", where, wait, exc
                    )
                    time.sleep(wait)
                    attempt += 1
                    continue
                raise file_error(exc, where, attempt) from exc


class IcebergDatasource(Datasource):
    """Reads an Iceberg table through its catalog. See :func:`shardflow.read_iceberg`.

    Scan planning (manifests, partition pruning, file statistics, delete files) runs on the
    driver; read tasks read data files through the Parquet reader of the SDK, honouring
    position and equality deletes. Projection, filter and limit pushdown are supported; the
    filter is exact.
    """

    def __init__(
        self,
        table_identifier: str,
        row_filter: str | Any | Expr | None = None,
        selected_fields: tuple[str, ...] = ("*",),
        snapshot_id: int | None = None,
        scan_kwargs: dict[str, Any] | None = None,
        catalog_kwargs: dict[str, Any] | None = None,
        *,
        catalog: Any = None,
        as_of_timestamp: datetime.datetime | int | None = None,
    ):
        pyiceberg_api.require_pyiceberg("read_iceberg")
        if not isinstance(table_identifier, str) or not table_identifier.strip():
            raise ValueError(
                "table_identifier must be a table name such as 'db.table', "
                f"got {table_identifier!r}."
            )
        if isinstance(selected_fields, str) or not all(isinstance(c, str) for c in selected_fields):
            raise TypeError(
                f"selected_fields must be a tuple of column names, got {selected_fields!r}."
            )
        scan_kwargs = dict(scan_kwargs or {})
        unknown = sorted(set(scan_kwargs) - set(_SCAN_KWARGS))
        if unknown:
            raise TypeError(
                f"Unknown scan_kwargs {unknown}; read_iceberg accepts {list(_SCAN_KWARGS)}."
            )
        if "snapshot_id" in scan_kwargs:
            if snapshot_id is not None and snapshot_id != scan_kwargs["snapshot_id"]:
                raise ValueError("snapshot_id and scan_kwargs['snapshot_id'] differ; give one.")
            snapshot_id = scan_kwargs.pop("snapshot_id")
        if snapshot_id is not None and (
            isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int)
        ):
            raise TypeError(f"snapshot_id must be an int, got {snapshot_id!r}.")
        if snapshot_id is not None and as_of_timestamp is not None:
            raise ValueError("Give snapshot_id or as_of_timestamp, not both.")
        if catalog_kwargs is not None and not isinstance(catalog_kwargs, dict):
            raise TypeError("catalog_kwargs must be a dict of catalog properties.")
        if catalog is not None and catalog_kwargs:
            raise ValueError("catalog_kwargs cannot be given together with catalog.")
        if catalog is not None and not hasattr(catalog, "load_table"):
            raise TypeError(f"catalog must be a pyiceberg Catalog, got {type(catalog).__name__}.")
        if not isinstance(scan_kwargs.get("case_sensitive", True), bool):
            raise TypeError("scan_kwargs['case_sensitive'] must be a bool.")
        check_row_filter(row_filter)
        self.table_identifier = table_identifier
        self._row_filter = row_filter
        self._snapshot_id = snapshot_id
        self._as_of_ms = _as_millis(as_of_timestamp)
        self._case_sensitive = scan_kwargs.pop("case_sensitive", True)
        self._options = dict(scan_kwargs.pop("options", None) or {})
        self._catalog_kwargs = dict(catalog_kwargs or {})
        self._catalog = catalog
        self._catalog_given = catalog is not None
        self._table: Any = None
        self._scan_cache: _Scan | None = None
        pushdowns = Pushdowns(limit=scan_kwargs.pop("limit", None))
        if tuple(selected_fields) != ("*",):
            pushdowns = pushdowns.with_projection({c: c for c in selected_fields})
        self._pushdowns = pushdowns

    def get_name(self) -> str:
        return "Iceberg"

    def __repr__(self) -> str:
        return f"IcebergDatasource(table_identifier={self.table_identifier!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_table"] = None
        state["_scan_cache"] = None
        state["_catalog"] = None  # a catalog (a database or HTTP client) stays in its process
        return state

    def with_pushdowns(self, pushdowns: Pushdowns) -> IcebergDatasource:
        clone = super().with_pushdowns(pushdowns)
        clone._scan_cache = None  # planned with other columns or another filter
        return clone

    # -- planning (driver) ----------------------------------------------------------------

    def _load_table(self) -> Any:
        if self._table is None:
            catalog = self._catalog
            if catalog is None and self._catalog_given:
                raise RuntimeError(
                    f"This source of Iceberg table {self.table_identifier!r} was given a catalog "
                    "object, which does not travel to another process; pass catalog_kwargs to "
                    "plan the read there."
                )
            if catalog is None:
                catalog = pyiceberg_api.load_catalog(self._catalog_kwargs)
            self._table = pyiceberg_api.load_table(catalog, self.table_identifier)
        return self._table

    def _plan(self) -> _Scan:
        if self._scan_cache is not None:
            return self._scan_cache
        from pyiceberg.expressions import AlwaysTrue, And

        table = self._load_table()
        metadata = table.metadata
        snapshot = resolve_snapshot(metadata, self._snapshot_id, self._as_of_ms)
        schema = metadata.schema()
        if snapshot is not None and snapshot.schema_id is not None:
            schema = next(
                (s for s in metadata.schemas if s.schema_id == snapshot.schema_id), schema
            )
        cs = self._case_sensitive
        user_filter, user_rest = parse_row_filter(self._row_filter, metadata.schema(), cs)
        pushed_filter, pushed_rest = split_predicate(self.pushdowns.filter, metadata.schema(), cs)
        row_filter = user_filter
        if not isinstance(pushed_filter, AlwaysTrue):
            row_filter = (
                pushed_filter
                if isinstance(row_filter, AlwaysTrue)
                else And(row_filter, pushed_filter)
            )
        rests = [r for r in (user_rest, pushed_rest) if r is not None]
        residual = rests[0] if len(rests) == 1 else (rests[0] & rests[1] if rests else None)
        projection, field_ids = self._resolve_projection(schema)
        columns = [src for src, _ in projection] if projection is not None else schema.column_names
        arrow = (
            pyiceberg_api.arrow_schema(schema.select(*columns, case_sensitive=True))
            if columns
            else pa.schema([])
        )
        by_name = {f.name: f for f in arrow}
        if projection is None:
            output_schema = pa.schema([by_name[c] for c in columns])
        else:
            output_schema = pa.schema([by_name[src].with_name(out) for src, out in projection])
        context = ReadContext(
            io=table.io,
            schema=schema,
            specs=metadata.specs(),
            name_mapping=metadata.name_mapping(),
            format_version=metadata.format_version,
            row_filter=row_filter,
            residual=residual,
            projection=projection,
            output_schema=output_schema,
            case_sensitive=cs,
        )
        files = plan_files(metadata, table.io, snapshot, row_filter, cs, self._options)
        self._scan_cache = _Scan(context, files, field_ids, self.table_identifier)
        return self._scan_cache

    def _resolve_projection(
        self, schema: Any
    ) -> tuple[tuple[tuple[str, str], ...] | None, set | None]:
        """The projection with the table's spelling of each column, and their field ids."""
        projection = self.pushdowns.projection
        if projection is None:
            return None, None
        resolved, ids = [], set()
        for src, out in projection:
            try:
                field = schema.find_field(src, case_sensitive=self._case_sensitive)
            except ValueError:
                raise ValueError(
                    f"Column {src!r} is not in Iceberg table {self.table_identifier!r} "
                    f"(columns: {', '.join(schema.column_names)})."
                ) from None
            resolved.append((schema.find_column_name(field.field_id), out))
            ids.add(field.field_id)
        return tuple(resolved), ids

    def _estimate(self, planned: PlannedFile, field_ids: set | None) -> int:
        data_file = planned.data_file
        sizes = data_file.column_sizes
        on_disk = planned.size
        if field_ids is not None and sizes and field_ids <= set(sizes):
            on_disk = sum(sizes[i] for i in field_ids)
        return int(on_disk * _ENCODING_RATIO)

    def estimate_inmemory_data_size(self) -> int | None:
        scan = self._plan()
        return sum(self._estimate(f, scan.field_ids) for f in scan.files)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
    ) -> list[ReadTask]:
        scan = self._plan()
        if not scan.files:
            return []
        limit = self.effective_pushdowns(per_task_row_limit).limit
        retry = RetryConfig.from_data_context(data_context)
        exact = scan.context.residual is None
        tasks = []
        for group in balance(scan.files, max(1, int(parallelism))):
            rows = [f.rows_if_exact() for f in group]
            num_rows = sum(rows) if exact and all(r is not None for r in rows) else None
            metadata = BlockMetadata(
                num_rows=num_rows if limit is None or num_rows is None else min(num_rows, limit),
                size_bytes=sum(self._estimate(f, scan.field_ids) for f in group),
                input_files=[f.path for f in group],
            )
            task = IcebergReadTask(scan.context, group, scan.table_name, retry)
            tasks.append(ReadTask(task, metadata, scan.context.output_schema, limit))
        return tasks

    # -- pushdown capabilities ------------------------------------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def is_predicate_pushdown_exact(self) -> bool:
        # What Iceberg cannot evaluate is applied by the read tasks with Arrow.
        return True
