"""The conformance suite of the TFRecords connector, over small files written here.

``shardflow check-connector tfrecords`` runs it; so do the tests. The files are framed and
parsed with the connector's own protobuf definitions (tests/connectors/tfrecords check them
against TensorFlow's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.connectors.tfrecords.example_proto import example_class
from shardflow.connectors.tfrecords.framing import frame_record, read_records
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance

_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.binary()),
        ("score", pa.float32()),
        ("tokens", pa.list_(pa.int64())),
    ]
)


def _example(row: dict[str, Any]) -> bytes:
    example = example_class()()
    features = example.features.feature
    features["id"].int64_list.value.append(row["id"])
    features["name"].bytes_list.value.append(row["name"])
    features["score"].float_list.value.append(row["score"])
    features["tokens"].int64_list.value.extend(row["tokens"])
    return example.SerializeToString()


def write_records(rows: list[dict[str, Any]], path: Path) -> None:
    """A TFRecord file of one Example per row."""
    path.write_bytes(b"".join(frame_record(_example(row)) for row in rows))


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a TFRecord file of the suite's Examples."""
    rows = []
    with open(path, "rb") as f:
        for _, data in read_records(f):
            feature = example_class().FromString(data).features.feature
            rows.append(
                {
                    "id": feature["id"].int64_list.value[0],
                    "name": feature["name"].bytes_list.value[0],
                    "score": feature["score"].float_list.value[0],
                    "tokens": list(feature["tokens"].int64_list.value),
                }
            )
    return rows


def _connector(name: str, role: str) -> Any:
    """The registered Datasource or Datasink class of connector ``name``."""
    made = getattr(get_registry().get(name), role)
    if made is None:
        raise LookupError(f"connector {name!r} has no {role}")
    return made


class TFRecordsSuite(ConnectorConformance):
    """Three files of 20 Examples: three scalar features and one list feature."""

    name = "tfrecords"
    files = 3

    def expected_table(self) -> pa.Table:
        rows = [
            {
                "id": i,
                "name": f"n{i % 6}".encode(),
                "score": i / 8,
                "tokens": list(range(i % 3 + 2)),
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
            write_records(rows[i * step : (i + 1) * step], folder / f"part-{i}.tfrecords")
        return self._source(folder)

    def make_empty_datasource(self, tmp_path: Path) -> Any:
        (tmp_path / "empty").mkdir()
        return self._source(tmp_path / "empty")

    def make_bad_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "bad"
        folder.mkdir()
        write_records(self.expected_table().slice(0, 5).to_pylist(), folder / "good.tfrecords")
        (folder / "broken.tfrecords").write_bytes(b"not a TFRecord file at all")
        return self._source(folder)

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["broken.tfrecords"]

    def make_datasink(self, tmp_path: Path) -> Any:
        return _connector(self.name, "datasink")(str(tmp_path / "out"))

    def read_back(self, tmp_path: Path) -> pa.Table:
        folder = tmp_path / "out"
        files = sorted(
            p
            for p in folder.rglob("*")
            if p.is_file()
            and not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
        )
        if not files:
            raise FileNotFoundError(f"{folder}: nothing committed")
        rows = [row for path in files for row in read_rows(path)]
        return pa.Table.from_pylist(rows, schema=_SCHEMA)
