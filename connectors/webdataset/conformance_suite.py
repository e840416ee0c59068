"""The conformance suite of the WebDataset connector, over small shards written here.

``shardflow check-connector webdataset`` runs it; so do the tests.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance

_SCHEMA = pa.schema(
    [
        ("__key__", pa.string()),
        ("cls", pa.int64()),
        ("txt", pa.string()),
        ("json", pa.struct([("n", pa.int64()), ("tags", pa.list_(pa.string()))])),
        ("bin", pa.binary()),
    ]
)


def without_url(sample: dict[str, Any]) -> dict[str, Any]:
    """A decoder step dropping ``__url__`` (it names the suite's temporary folder)."""
    return {k: v for k, v in sample.items() if k != "__url__"}


def _encode(row: dict[str, Any]) -> list[tuple[str, bytes]]:
    return [
        ("cls", str(row["cls"]).encode()),
        ("txt", row["txt"].encode()),
        ("json", json.dumps(row["json"]).encode()),
        ("bin", row["bin"]),
    ]


def write_shard(rows: list[dict[str, Any]], path: Path) -> None:
    """A tar shard of ``rows`` (of the suite's schema), written with the standard library."""
    with tarfile.open(path, "w") as tar:
        for row in rows:
            for suffix, data in _encode(row):
                info = tarfile.TarInfo(f"{row['__key__']}.{suffix}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def read_shard(path: Path) -> list[dict[str, Any]]:
    """The rows of a shard, decoded with the standard library."""
    samples: dict[str, dict[str, Any]] = {}
    with tarfile.open(path) as tar:
        for info in tar.getmembers():
            key, _, suffix = info.name.partition(".")
            data = tar.extractfile(info).read()  # type: ignore[union-attr]
            sample = samples.setdefault(key, {"__key__": key})
            if suffix == "cls":
                sample[suffix] = int(data)
            elif suffix == "txt":
                sample[suffix] = data.decode()
            elif suffix == "json":
                sample[suffix] = json.loads(data)
            else:
                sample[suffix] = data
    return list(samples.values())


def _connector(name: str, role: str) -> Any:
    """The registered Datasource or Datasink class of connector ``name``."""
    made = getattr(get_registry().get(name), role)
    if made is None:
        raise LookupError(f"connector {name!r} has no {role}")
    return made


class WebDatasetSuite(ConnectorConformance):
    """Three shards of 20 samples, each of four members."""

    name = "webdataset"
    files = 3

    def expected_table(self) -> pa.Table:
        rows = [
            {
                "__key__": f"sample-{i:04d}",
                "cls": i % 7,
                "txt": f"caption {i}",
                "json": {"n": i, "tags": [f"t{i % 3}", "x"]},
                "bin": bytes([i]) * 2000,
            }
            for i in range(60)
        ]
        return pa.Table.from_pylist(rows, schema=_SCHEMA)

    def _source(self, folder: Path) -> Any:
        return _connector(self.name, "datasource")(str(folder), decoder=[True, without_url])

    def make_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "data"
        folder.mkdir()
        rows = self.expected_table().to_pylist()
        step = -(-len(rows) // self.files)
        for i in range(self.files):
            write_shard(rows[i * step : (i + 1) * step], folder / f"shard-{i:03d}.tar")
        return self._source(folder)

    def make_empty_datasource(self, tmp_path: Path) -> Any:
        (tmp_path / "empty").mkdir()
        return self._source(tmp_path / "empty")

    def make_bad_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "bad"
        folder.mkdir()
        write_shard(self.expected_table().slice(0, 5).to_pylist(), folder / "good.tar")
        (folder / "broken.tar").write_bytes(b"this is not a tar archive" * 40)
        return self._source(folder)

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["broken.tar"]

    def make_datasink(self, tmp_path: Path) -> Any:
        return _connector(self.name, "datasink")(str(tmp_path / "out"))

    def read_back(self, tmp_path: Path) -> pa.Table:
        folder = tmp_path / "out"
        shards = sorted(
            p
            for p in folder.rglob("*.tar")
            if not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
        )
        if not shards:
            raise FileNotFoundError(f"{folder}: nothing committed")
        rows = [row for shard in shards for row in read_shard(shard)]
        return pa.Table.from_pylist(rows, schema=_SCHEMA)
