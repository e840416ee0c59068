"""Catalogs: resolve a table's name to where and how a reader reads it, as Ray Data's
``ray.data.Catalog``.

A :class:`Catalog` turns a name (``"main.sales.orders"``) into a :class:`ResolvedSource`: a
path and a filesystem or object-store options (for ``read_parquet`` and ``read_delta``), or
the arguments of an Iceberg catalog (for ``read_iceberg``). Readers take one with
``catalog=``; each uses the fields it understands. Write your own by subclassing
:class:`Catalog` (a metastore, a table registry of your team, a service vending temporary
credentials).

Examples:
    >>> import pyarrow.fs as pafs
    >>> from shardflow.sdk.catalog import Catalog, ReaderFormat, ResolvedSource
    >>> class Folders(Catalog):
    ...     def __init__(self, root):
    ...         self.root = root
    ...     def resolve(self, table, *, reader, mode=None):
    ...         return ResolvedSource(path=f"{self.root}/{table.replace('.', '/')}",
    ...                               filesystem=pafs.LocalFileSystem())
    >>> Folders("/data").resolve("sales.orders", reader=ReaderFormat.PARQUET).path
    '/data/sales/orders'
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass
from typing import Any


class ReaderFormat(str, enum.Enum):
    """Which reader asks a catalog to resolve a table."""

    DELTA = "delta"
    PARQUET = "parquet"
    ICEBERG = "iceberg"


class CatalogAccessMode(str, enum.Enum):
    """Whether the catalog should resolve a table for reading or for writing (a catalog
    vending credentials gives read or write credentials)."""

    READ = "read"
    WRITE = "write"


@dataclass
class ResolvedSource:
    """What :meth:`Catalog.resolve` returns; a reader uses the fields it understands:

    * ``read_parquet``: ``path`` and ``filesystem``;
    * ``read_delta``: ``path`` and ``storage_options``;
    * ``read_iceberg``: ``catalog_kwargs`` and ``table_identifier``.

    Fields a reader does not use stay None.

    Attributes:
        path: Where the table's files are (a folder or URI).
        filesystem: A ``pyarrow.fs.FileSystem`` or fsspec filesystem to read ``path`` with.
        storage_options: Object-store options (credentials, region, endpoint).
        catalog_kwargs: Arguments of ``pyiceberg.catalog.load_catalog``.
        table_identifier: The name the reader should use for the table, when the catalog
            rewrites it.
        data_format: The table's format, as a hint.
    """

    path: str | None = None
    filesystem: Any = None
    storage_options: dict[str, Any] | None = None
    catalog_kwargs: dict[str, Any] | None = None
    table_identifier: str | None = None
    data_format: ReaderFormat | None = None


class Catalog(abc.ABC):
    """A directory that resolves a table's name to a :class:`ResolvedSource`.

    Called on the driver, once per read, before anything is planned.
    """

    @abc.abstractmethod
    def resolve(
        self,
        table: str,
        *,
        reader: ReaderFormat,
        mode: CatalogAccessMode = CatalogAccessMode.READ,
    ) -> ResolvedSource:
        """Resolve ``table`` for ``reader`` and access ``mode``."""


def resolve_for(catalog: Any, table: Any, reader: ReaderFormat, function: str) -> ResolvedSource:
    """``catalog.resolve(table, reader=reader)``, checked: one table name, a Catalog, and a
    ResolvedSource back. Errors name ``function`` and say what to pass."""
    if not isinstance(catalog, Catalog):
        raise TypeError(
            f"{function}: catalog must be a shardflow Catalog (subclass "
            f"shardflow.Catalog and implement resolve), got {type(catalog).__name__}."
        )
    if not isinstance(table, str):
        raise ValueError("Specifying multiple table identifiers is not supported.")
    resolved = catalog.resolve(table, reader=reader)
    if not isinstance(resolved, ResolvedSource):
        raise TypeError(
            f"{function}: {type(catalog).__name__}.resolve({table!r}) returned a "
            f"{type(resolved).__name__}; it must return a ResolvedSource."
        )
    return resolved
