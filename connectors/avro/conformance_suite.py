"""The conformance suite of the Avro connector, over small files written with fastavro.

``shardflow check-connector avro`` runs it; so do the tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

AVRO_SCHEMA = {
    "type": "record",
    "name": "Row",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "parent", "type": ["null", "long"]},
    ],
}
_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("tags", pa.list_(pa.string())),
        ("parent", pa.int64()),
    ]
)


def write_avro(rows: list[dict[str, Any]], path: Path, codec: str = "deflate") -> None:
    """An Avro container file of ``rows`` in the suite's schema, written with fastavro."""
    fastavro = require("fastavro", "avro", "The Avro conformance suite")
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(AVRO_SCHEMA), rows, codec=codec)


def _connector(name: str, role: str) -> Any:
    """The registered Datasource or Datasink class of connector ``name``."""
    made = getattr(get_registry().get(name), role)
    if made is None:
        raise LookupError(f"connector {name!r} has no {role}")
    return made


class AvroSuite(DatasourceConformance):
    """Three deflate-compressed files of 20 records."""

    name = "avro"
    files = 3

    def expected_table(self) -> pa.Table:
        rows = [
            {
                "id": i,
                "name": f"n{i % 6}",
                "score": i / 8,
                "tags": [f"t{j}" for j in range(i % 3)],
                "parent": None if i % 4 == 0 else i // 2,
            }
            for i in range(60)
        ]
        return pa.Table.from_pylist(rows, schema=_SCHEMA)

    def _source(self, folder: Path) -> Any:
        return _connector(self.name, "datasource")(str(folder))

    def make_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "data"
        folder.mkdir()
        rows = self.expected_table().to_pylist()
        step = -(-len(rows) // self.files)
        for i in range(self.files):
            write_avro(rows[i * step : (i + 1) * step], folder / f"part-{i}.avro")
        return self._source(folder)

    def make_empty_datasource(self, tmp_path: Path) -> Any:
        (tmp_path / "empty").mkdir()
        return self._source(tmp_path / "empty")

    def make_bad_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "bad"
        folder.mkdir()
        write_avro(self.expected_table().slice(0, 5).to_pylist(), folder / "good.avro")
        (folder / "broken.avro").write_bytes(b"Obj\x01 this is not an Avro container")
        return self._source(folder)

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["broken.avro"]
