"""Real Iceberg tables for tests: pyiceberg SqlCatalogs (sqlite) over a local or S3 warehouse.

pyiceberg writes data files but not delete files, so :func:`add_position_deletes` and
:func:`add_equality_deletes` write delete files and commit them the way other engines do (a
delete manifest in a new snapshot), giving tables whose reads must honour deletes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FAKE_KEY = "testing-access-key"
FAKE_SECRET = "testing-secret-key-do-not-leak"


@dataclass
class Warehouse:
    """A catalog (sqlite) and the place its tables' files go."""

    kind: str
    catalog_kwargs: dict[str, Any]
    fs: Any = field(default=None, repr=False)  # a pyarrow filesystem over the warehouse
    root: str = ""  # the warehouse's path on ``fs``

    def catalog(self) -> Any:
        from pyiceberg.catalog import load_catalog

        kwargs = dict(self.catalog_kwargs)
        return load_catalog(kwargs.pop("name"), **kwargs)

    def files(self, table: Any, folder: str = "data") -> list[str]:
        """Every file under a table's data (or metadata) folder, as paths on ``fs``."""
        import pyarrow.fs as pafs

        location = table.location()
        path = location.split("://", 1)[1] if "://" in location else location
        infos = self.fs.get_file_info(
            pafs.FileSelector(f"{path}/{folder}", recursive=True, allow_not_found=True)
        )
        return sorted(i.path for i in infos if i.type == pafs.FileType.File)


def local_warehouse(tmp_path) -> Warehouse:
    import pyarrow.fs as pafs

    root = tmp_path / "warehouse"
    root.mkdir()
    kwargs = {
        "name": "default",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"file://{root}",
    }
    warehouse = Warehouse("local", kwargs, pafs.LocalFileSystem(), str(root))
    warehouse.catalog().create_namespace("db")
    return warehouse


def s3_warehouse(tmp_path, endpoint: str, bucket: str) -> Warehouse:
    import pyarrow.fs as pafs

    kwargs = {
        "name": "default",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"{bucket}/warehouse",
        "s3.endpoint": endpoint,
        "s3.access-key-id": FAKE_KEY,
        "s3.secret-access-key": FAKE_SECRET,
        "s3.region": "us-east-1",
    }
    fs = pafs.S3FileSystem(
        access_key=FAKE_KEY,
        secret_key=FAKE_SECRET,
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
    )
    warehouse = Warehouse("s3", kwargs, fs, bucket[len("s3://") :] + "/warehouse")
    warehouse.catalog().create_namespace("db")
    return warehouse


def create_table(
    warehouse: Warehouse,
    name: str,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    identifier: Sequence[str] = (),
    properties: dict[str, str] | None = None,
) -> Any:
    """An empty table with ``schema``, identity-partitioned by ``partition_by``."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.name_mapping import MappedField, NameMapping
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import NestedField

    mapping = NameMapping(
        [MappedField(field_id=i + 1, names=[f.name]) for i, f in enumerate(schema)]
    )
    iceberg = pyarrow_to_schema(schema, name_mapping=mapping)
    fields = [
        NestedField(f.field_id, f.name, f.field_type, required=f.name in identifier or f.required)
        for f in iceberg.fields
    ]
    ids = [f.field_id for f in fields if f.name in identifier]
    iceberg = Schema(*fields, identifier_field_ids=ids)
    spec = PartitionSpec(
        *[
            PartitionField(iceberg.find_field(c).field_id, 1000 + i, IdentityTransform(), c)
            for i, c in enumerate(partition_by)
        ]
    )
    return warehouse.catalog().create_table(
        f"db.{name}", schema=iceberg, partition_spec=spec, properties=properties or {}
    )


def events(n: int, start: int = 0) -> pa.Table:
    """Sample rows: id, region (4 values), value, name."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(
                [("north", "south", "east", "west")[i % 4] for i in ids], pa.string()
            ),
            "value": pa.array([i * 0.5 for i in ids], pa.float64()),
            "name": pa.array([f"name-{i}" for i in ids], pa.string()),
        }
    )


