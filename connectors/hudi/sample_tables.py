"""Small Apache Hudi tables laid down with pyarrow, for tests and the conformance suite.

hudi-rs reads Hudi tables but does not write them, and Hudi's own writers need Spark with
Hudi's bundle jar. :class:`SampleHudiTable` writes what a Hudi writer would for small upserts
(copy-on-write) and inserts (merge-on-read): ``.hoodie/hoodie.properties`` (table version 6,
timeline layout 1), the requested, inflight and completed files of each instant with its
commit metadata (write statistics per file), a ``.hoodie_partition_metadata`` file in each
partition, and a Parquet base file per file group and commit carrying the five ``_hoodie_*``
meta columns. It writes no log files (a merge-on-read table holds base files only, as after
a compaction) and no metadata table. Local folders only: copy the folder to object storage to
test a remote table.
"""

from __future__ import annotations

import datetime
import json
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
"""Hudi's meta columns, first in every base file and in what readers return."""

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
_FIRST_INSTANT = datetime.datetime(2024, 1, 1, 0, 0, 0)


@dataclass
class _FileGroup:
    file_id: str
    partition: str
    rows: list[dict[str, Any]] = field(default_factory=list)  # meta and data columns
    last_instant: str | None = None


class SampleHudiTable:
    """A Hudi table under ``path`` that grows by one commit per :meth:`commit` call.

    Args:
        path: A local folder (created; it must not hold a table yet).
        record_key: The column whose values identify records (the record key).
        partition_field: The column the table is partitioned by (its values name the
            partition folders), or None for a table without partitions.
        table_type: ``"COPY_ON_WRITE"`` (commits upsert: a commit that touches a file group
            writes a new version of its base file) or ``"MERGE_ON_READ"`` (delta commits
            insert new records into new file groups; updates are refused).
        max_file_rows: The most records of a file group; more make more file groups.
        hive_style: Name partition folders ``field=value`` instead of ``value``.
        table_name: The name recorded in ``hoodie.properties``.

    Examples:
        >>> import tempfile
        >>> import pyarrow as pa
        >>> table = SampleHudiTable(tempfile.mkdtemp() + "/trips", partition_field="city")
        >>> first = table.commit(pa.table({"id": [1, 2], "city": ["sf", "la"], "fare": [9.5, 3.0]}))
        >>> second = table.commit(pa.table({"id": [1], "city": ["sf"], "fare": [12.0]}))
        >>> first < second
        True
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        record_key: str = "id",
        partition_field: str | None = None,
        table_type: str = COPY_ON_WRITE,
        max_file_rows: int | None = None,
        hive_style: bool = False,
        table_name: str = "sample",
    ):
        if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
            raise ValueError(f"table_type must be {COPY_ON_WRITE!r} or {MERGE_ON_READ!r}.")
        if max_file_rows is not None and max_file_rows < 1:
            raise ValueError("max_file_rows must be >= 1 or None.")
        self.path = os.path.abspath(os.fspath(path))
        if os.path.exists(os.path.join(self.path, ".hoodie")):
            raise FileExistsError(f"{self.path} already holds a Hudi table.")
        self.record_key = record_key
        self.partition_field = partition_field
        self.table_type = table_type
        self.max_file_rows = max_file_rows
        self.hive_style = hive_style
        self.table_name = table_name
        self.instants: list[str] = []
        self._groups: list[_FileGroup] = []
        self._where: dict[tuple[str, str], _FileGroup] = {}  # (partition, key) -> group
        self._data_schema: pa.Schema | None = None
        os.makedirs(os.path.join(self.path, ".hoodie"))
        properties = {
            "hoodie.table.name": table_name,
            "hoodie.table.type": table_type,
            "hoodie.table.version": "6",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.recordkey.fields": record_key,
            "hoodie.table.partition.fields": partition_field or "",
            "hoodie.table.keygenerator.class": (
                "org.apache.hudi.keygen.SimpleKeyGenerator"
                if partition_field
                else "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
            ),
            "hoodie.datasource.write.hive_style_partitioning": str(hive_style).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.populate.meta.fields": "true",
            "hoodie.table.timeline.timezone": "UTC",
        }
        with open(os.path.join(self.path, ".hoodie", "hoodie.properties"), "w") as f:
            f.writelines(f"{key}={value}\n" for key, value in properties.items())

    @property
    def action(self) -> str:
        """The timeline action of this table's commits."""
        return "commit" if self.table_type == COPY_ON_WRITE else "deltacommit"

    def commit(self, rows: pa.Table, *, instant: str | None = None) -> str:
        """Write ``rows`` (records with the data columns) in one commit; returns its instant.

        Copy-on-write: a record whose key is in the table replaces it (same partition);
        every file group a commit touches gets a new base file holding all of its records.
        Merge-on-read: every record must be new; they go into new file groups.
        """
        instant = instant or self._next_instant()
        if self.instants and instant <= self.instants[-1]:
            raise ValueError(f"instant {instant} is not after the last one, {self.instants[-1]}.")
        if self._data_schema is None:
            self._data_schema = rows.schema
        elif not rows.schema.equals(self._data_schema):
            raise ValueError(f"rows must have the table's schema, {self._data_schema}.")
        touched: dict[str, _FileGroup] = {}
        for position, record in enumerate(rows.to_pylist()):
            key = str(record[self.record_key])
            partition = self._partition_of(record)
            meta = {
                "_hoodie_commit_time": instant,
                "_hoodie_commit_seqno": f"{instant}_0_{position}",
                "_hoodie_record_key": key,
                "_hoodie_partition_path": partition,
                "_hoodie_file_name": "",
            }
            group = self._where.get((partition, key))
            if group is not None:
                if self.table_type == MERGE_ON_READ:
                    raise ValueError(
                        f"record {key!r} is in the table: sample merge-on-read tables take "
                        "inserts only (updates would need log files)."
                    )
                group.rows = [r for r in group.rows if r["_hoodie_record_key"] != key]
            else:
                group = self._group_for_insert(partition, touched)
                self._where[(partition, key)] = group
            group.rows.append({**meta, **record})
            touched[group.file_id] = group
        stats: dict[str, list[dict[str, Any]]] = {}
        for group in touched.values():
            stats.setdefault(group.partition, []).append(self._write_base_file(group, instant))
        self._write_instant(instant, stats, rows.schema)
        self.instants.append(instant)
        return instant

    # -- layout ---------------------------------------------------------------------------

    def _next_instant(self) -> str:
        moment = _FIRST_INSTANT + datetime.timedelta(minutes=len(self.instants))
        return moment.strftime("%Y%m%d%H%M%S") + "000"

    def _partition_of(self, record: dict[str, Any]) -> str:
        if not self.partition_field:
            return ""
        value = str(record[self.partition_field])
        return f"{self.partition_field}={value}" if self.hive_style else value

    def _group_for_insert(self, partition: str, touched: dict[str, _FileGroup]) -> _FileGroup:
        candidates = [g for g in self._groups if g.partition == partition]
        if self.table_type == MERGE_ON_READ:  # inserts of a delta commit: its own file groups
            candidates = [g for g in candidates if g.file_id in touched]
        for group in candidates:
            if self.max_file_rows is None or len(group.rows) < self.max_file_rows:
                return group
        # File ids are UUIDs, as Hudi's; derived from the table's name and the group's number
        # so that a table written twice is the same, file names included.
        number = len(self._groups)
        file_id = uuid.uuid5(uuid.NAMESPACE_URL, f"hudi:{self.table_name}/{partition}/{number}")
        group = _FileGroup(f"{file_id}-0", partition)
        self._groups.append(group)
        return group

    def _write_base_file(self, group: _FileGroup, instant: str) -> dict[str, Any]:
        write_token = f"0-{len(self.instants) + 1}-{len(self.instants) + 2}"
        name = f"{group.file_id}_{write_token}_{instant}.parquet"
        folder = os.path.join(self.path, group.partition) if group.partition else self.path
        os.makedirs(folder, exist_ok=True)
        marker = os.path.join(folder, ".hoodie_partition_metadata")
        if not os.path.exists(marker):
            depth = 1 if group.partition else 0
            with open(marker, "w") as f:
                f.write(f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n")
        updates = sum(1 for r in group.rows if r["_hoodie_commit_time"] == instant)
        for record in group.rows:
            record["_hoodie_file_name"] = name
        assert self._data_schema is not None
        schema = pa.schema(
            [pa.field(c, pa.string()) for c in META_COLUMNS] + list(self._data_schema)
        )
        table = pa.Table.from_pylist(group.rows, schema=schema)
        pq.write_table(table, os.path.join(folder, name))
        size = os.path.getsize(os.path.join(folder, name))
        previous = group.last_instant
        group.last_instant = instant
        return {
            "fileId": group.file_id,
            "path": f"{group.partition}/{name}" if group.partition else name,
            "prevCommit": previous or "null",
            "numWrites": len(group.rows),
            "numDeletes": 0,
            "numUpdateWrites": 0 if previous is None else updates,
            "numInserts": updates if previous is None else 0,
            "totalWriteBytes": size,
            "totalWriteErrors": 0,
            "partitionPath": group.partition,
            "fileSizeInBytes": size,
        }

    def _write_instant(
        self, instant: str, stats: dict[str, list[dict[str, Any]]], schema: pa.Schema
    ) -> None:
        timeline = os.path.join(self.path, ".hoodie")
        requested = "inflight" if self.action == "commit" else "deltacommit.inflight"
        open(os.path.join(timeline, f"{instant}.{self.action}.requested"), "w").close()
        open(os.path.join(timeline, f"{instant}.{requested}"), "w").close()
        metadata = {
            "partitionToWriteStats": stats,
            "compacted": False,
            "extraMetadata": {},
            "operationType": "UPSERT" if self.table_type == COPY_ON_WRITE else "INSERT",
        }
        # The completed instant appears last, as a writer's commit makes it visible.
        with open(os.path.join(timeline, f"{instant}.{self.action}"), "w") as f:
            json.dump(metadata, f)
