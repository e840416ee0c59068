"""DeltaDatasource: reads a Delta Lake table (see :func:`shardflow.read_delta`).

The driver reads the table's log at the requested version through deltalake and gets one
Parquet fragment per data file, each carrying its partition values and column statistics
as a guarantee; a filter prunes fragments on the driver (partition pruning and statistics)
and is applied exactly to the rows read. Read tasks get fragments balanced by size and scan
them with Arrow, reading only the projected columns.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.connectors.delta import table_access
from shardflow.sdk.block import Block, BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.expressions import Expr
from shardflow.sdk.file_reading import file_error
from shardflow.sdk.pushdowns import Pushdowns

# Decoded Arrow bytes per byte of Parquet, for size estimates (as for Parquet files).
_ENCODING_RATIO = 5.0
_BATCH_ROWS = 131_072


def _to_arrow_filter(filter: Any) -> Any:
    """A pyarrow compute expression from a shardflow expression or a pyarrow one."""
    import pyarrow.compute as pc

    if filter is None or isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, Expr):
        return filter.to_pyarrow()
    raise TypeError(
        "filter must be a shardflow expression (sf.col('x') > 3) or a "
        f"pyarrow.compute.Expression, got {type(filter).__name__}."
    )


@dataclass
class _Scan:
    """A planned scan: fragments that may hold matching rows, and how to read them."""

    fragments: list[Any]
    sizes: list[int]
    rows: list[int | None]
    dataset_schema: pa.Schema
    columns: list[str] | None  # source columns to read, None for all
    output_schema: pa.Schema
    filter: Any  # pyarrow expression applied to rows, or None


class DeltaReadTask:
    """The picklable body of one read task: scan some fragments of the table."""

    def __init__(self, scan: _Scan, indices: list[int], where: str, rename: list[str] | None):
        self.fragments = [scan.fragments[i] for i in indices]
        self.dataset_schema = scan.dataset_schema
        self.columns = scan.columns
        self.filter = scan.filter
        self.output_schema = scan.output_schema
        self.where = where
        self.rename = rename

    def __call__(self) -> Iterator[Block]:
        produced = False
        for fragment in self.fragments:
            try:
                batches = fragment.to_batches(
                    schema=self.dataset_schema,
                    columns=self.columns,
                    filter=self.filter,
                    batch_size=_BATCH_ROWS,
                )
                for batch in batches:
                    if not batch.num_rows:
                        continue
                    table = pa.Table.from_batches([batch])
                    if self.rename is not None:
                        table = table.rename_columns(self.rename)
                    produced = True
                    yield table
            except Exception as exc:
                raise file_error(exc, f"{fragment.path} (a data file of {self.where})", 1) from exc
        if not produced:
            yield self.output_schema.empty_table()


class DeltaDatasource(Datasource):
    """Reads a Delta Lake table. See :func:`shardflow.read_delta`.

    Args:
        path: The table's folder or URI.
        version: The version to read (time travel); the latest by default.
        columns: Columns to read; all by default.
        filter: Rows to read: a shardflow expression or a pyarrow compute expression. Data
            files that cannot hold matching rows are skipped (partition values, statistics).
        storage_options: deltalake's object store options (credentials, endpoint, region).
    """

    def __init__(
        self,
        path: str,
        version: int | None = None,
        *,
        columns: list[str] | None = None,
        filter: Any = None,
        storage_options: dict[str, str] | None = None,
    ):
        table_access.require_deltalake("read_delta")
        self.uri = table_access.table_uri(path)
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or version < 0
        ):
            raise ValueError(f"version must be an int >= 0 (a table version), got {version!r}.")
        if columns is not None and (
            isinstance(columns, str) or not all(isinstance(c, str) for c in columns)
        ):
            raise TypeError(f"columns must be a list of column names, got {columns!r}.")
        self.version = version
        self._filter = _to_arrow_filter(filter)
        self._storage_options = table_access.check_storage_options(storage_options)
        self._scan_cache: _Scan | None = None
        if columns is not None:
            self._pushdowns = Pushdowns().with_projection({c: c for c in columns})

    def get_name(self) -> str:
        return "Delta"

    def __repr__(self) -> str:
        return f"DeltaDatasource({table_access.shown(self.uri)!r}, version={self.version})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_scan_cache"] = None
        return state

    def with_pushdowns(self, pushdowns: Pushdowns) -> DeltaDatasource:
        clone = super().with_pushdowns(pushdowns)
        assert isinstance(clone, DeltaDatasource)
        clone._scan_cache = None
        return clone

    def _where(self) -> str:
        version = "" if self.version is None else f" at version {self.version}"
        return f"Delta table {table_access.shown(self.uri)}{version}"

    def _plan(self) -> _Scan:
        if self._scan_cache is not None:
            return self._scan_cache
        table = table_access.open_table(self.uri, self._storage_options, self.version)
        filesystem = (
            table_access.filesystem(self.uri, self._storage_options)
            if table_access.is_local(self.uri)
            else None
        )
        try:
            dataset = table.to_pyarrow_dataset(filesystem=filesystem)
        except Exception as exc:
            raise ValueError(f"{self._where()} cannot be read: {exc}") from exc
        schema = dataset.schema
        predicate = self._filter
        pushed = self.pushdowns.filter
        if pushed is not None:
            pushed_arrow = pushed.to_pyarrow()
            predicate = pushed_arrow if predicate is None else predicate & pushed_arrow
        projection = self.pushdowns.projection
        if projection is not None:
            missing = [src for src, _ in projection if src not in schema.names]
            if missing:
                raise ValueError(
                    f"Column(s) {missing} are not in {self._where()} "
                    f"(columns: {', '.join(schema.names)})."
                )
        try:
            fragments = list(dataset.get_fragments(filter=predicate))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise ValueError(
                f"filter {predicate} does not apply to {self._where()}: {exc}"
            ) from exc
        actions = pa.table(table.get_add_actions(flatten=True))
        stats = {
            p: (s, n)
            for p, s, n in zip(
                actions.column("path").to_pylist(),
                actions.column("size_bytes").to_pylist(),
                actions.column("num_records").to_pylist()
                if "num_records" in actions.column_names
                else [None] * actions.num_rows,
            )
        }
        sizes, rows = [], []
        for fragment in fragments:
            size, count = stats.get(_relative(fragment.path, self.uri), (None, None))
            sizes.append(int(size or 0))
            rows.append(None if count is None or predicate is not None else int(count))
        columns = None if projection is None else [src for src, _ in projection]
        fields = [schema.field(c) for c in (columns or schema.names)]
        if projection is not None:
            fields = [f.with_name(out) for f, (_, out) in zip(fields, projection)]
        self._scan_cache = _Scan(
            fragments, sizes, rows, schema, columns, pa.schema(fields), predicate
        )
        return self._scan_cache

    def estimate_inmemory_data_size(self) -> int | None:
        scan = self._plan()
        return int(sum(scan.sizes) * _ENCODING_RATIO)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        scan = self._plan()
        if not scan.fragments:
            return []
        limit = self.effective_pushdowns(per_task_row_limit).limit
        projection = self.pushdowns.projection
        rename = None
        if projection is not None and any(src != out for src, out in projection):
            rename = [out for _, out in projection]
        tasks = []
        for group in _balance(scan.sizes, max(1, int(parallelism))):
            counts = [scan.rows[i] for i in group]
            num_rows = sum(c for c in counts if c is not None)
            exact = all(c is not None for c in counts)
            metadata = BlockMetadata(
                num_rows=(num_rows if limit is None else min(num_rows, limit)) if exact else None,
                size_bytes=int(sum(scan.sizes[i] for i in group) * _ENCODING_RATIO),
                input_files=[scan.fragments[i].path for i in group],
            )
            task = DeltaReadTask(scan, group, self._where(), rename)
            tasks.append(ReadTask(task, metadata, scan.output_schema, limit))
        return tasks

    # -- pushdown capabilities ------------------------------------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def is_predicate_pushdown_exact(self) -> bool:
        return True  # the scan applies the filter to every row it reads


def _relative(path: str, uri: str) -> str:
    root = uri.rstrip("/") + "/"
    return path[len(root) :] if path.startswith(root) else path.lstrip("/")


def _balance(sizes: list[int], parallelism: int) -> list[list[int]]:
    """Fragment indices in at most ``parallelism`` groups of similar total size, each group
    in the table's file order (largest files first into the lightest group)."""
    groups = min(parallelism, len(sizes))
    heap = [(0, g) for g in range(groups)]
    members: list[list[int]] = [[] for _ in range(groups)]
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        total, g = heapq.heappop(heap)
        members[g].append(index)
        heapq.heappush(heap, (total + sizes[index], g))
    return [sorted(m) for m in members if m]
