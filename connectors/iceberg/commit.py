"""The driver's commit of a write: one catalog commit holding every data file written.

``append`` adds the files. ``overwrite`` and ``upsert`` also remove rows: the data files that
may hold such rows are planned (with their delete files), files whose every row goes are
dropped unread, and the others are read, their surviving rows written to new files, and
replaced. Added and removed files go into one snapshot, so readers see all of the write or
none of it.

A commit that meets a concurrent one (pyiceberg's own retries exhausted, or a conflicting
change found by its validation) is planned again on the table's fresh state, a few times;
then the write fails with :class:`IcebergCommitConflictError`. Whenever the write does not
commit, every file it wrote is deleted and the table is left as it was.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shardflow.connectors.iceberg import pyiceberg_api
from shardflow.connectors.iceberg.planning import PlannedFile, plan_files
from shardflow.connectors.iceberg.reading import (
    DeleteCache,
    ReadContext,
    read_planned_file,
    rows_in,
)
from shardflow.connectors.iceberg.writing import REWRITE_COUNTER_START, delete_files, write_files
from shardflow.sdk.expressions import Expr

logger = logging.getLogger(__name__)

WRITE_ID_PROPERTY = "shardflow.write-id"
_IN_LIST_LIMIT = 1000  # upsert keys matched with IN (...) up to this many; a range beyond


class IcebergCommitConflictError(RuntimeError):
    """Concurrent commits kept conflicting with this write; nothing was committed."""


@dataclass
class RowRemoval:
    """Which existing rows a commit removes: those matching ``iceberg_filter`` and ``residual``
    (an overwrite), or whose ``join_cols`` equal a row of ``keys`` (an upsert)."""

    iceberg_filter: Any = None
    residual: Expr | None = None
    keys: pa.Table | None = None
    join_cols: list[str] = field(default_factory=list)
    case_sensitive: bool = True

    def whole_file(self, planned: PlannedFile) -> bool:
        """Whether every row of the file goes, known from its partition alone."""
        from pyiceberg.expressions import AlwaysTrue

        return (
            self.keys is None and self.residual is None and isinstance(planned.residual, AlwaysTrue)
        )

    def removed(self, table: pa.Table, schema: Any) -> Any:
        """Boolean mask of the rows of ``table`` (all columns, table names) that go."""
        import numpy as np
        import pyarrow.compute as pc
        from pyiceberg.expressions.visitors import bind
        from pyiceberg.io.pyarrow import expression_to_pyarrow

        if self.keys is not None:
            return rows_in(table, self.keys, self.join_cols)
        mask = np.ones(table.num_rows, dtype=bool)
        for expr in (
            expression_to_pyarrow(bind(schema, self.iceberg_filter, self.case_sensitive), schema),
            None if self.residual is None else self.residual.to_pyarrow(),
        ):
            if expr is None:
                continue
            result = _evaluate(table, expr)
            mask &= np.asarray(
                pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool
            )
        return mask


def _evaluate(table: pa.Table, expr: Any) -> pa.ChunkedArray:
    import pyarrow.dataset as pads

    return pads.dataset(table).to_table(columns={"m": expr}).column("m")


class Committer:
    """Commits the data files of one write. Built on the driver by the datasink.

    Args:
        load_table: Returns the table's current state (called again for every attempt).
        table_name: For messages.
        write_uuid: The write's id; recorded in the snapshot summary and in file names.
        snapshot_properties: Extra snapshot summary properties.
        max_attempts: Plans on fresh table states before giving up on conflicts.
    """

    def __init__(
        self,
        load_table: Callable[[], Any],
        table_name: str,
        write_uuid: str,
        snapshot_properties: dict[str, str],
        max_attempts: int = 5,
    ):
        self._load_table = load_table
        self._table_name = table_name
        self._write_uuid = write_uuid
        self._properties = {**snapshot_properties, WRITE_ID_PROPERTY: write_uuid}
        self._max_attempts = max_attempts

    def commit(self, data_files: list[Any], removal: RowRemoval | None) -> None:
        """Commit ``data_files`` (and the removal); on failure delete them and raise."""
        from pyiceberg.exceptions import CommitFailedException, ValidationException

        if not data_files and removal is None:
            return
        io = None
        last: BaseException | None = None
        for attempt in range(1, self._max_attempts + 1):
            rewritten: list[Any] = []
            try:
                table = self._load_table()
                io = table.io
                txn = table.transaction()
                removed, rewritten = self._stage_removal(table, removal, attempt)
                if removed:
                    with txn.update_snapshot(
                        snapshot_properties=self._properties
                    ).overwrite() as snap:
                        for data_file in removed:
                            snap.delete_data_file(data_file)
                        for data_file in rewritten + data_files:
                            snap.append_data_file(data_file)
                elif data_files:
                    with txn.update_snapshot(
                        snapshot_properties=self._properties
                    ).fast_append() as app:
                        for data_file in data_files:
                            app.append_data_file(data_file)
                else:
                    return  # nothing to remove, nothing to add
                txn.commit_transaction()
                return
            except (CommitFailedException, ValidationException) as exc:
                last = exc
                if io is not None:
                    delete_files(io, [f.file_path for f in rewritten])
                wait = min(5.0, 0.1 * 2 ** (attempt - 1)) * (0.5 + random.random())
                logger.info(
                    "Commit to Iceberg table %s met a concurrent commit (attempt %d of %d), "
                    "planning again in %.2fs: %s",
                    self._table_name,
                    attempt,
                    self._max_attempts,
                    wait,
                    exc,
                )
                time.sleep(wait)
            except BaseException:
                if self._landed():
                    return  # the commit went through although the call failed
                if io is not None:
                    delete_files(io, [f.file_path for f in rewritten + data_files])
                raise
        if io is not None:
            delete_files(io, [f.file_path for f in data_files])
        raise IcebergCommitConflictError(
            f"Could not commit the write to Iceberg table {self._table_name!r}: other writers "
            f"committed conflicting changes {self._max_attempts} times while it was planned "
            f"({type(last).__name__}: {last}). Nothing was committed and the files written "
            "were deleted; run the write again."
        ) from last

    def _landed(self) -> bool:
        try:
            table = self._load_table()
        except Exception:
            return False
        return any(
            s.summary is not None
            and s.summary.additional_properties.get(WRITE_ID_PROPERTY) == self._write_uuid
            for s in table.metadata.snapshots
        )

    def _stage_removal(
        self, table: Any, removal: RowRemoval | None, attempt: int
    ) -> tuple[list[Any], list[Any]]:
        """The data files to remove and the new files holding the rows they keep."""
        from pyiceberg.expressions import AlwaysTrue

        if removal is None:
            return [], []
        metadata = table.metadata
        snapshot = metadata.current_snapshot()
        row_filter = removal.iceberg_filter if removal.keys is None else _key_filter(removal)
        candidates = plan_files(
            metadata, table.io, snapshot, row_filter or AlwaysTrue(), removal.case_sensitive
        )
        whole = [p for p in candidates if removal.whole_file(p)]
        partial = [p for p in candidates if not removal.whole_file(p)]
        schema = metadata.schema()
        context = ReadContext(
            io=table.io,
            schema=schema,
            specs=metadata.specs(),
            name_mapping=metadata.name_mapping(),
            format_version=metadata.format_version,
            row_filter=AlwaysTrue(),
            residual=None,
            projection=None,
            output_schema=pyiceberg_api.arrow_schema(schema),
        )
        counter_base = REWRITE_COUNTER_START + attempt * 10_000_000
        removed = [p.data_file for p in whole]
        rewritten: list[Any] = []
        if partial:
            with ThreadPoolExecutor(max_workers=min(4, len(partial))) as pool:
                results = list(
                    pool.map(
                        lambda item: self._rewrite(
                            context, item[1], removal, metadata, counter_base + item[0] * 1000
                        ),
                        enumerate(partial),
                    )
                )
            for old, new in results:
                if old is not None:
                    removed.append(old)
                    rewritten.extend(new)
        return removed, rewritten

    def _rewrite(
        self,
        context: ReadContext,
        planned: PlannedFile,
        removal: RowRemoval,
        metadata: Any,
        counter_start: int,
    ) -> tuple[Any | None, list[Any]]:
        """Read one file; if rows of it go, write the others and return (old file, new files)."""
        import itertools

        blocks = [b for b in read_planned_file(context, planned, DeleteCache()) if b.num_rows]
        if not blocks:
            return None, []
        table = pa.concat_tables(blocks)
        removed = removal.removed(table, context.schema)
        if not removed.any():
            return None, []
        kept = table.filter(pa.array(~removed))
        new_files = write_files(
            metadata, context.io, kept, self._write_uuid, itertools.count(counter_start)
        )
        return planned.data_file, new_files


def _key_filter(removal: RowRemoval) -> Any:
    """A filter that holds for every key of an upsert: IN (...) for one column with few keys,
    else a range per column. Files are only candidates; rows are matched exactly later."""
    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, In, LessThanOrEqual

    keys = removal.keys
    if len(removal.join_cols) == 1:
        values = pc.unique(keys.column(removal.join_cols[0])).drop_null().to_pylist()
        if len(values) <= _IN_LIST_LIMIT:
            return In(removal.join_cols[0], set(values))
    expr: Any = AlwaysTrue()
    for name in removal.join_cols:
        bounds = pc.min_max(keys.column(name))
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        if lo is None:
            continue
        term = And(GreaterThanOrEqual(name, lo), LessThanOrEqual(name, hi))
        expr = term if isinstance(expr, AlwaysTrue) else And(expr, term)
    return expr


def new_write_uuid() -> str:
    return str(uuid.uuid4())