EVENTS_SCHEMA = events(1).schema


def data_files(table: Any) -> list[Any]:
    """The live data files of a table's current snapshot."""
    return [task.file for task in table.refresh().scan().plan_files()]


def _commit_delete_file(table: Any, delete_file: Any) -> None:
    from pyiceberg.manifest import (
        ManifestContent,
        ManifestEntry,
        ManifestEntryStatus,
        ManifestWriterV2,
        write_manifest_list,
    )
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

    class DeleteManifestWriter(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    table = table.refresh()
    metadata = table.metadata
    parent = metadata.current_snapshot()
    snapshot_id = metadata.new_snapshot_id()
    sequence_number = metadata.next_sequence_number()
    io = table.io
    manifest_path = f"{table.location()}/metadata/{uuid.uuid4()}-deletes-m0.avro"
    with DeleteManifestWriter(
        metadata.spec(), metadata.schema(), io.new_output(manifest_path), snapshot_id, "deflate"
    ) as writer:
        writer.add_entry(
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=delete_file,
            )
        )
    manifests = list(parent.manifests(io)) + [writer.to_manifest_file()]
    list_path = f"{table.location()}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(
        2, io.new_output(list_path), snapshot_id, parent.snapshot_id, sequence_number, "deflate"
    ) as lw:
        lw.add_manifests(manifests)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(Operation.DELETE),
        schema_id=metadata.current_schema_id,
    )
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref="main"),),
        (
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(
                snapshot_id=snapshot_id,
                parent_snapshot_id=parent.snapshot_id,
                ref_name="main",
                type=SnapshotRefType.BRANCH,
            ),
        ),
    )


def _write_parquet(table: Any, arrow: pa.Table, name: str) -> tuple:
    location = f"{table.location()}/data/{name}"
    output = table.io.new_output(location)
    with output.create(overwrite=True) as f:
        pq.write_table(arrow, f)
    return location, len(table.io.new_input(location))


def add_position_deletes(table: Any, target: Any, positions: Sequence[int]) -> None:
    """Commit a position delete file removing rows ``positions`` of data file ``target``."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    schema = pa.schema(
        [
            pa.field(
                "file_path",
                pa.string(),
                nullable=False,
                metadata={b"PARQUET:field_id": b"2147483546"},
            ),
            pa.field(
                "pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}
            ),
        ]
    )
    positions = sorted(positions)
    arrow = pa.table(
        [pa.array([target.file_path] * len(positions)), pa.array(positions, pa.int64())],
        schema=schema,
    )
    location, size = _write_parquet(table, arrow, f"pos-deletes-{uuid.uuid4()}.parquet")
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=target.partition,
        record_count=len(positions),
        file_size_in_bytes=size,
        spec_id=target.spec_id,
    )
    _commit_delete_file(table, delete_file)


def add_equality_deletes(
    table: Any, keys: pa.Table, partition: Any = None, spec_id: int = 0
) -> None:
    """Commit an equality delete file removing rows whose ``keys`` columns equal a key row."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    schema = table.schema()
    fields, ids = [], []
    for name in keys.column_names:
        field_id = schema.find_field(name).field_id
        ids.append(field_id)
        fields.append(
            pa.field(
                name,
                keys.schema.field(name).type,
                metadata={b"PARQUET:field_id": str(field_id).encode()},
            )
        )
    arrow = pa.table(keys.columns, schema=pa.schema(fields))
    location, size = _write_parquet(table, arrow, f"eq-deletes-{uuid.uuid4()}.parquet")
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=partition if partition is not None else Record(),
        record_count=keys.num_rows,
        file_size_in_bytes=size,
        spec_id=spec_id,
        equality_ids=ids,
    )
    _commit_delete_file(table, delete_file)
