"""HudiDatasource: reads an Apache Hudi table (see :func:`shardflow.read_hudi`).

The driver opens the table through hudi (hudi-rs) and asks it for the file slices a query
reads: a snapshot's latest slices, partitions pruned by ``filters``, or the slices an
incremental query's commits wrote. Read tasks get slices balanced by size; each reads its
slices' base files through hudi's file group reader (read-optimized, as Ray Data 2.60 reads
them) and keeps the rows that ``filters`` select.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.hudi import table_access
from shardflow.connectors.hudi.filters import check_filters, rows_filter
from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask

QUERY_TYPES = ("snapshot", "incremental")


class HudiReadTask:
    """The picklable body of one read task: read some file slices of the table."""

    def __init__(
        self,
        uri: str,
        paths: list[str],
        reader_options: dict[str, str],
        query_type: str,
        filters: list[tuple[str, str, str]],
        schema: pa.Schema,
        projection: list[tuple[str, str]] | None,
    ):
        self.uri = uri
        self.query_type = query_type
        self.paths = paths
        self.reader_options = reader_options
        self.filters = filters
        self.schema = schema  # the table's
        self.projection = projection

    def output_schema(self) -> pa.Schema:
        if self.projection is None:
            return self.schema
        return pa.schema([self.schema.field(src).with_name(out) for src, out in self.projection])

    def __call__(self) -> Iterator[Block]:
        produced = False
        predicate = rows_filter(self.filters, self.schema)
        reader = table_access.open_reader(self.uri, self.reader_options) if self.paths else None
        for path in self.paths:
            for batch in table_access.read_base_file(
                reader, self.uri, path, self.reader_options, self.query_type
            ):
                table = pa.Table.from_batches([batch])
                if predicate is not None:
                    table = table.filter(predicate)
                if self.projection is not None:
                    table = table.select([src for src, _ in self.projection])
                    table = table.rename_columns([out for _, out in self.projection])
                if table.num_rows:
                    produced = True
                    yield table
        if not produced:
            yield self.output_schema().empty_table()


class HudiDatasource(Datasource):
    """Reads an Apache Hudi table. See :func:`shardflow.read_hudi`.

    Args:
        table_uri: The table's folder or URI (``s3://bucket/table``, ...).
        query_type: ``"snapshot"`` (the latest records) or ``"incremental"`` (the records
            committed after ``hoodie.read.file_group.start_timestamp`` and up to
            ``hoodie.read.file_group.end_timestamp``, given in ``hudi_options``).
        filters: ``(column, op, value)`` tuples, all of which a row must satisfy.
        hudi_options: Hudi read configurations (``hoodie.*``).
        storage_options: hudi-rs's object store options (credentials, endpoint, region).
    """

    def __init__(
        self,
        table_uri: str,
        query_type: str = "snapshot",
        filters: list[tuple[str, str, str]] | None = None,
        hudi_options: dict[str, str] | None = None,
        storage_options: dict[str, str] | None = None,
    ):
        table_access.require_hudi()
        self.uri = table_access.table_uri(table_uri)
        if not isinstance(query_type, str) or query_type.lower() not in QUERY_TYPES:
            raise ValueError(
                f"{query_type!r} is not a valid Hudi query type: use one of {QUERY_TYPES}."
            )
        self.query_type = query_type.lower()
        self.filters = check_filters(filters)
        self.hudi_options = table_access.check_options("hudi_options", hudi_options)
        self.storage_options = table_access.check_options("storage_options", storage_options)
        table_access.incremental_bounds(self.hudi_options)  # conflicting spellings raise here
        self._plan_cache: tuple[list[table_access.SlicePlan], dict[str, str], pa.Schema] | None
        self._plan_cache = None

    def get_name(self) -> str:
        return "Hudi"

    def __repr__(self) -> str:
        return f"HudiDatasource({table_access.shown(self.uri)!r}, query_type={self.query_type!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_plan_cache"] = None
        return state

    def _plan(self) -> tuple[list[table_access.SlicePlan], dict[str, str], pa.Schema]:
        if self._plan_cache is None:
            table, reader_options = table_access.open_table(
                self.uri, self.hudi_options, self.storage_options
            )
            schema = None
            if self.filters:  # an unknown column or a bad value raises here, not in tasks
                try:
                    schema = table_access.table_schema(table, self.uri)
                except table_access.HudiTableError:
                    schema = None  # no commits yet: nothing to read, nothing to check
                if schema is not None:
                    rows_filter(self.filters, schema)
            slices = table_access.plan_slices(
                table, self.uri, self.query_type, self.filters, self.hudi_options
            )
            if schema is None:
                try:
                    schema = table_access.table_schema(table, self.uri)
                except table_access.HudiTableError:
                    if slices:
                        raise
                    schema = pa.schema([])  # no commits yet: no schema, no rows
            self._plan_cache = (slices, reader_options, schema)
        return self._plan_cache

    def _check_projection(self, schema: pa.Schema) -> None:
        projection = self.pushdowns.projection
        missing = [src for src, _ in projection or () if src not in schema.names]
        if missing:
            raise ValueError(
                f"Column(s) {missing} are not in Hudi table {table_access.shown(self.uri)} "
                f"(columns: {', '.join(schema.names)})."
            )

    def estimate_inmemory_data_size(self) -> int | None:
        slices, _, schema = self._plan()
        return int(sum(s.memory_bytes for s in slices) * self._column_share(schema))

    def _column_share(self, schema: pa.Schema) -> float:
        """The share of the table's columns the read keeps, to scale size estimates."""
        projection = self.pushdowns.projection
        if projection is None or not len(schema):
            return 1.0
        return max(len(projection), 1) / len(schema)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        slices, reader_options, schema = self._plan()
        if len(schema):  # a table without commits has no schema to check against
            self._check_projection(schema)
        projection = self.pushdowns.projection
        limit = self.effective_pushdowns(per_task_row_limit).limit
        share = self._column_share(schema)
        if not slices and len(schema):
            # Nothing to read, but the table has a schema: one task gives it to the dataset.
            task = HudiReadTask(
                self.uri,
                [],
                reader_options,
                self.query_type,
                [],
                schema,
                None if projection is None else list(projection),
            )
            return [ReadTask(task, BlockMetadata(0, 0, input_files=[]), task.output_schema())]
        tasks = []
        for group in _balance([s.size_bytes for s in slices], max(1, int(parallelism))):
            members = [slices[i] for i in group]
            counts = [s.num_rows for s in members]
            exact = not self.filters and all(c is not None for c in counts)
            num_rows = sum(c for c in counts if c is not None) if exact else None
            if num_rows is not None and limit is not None:
                num_rows = min(num_rows, limit)
            metadata = BlockMetadata(
                num_rows=num_rows,
                size_bytes=int(sum(s.memory_bytes for s in members) * share),
                input_files=[f"{self.uri}/{s.relative_path}" for s in members],
            )
            task = HudiReadTask(
                self.uri,
                [s.relative_path for s in members],
                reader_options,
                self.query_type,
                self.filters,
                schema,
                None if projection is None else list(projection),
            )
            tasks.append(ReadTask(task, metadata, task.output_schema(), limit))
        return tasks

    # Read tasks run in threads on the local backend although hudi's reader holds the GIL
    # while it reads a file (reads_hold_the_gil() stays False): for tables of a few hundred
    # MiB, starting worker processes costs more than the reads they would overlap
    # (benchmarks/README.md, B20).

    # -- pushdown capabilities ------------------------------------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True  # tasks drop the other columns as they read (Hudi reads whole rows)


def _balance(sizes: list[int], parallelism: int) -> list[list[int]]:
    """Slice indices in at most ``parallelism`` groups of similar total size, each group in
    the table's order (largest slices first into the lightest group)."""
    groups = min(parallelism, len(sizes))
    heap = [(0, g) for g in range(groups)]
    members: list[list[int]] = [[] for _ in range(groups)]
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        total, g = heapq.heappop(heap)
        members[g].append(index)
        heapq.heappush(heap, (total + sizes[index], g))
    return [sorted(m) for m in members if m]
