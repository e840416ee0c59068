"""Differential cases: Delta Lake tables through deltalake on local disk."""

from __future__ import annotations

import pyarrow as pa
from harness import case


def _table(tmp):
    from deltalake import write_deltalake

    path = str(tmp / "events")
    for version in range(2):
        ids = list(range(version * 6, version * 6 + 6))
        data = pa.table({"id": ids, "day": [["mon", "tue"][i % 2] for i in ids]})
        write_deltalake(path, data, mode="append", partition_by=["day"])
    return path


@case("read_delta", requires=("deltalake",), note="a partitioned table, its columns and versions")
def delta_read(m, tmp):
    path = _table(tmp)
    ds = m.read_delta(path)
    return [
        sorted(ds.take_all(), key=lambda r: r["id"]),
        ds.count(),
        ds.schema().names,
        sorted(r["id"] for r in m.read_delta(path, columns=["id"]).take_all()),
        m.read_delta(path, version=0).count(),
    ]


@case("read_delta", requires=("deltalake",), note="a list of paths raises ValueError")
def delta_read_several_tables(m, tmp):
    return m.read_delta([str(tmp / "a"), str(tmp / "b")])


@case(
    "Dataset.write_delta",
    requires=("deltalake",),
    note="append (creating the table), a partitioned append and overwrite, one version each",
)
def delta_write(m, tmp):
    from deltalake import DeltaTable

    path = str(tmp / "out")
    items = [{"id": i, "day": ["mon", "tue"][i % 2]} for i in range(20)]
    m.from_items(items, override_num_blocks=2).write_delta(path, partition_by=["day"])
    m.from_items(items[:5]).write_delta(path)
    first = DeltaTable(path)
    appended = [first.version(), first.metadata().partition_columns, first.to_pyarrow_table()]
    m.from_items(items[:3]).write_delta(path, mode="overwrite")
    table = DeltaTable(path)
    rows = pa.table(table.to_pyarrow_table()).sort_by("id").to_pylist()
    return [appended[0], appended[1], pa.table(appended[2]).num_rows, table.version(), rows]
