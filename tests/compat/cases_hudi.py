"""Differential cases: Apache Hudi tables (laid down by shardflow's sample table writer, the
same bytes for both modules) read through hudi 0.4, the API Ray Data 2.60 calls."""

from __future__ import annotations

import pyarrow as pa
from harness import case

from shardflow.connectors.hudi.sample_tables import MERGE_ON_READ, SampleHudiTable


def _trips(ids, fares):
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array([["sf", "la", "nyc"][i % 3] for i in ids], pa.string()),
            "fare": pa.array(fares, pa.float64()),
            "ok": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
        }
    )


def _table(tmp, **layout):
    table = SampleHudiTable(tmp / "trips", max_file_rows=4, **layout)
    table.commit(_trips(list(range(12)), [i * 1.5 for i in range(12)]))
    table.commit(_trips([0, 5, 12], [-1.0, -5.0, 12.0]))
    table.commit(_trips([1, 4], [-2.0, -3.0]))
    return table


def _rows(ds):
    return sorted(ds.take_all(), key=lambda r: r["id"])


@case(
    "read_hudi",
    requires=("hudi",),
    note="a partitioned copy-on-write table over three commits: rows with Hudi's meta columns, "
    "dtypes, count",
)
def hudi_snapshot(m, tmp):
    table = _table(tmp, partition_field="city")
    # Ray Data plans 200 read tasks by default, most of them empty: a few keep the case quick.
    ds = m.read_hudi(table.path, override_num_blocks=3)
    return [_rows(ds), ds.schema(), ds.count(), _rows(m.read_hudi(table.path))]


@case("read_hudi", requires=("hudi",), note="filters on the partition column")
def hudi_partition_filters(m, tmp):
    table = _table(tmp, partition_field="city")
    return [
        _rows(m.read_hudi(table.path, filters=[("city", "=", "la")])),
        _rows(m.read_hudi(table.path, filters=[("city", "!=", "la")])),
        _rows(m.read_hudi(table.path, filters=[("city", ">", "nyc")])),
    ]


@case(
    "read_hudi",
    requires=("hudi",),
    note="incremental queries between instants (hoodie.read.file_group.* bounds)",
)
def hudi_incremental(m, tmp):
    table = _table(tmp, partition_field="city")
    first, second, third = table.instants
    out = []
    for bounds in [(first, second), (first, None), (third, None)]:
        options = {"hoodie.read.file_group.start_timestamp": bounds[0]}
        if bounds[1] is not None:
            options["hoodie.read.file_group.end_timestamp"] = bounds[1]
        ds = m.read_hudi(
            table.path, query_type="incremental", hudi_options=options, override_num_blocks=2
        )
        out.append([_rows(ds), ds.schema()])
    return out


@case(
    "read_hudi",
    requires=("hudi",),
    note="a table without partitions, hive-style partitions, and a merge-on-read table of base files",
)
def hudi_layouts(m, tmp):
    flat = _table(tmp / "flat")
    hive = _table(tmp / "hive", partition_field="city", hive_style=True)
    mor = SampleHudiTable(tmp / "mor" / "t", partition_field="city", table_type=MERGE_ON_READ)
    mor.commit(_trips(list(range(6)), [float(i) for i in range(6)]))
    mor.commit(_trips([6, 7], [6.0, 7.0]))
    return [
        _rows(m.read_hudi(flat.path)),
        _rows(m.read_hudi(hive.path, filters=[("city", "=", "sf")])),
        _rows(m.read_hudi(mor.path)),
    ]


@case("read_hudi", requires=("hudi",), note="an unknown query_type raises ValueError")
def hudi_bad_query_type(m, tmp):
    return m.read_hudi(str(tmp), query_type="time_travel")
