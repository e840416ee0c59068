"""Differential cases: Iceberg tables in a pyiceberg SQL catalog (sqlite) on local disk."""

from __future__ import annotations

import pyarrow as pa
from harness import case


def _catalog(tmp):
    from pyiceberg.catalog.sql import SqlCatalog

    tmp.mkdir(parents=True, exist_ok=True)
    kwargs = {
        "name": "default",
        "type": "sql",
        "uri": f"sqlite:///{tmp}/catalog.db",
        "warehouse": f"file://{tmp}/warehouse",
    }
    catalog = SqlCatalog(
        **{k: v for k, v in kwargs.items() if k not in ("name", "type")}, name="default"
    )
    catalog.create_namespace("db")
    return catalog, kwargs


@case(
    "read_iceberg",
    "Dataset.write_iceberg",
    requires=("pyiceberg",),
    note="a table written by pyiceberg read back; rows appended with write_iceberg",
)
def iceberg_read_and_append(m, tmp):
    """read_iceberg with a row filter and selected columns; write_iceberg appends"""
    from pyiceberg.expressions import GreaterThanOrEqual

    catalog, kwargs = _catalog(tmp)
    data = pa.table(
        {"id": pa.array(range(10), pa.int64()), "name": pa.array([f"n{i}" for i in range(10)])}
    )
    table = catalog.create_table("db.t", schema=data.schema)
    table.append(data.slice(0, 6))
    table.append(data.slice(6))
    ds = m.read_iceberg(table_identifier="db.t", catalog_kwargs=kwargs)
    filtered = m.read_iceberg(
        table_identifier="db.t",
        catalog_kwargs=kwargs,
        row_filter=GreaterThanOrEqual("id", 7),
        selected_fields=("id",),
    )
    before = [
        sorted(ds.take_all(), key=lambda r: r["id"]),
        ds.count(),
        ds.schema().names,
        sorted(r["id"] for r in filtered.take_all()),
    ]
    m.from_items([{"id": 100 + i, "name": f"w{i}"} for i in range(3)]).write_iceberg(
        "db.t", catalog_kwargs=kwargs
    )
    after = catalog.load_table("db.t").scan().to_arrow()
    return before + [sorted(after.column("id").to_pylist())]
