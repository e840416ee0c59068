"""Catalogs: read_parquet, read_delta and read_iceberg resolve a table name through a
user's Catalog, and refuse what they cannot honour with a message saying what to do."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import shardflow as sf


class _Fixed(sf.Catalog):
    def __init__(self, resolved):
        self.resolved = resolved
        self.calls = []

    def resolve(self, table, *, reader, mode=sf.CatalogAccessMode.READ):
        self.calls.append((table, reader, mode))
        return self.resolved


def test_read_parquet_uses_the_resolved_path_and_filesystem(tmp_path):
    table = pa.table({"id": [3, 1, 2]})
    pq.write_table(table, tmp_path / "f.parquet")
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    catalog = _Fixed(sf.ResolvedSource(path="f.parquet", filesystem=fs))
    assert sf.read_parquet("db.t", catalog=catalog).to_arrow().equals(table)
    assert catalog.calls == [("db.t", sf.ReaderFormat.PARQUET, sf.CatalogAccessMode.READ)]


def test_catalog_errors(tmp_path):
    with pytest.raises(TypeError, match="subclass shardflow.Catalog"):
        sf.read_parquet("db.t", catalog=object())
    with pytest.raises(ValueError, match="multiple table identifiers"):
        sf.read_parquet(["a", "b"], catalog=_Fixed(sf.ResolvedSource(path=str(tmp_path))))
    with pytest.raises(ValueError, match="ResolvedSource.path"):
        sf.read_parquet("db.t", catalog=_Fixed(sf.ResolvedSource()))
    with pytest.raises(TypeError, match="must return a ResolvedSource"):
        sf.read_parquet("db.t", catalog=_Fixed({"path": str(tmp_path)}))


def test_read_delta_needs_storage_options_not_a_filesystem(tmp_path):
    pytest.importorskip("deltalake")
    only_fs = sf.ResolvedSource(path=str(tmp_path), filesystem=pafs.LocalFileSystem())
    with pytest.raises(ValueError, match="storage_options"):
        sf.read_delta("db.t", catalog=_Fixed(only_fs))
