"""Differential cases: a Catalog written against the shared API resolves table names for
read_parquet, read_delta and read_iceberg."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from harness import Raised, case, exception_kind


def _catalog(m, resolve):
    """A subclass of ``m.Catalog`` whose ``resolve`` is ``resolve`` (and records calls)."""

    class Resolver(m.Catalog):
        def __init__(self):
            self.calls = []

        def resolve(self, table, *, reader, mode=m.CatalogAccessMode.READ):
            self.calls.append((table, reader.value, mode.value))
            return resolve(table)

    return Resolver()


@case(
    "Catalog",
    "ResolvedSource",
    "ReaderFormat",
    "CatalogAccessMode",
    "read_parquet",
    note="a table name resolved to a folder and a filesystem",
    slow=True,
)
def catalog_for_parquet(m, tmp):
    """read_parquet(name, catalog=...) reads the folder the catalog names with its
    filesystem; a list of names raises ValueError; the enums and the ResolvedSource"""
    folder = tmp / "warehouse" / "sales" / "orders"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), folder / "f.parquet")

    def resolve(table):
        path = str(tmp / "warehouse" / table.replace(".", "/"))
        return m.ResolvedSource(path=path, filesystem=pafs.LocalFileSystem())

    catalog = _catalog(m, resolve)
    rows = m.read_parquet("sales.orders", catalog=catalog).take_all()
    try:
        m.read_parquet(["a", "b"], catalog=catalog)
        many = "no error"
    except Exception as exc:
        many = [Raised(exception_kind(exc)), str(exc)]
    empty = m.ResolvedSource()
    return [
        sorted(rows, key=lambda r: r["id"]),
        catalog.calls,
        many,
        [(f.name, f.value) for f in m.ReaderFormat],
        [(f.name, f.value) for f in m.CatalogAccessMode],
        [empty.path, empty.filesystem, empty.storage_options, empty.catalog_kwargs],
        [empty.table_identifier, empty.data_format],
        isinstance(m.ReaderFormat.DELTA, str),
    ]


@case("read_delta", "Catalog", requires=("deltalake",), note="a Delta table found by a catalog")
def catalog_for_delta(m, tmp):
    """read_delta(name, catalog=...) reads the table at the resolved path"""
    from deltalake import write_deltalake

    path = str(tmp / "tables" / "events")
    write_deltalake(path, pa.table({"id": [1, 2], "day": ["mon", "tue"]}))
    catalog = _catalog(m, lambda table: m.ResolvedSource(path=path, storage_options={}))
    rows = m.read_delta("main.events", catalog=catalog).take_all()
    return [sorted(rows, key=lambda r: r["id"]), catalog.calls]


@case(
    "read_iceberg",
    "Catalog",
    requires=("pyiceberg",),
    note="an Iceberg table found by a catalog that gives catalog_kwargs",
)
def catalog_for_iceberg(m, tmp):
    """read_iceberg(name, catalog=...) loads the catalog the kwargs describe and reads the
    identifier the catalog gives back"""
    from pyiceberg.catalog.sql import SqlCatalog

    tmp.mkdir(parents=True, exist_ok=True)
    kwargs = {
        "name": "default",
        "type": "sql",
        "uri": f"sqlite:///{tmp}/catalog.db",
        "warehouse": f"file://{tmp}/warehouse",
    }
    iceberg = SqlCatalog(
        **{k: v for k, v in kwargs.items() if k not in ("name", "type")}, name="default"
    )
    iceberg.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    iceberg.create_table("db.t", schema=data.schema).append(data)
    catalog = _catalog(
        m, lambda table: m.ResolvedSource(catalog_kwargs=kwargs, table_identifier="db.t")
    )
    rows = m.read_iceberg(table_identifier="unity.db.t", catalog=catalog).take_all()
    return [sorted(r["id"] for r in rows), catalog.calls]
