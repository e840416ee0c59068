"""Scan planning on the driver: which data files to read, with which delete files.

Manifests are pruned by partition summaries, data files by partition values and column
statistics against the filter (pyiceberg's manifest planner). Each data file is then paired
with the delete files that apply to it, by the rules of the Iceberg spec:

* a position delete file applies to data files of the same partition (or to the one file it
  names) whose data sequence number is not greater than its own;
* an equality delete file applies to data files of the same partition (or every partition,
  when the delete file is unpartitioned) whose data sequence number is strictly smaller.

pyiceberg's own planner refuses tables with equality deletes; this one honours them.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

INITIAL_SEQUENCE_NUMBER = 0


@dataclass
class PlannedFile:
    """One data file to read, with the delete files that apply to it.

    Args:
        data_file: pyiceberg DataFile of the data.
        position_deletes: Position delete files (or deletion vectors) that apply.
        equality_deletes: Equality delete files that apply.
        residual: What is left of the filter for this file after its partition values are
            known; ``AlwaysTrue()`` means every row of the file matches.
    """

    data_file: Any
    position_deletes: tuple[Any, ...] = ()
    equality_deletes: tuple[Any, ...] = ()
    residual: Any = None

    @property
    def path(self) -> str:
        return self.data_file.file_path

    @property
    def size(self) -> int:
        return int(self.data_file.file_size_in_bytes or 0)

    @property
    def has_deletes(self) -> bool:
        return bool(self.position_deletes or self.equality_deletes)

    def rows_if_exact(self) -> int | None:
        """The file's row count when the manifests know it exactly (no deletes, no residual)."""
        from pyiceberg.expressions import AlwaysTrue

        if self.has_deletes or not isinstance(self.residual, AlwaysTrue):
            return None
        return int(self.data_file.record_count)


@dataclass
class _EqualityDeletes:
    by_partition: dict[tuple[int, Any], list[tuple[int, Any]]] = field(default_factory=dict)
    global_deletes: list[tuple[int, Any]] = field(default_factory=list)

    def add(self, delete_file: Any, sequence_number: int, unpartitioned: bool) -> None:
        if unpartitioned:
            self.global_deletes.append((sequence_number, delete_file))
        else:
            key = (delete_file.spec_id or 0, delete_file.partition)
            self.by_partition.setdefault(key, []).append((sequence_number, delete_file))

    def for_data_file(self, sequence_number: int, data_file: Any) -> tuple[Any, ...]:
        key = (data_file.spec_id or 0, data_file.partition)
        candidates = itertools.chain(self.global_deletes, self.by_partition.get(key, ()))
        return tuple(d for seq, d in candidates if seq > sequence_number)


def resolve_snapshot(metadata: Any, snapshot_id: int | None, as_of_ms: int | None) -> Any:
    """The snapshot to read: by id, as of a time (milliseconds since the epoch), or current."""
    if snapshot_id is not None:
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            known = [s.snapshot_id for s in metadata.snapshots][-10:]
            raise ValueError(
                f"The Iceberg table has no snapshot with id {snapshot_id}; its latest snapshots "
                f"are {known}."
            )
        return snapshot
    if as_of_ms is not None:
        chosen = None
        for entry in metadata.snapshot_log:
            if entry.timestamp_ms <= as_of_ms:
                chosen = entry.snapshot_id
        if chosen is None:
            first = metadata.snapshot_log[0].timestamp_ms if metadata.snapshot_log else None
            raise ValueError(
                f"The Iceberg table has no snapshot at or before {as_of_ms} ms since the epoch "
                f"(its first snapshot was committed at {first} ms)."
            )
        return metadata.snapshot_by_id(chosen)
    return metadata.current_snapshot()


def plan_files(
    metadata: Any,
    io: Any,
    snapshot: Any,
    row_filter: Any,
    case_sensitive: bool = True,
    options: dict[str, str] | None = None,
) -> list[PlannedFile]:
    """The data files of ``snapshot`` that may hold rows matching ``row_filter``.

    Args:
        metadata: The table's TableMetadata.
        io: The table's FileIO (reads manifests).
        snapshot: From :func:`resolve_snapshot`; None plans nothing (an empty table).
        row_filter: An unbound pyiceberg BooleanExpression over the table's current schema.
        case_sensitive: Whether column names in the filter match case-sensitively.
        options: Scan options (``include_empty_files``, ...).
    """
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.table import ManifestGroupPlanner
    from pyiceberg.table.delete_file_index import DeleteFileIndex

    if snapshot is None:
        return []
    planner = ManifestGroupPlanner(
        table_metadata=metadata,
        io=io,
        row_filter=row_filter,
        case_sensitive=case_sensitive,
        options=options or {},
    )
    data_entries = []
    position_index = DeleteFileIndex()
    equality = _EqualityDeletes()
    specs = metadata.specs()
    for entry in itertools.chain.from_iterable(
        planner.plan_manifest_entries(snapshot.manifests(io))
    ):
        data_file = entry.data_file
        sequence_number = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
        if data_file.content == DataFileContent.DATA:
            data_entries.append(entry)
        elif data_file.content == DataFileContent.POSITION_DELETES:
            position_index.add_delete_file(entry, partition_key=data_file.partition)
        elif data_file.content == DataFileContent.EQUALITY_DELETES:
            spec = specs.get(data_file.spec_id or 0)
            equality.add(data_file, sequence_number, spec is None or spec.is_unpartitioned())
        else:
            raise ValueError(f"Unknown content {data_file.content} of {data_file.file_path}.")
    residuals: dict[int, Any] = {}
    planned = []
    for entry in data_entries:
        data_file = entry.data_file
        sequence_number = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
        spec_id = data_file.spec_id or 0
        if spec_id not in residuals:
            residuals[spec_id] = _residual_evaluator(metadata, spec_id, row_filter, case_sensitive)
        planned.append(
            PlannedFile(
                data_file,
                tuple(
                    position_index.for_data_file(
                        sequence_number, data_file, partition_key=data_file.partition
                    )
                ),
                equality.for_data_file(sequence_number, data_file),
                residuals[spec_id].residual_for(data_file.partition),
            )
        )
    return planned


def _residual_evaluator(metadata: Any, spec_id: int, row_filter: Any, case_sensitive: bool) -> Any:
    from pyiceberg.expressions.visitors import residual_evaluator_of

    return residual_evaluator_of(
        spec=metadata.specs()[spec_id],
        expr=row_filter,
        case_sensitive=case_sensitive,
        schema=metadata.schema(),
    )


def balance(files: Sequence[PlannedFile], groups: int) -> list[list[PlannedFile]]:
    """Split files into at most ``groups`` groups of similar total size (largest first, each
    to the lightest group), keeping each group in the files' original order."""
    groups = max(1, min(groups, len(files)))
    heap = [(0, i) for i in range(groups)]
    assigned: list[list[int]] = [[] for _ in range(groups)]
    order = sorted(range(len(files)), key=lambda i: files[i].size, reverse=True)
    for index in order:
        size, group = heapq.heappop(heap)
        assigned[group].append(index)
        heapq.heappush(heap, (size + files[index].size, group))
    return [[files[i] for i in sorted(members)] for members in assigned if members]
