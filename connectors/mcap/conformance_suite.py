"""The conformance suite of the MCAP connector, over small files written with mcap's writer.

``shardflow check-connector mcap`` runs it; so do the tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

_SCHEMA = pa.schema(
    [
        ("data", pa.struct([("id", pa.int64()), ("name", pa.string())])),
        ("topic", pa.string()),
        ("log_time", pa.int64()),
        ("publish_time", pa.int64()),
        ("sequence", pa.int64()),
        ("channel_id", pa.int64()),
        ("message_encoding", pa.string()),
        ("schema_name", pa.string()),
        ("schema_encoding", pa.string()),
        ("schema_data", pa.binary()),
    ]
)
_SCHEMA_DATA = b'{"type": "object"}'


def write_mcap(rows: list[dict[str, Any]], path: Path) -> None:
    """An MCAP file of ``rows`` (rows of the suite's table), one JSON channel per topic."""
    writer_module = require("mcap.writer", "mcap", "The MCAP conformance suite")
    with open(path, "wb") as f:
        writer = writer_module.Writer(f)
        writer.start()
        schema_id = writer.register_schema(name="Item", encoding="jsonschema", data=_SCHEMA_DATA)
        channels: dict[str, int] = {}
        for row in rows:
            if row["topic"] not in channels:
                channels[row["topic"]] = writer.register_channel(
                    topic=row["topic"], message_encoding="json", schema_id=schema_id
                )
            writer.add_message(
                channels[row["topic"]],
                log_time=row["log_time"],
                publish_time=row["publish_time"],
                sequence=row["sequence"],
                data=json.dumps(row["data"]).encode(),
            )
        writer.finish()


class MCAPSuite(DatasourceConformance):
    """Three files of 20 JSON messages on two topics, in log-time order."""

    name = "mcap"
    files = 3

    def expected_table(self) -> pa.Table:
        rows = [
            {
                "data": {"id": i, "name": f"n{i % 6}"},
                "topic": "/even" if i % 2 == 0 else "/odd",
                "log_time": 1_000 * i,
                "publish_time": 1_000 * i + 7,
                "sequence": i,
                # channels are numbered per file, in the order their topics first appear
                "channel_id": 1 if i % 2 == 0 else 2,
                "message_encoding": "json",
                "schema_name": "Item",
                "schema_encoding": "jsonschema",
                "schema_data": _SCHEMA_DATA,
            }
            for i in range(60)
        ]
        return pa.Table.from_pylist(rows, schema=_SCHEMA)

    def _source(self, folder: Path) -> Any:
        made = get_registry().get(self.name).datasource
        if made is None:
            raise LookupError(f"connector {self.name!r} has no datasource")
        return made(str(folder))

    def make_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "data"
        folder.mkdir()
        rows = self.expected_table().to_pylist()
        step = -(-len(rows) // self.files)
        for i in range(self.files):
            write_mcap(rows[i * step : (i + 1) * step], folder / f"part-{i}.mcap")
        return self._source(folder)

    def make_empty_datasource(self, tmp_path: Path) -> Any:
        (tmp_path / "empty").mkdir()
        return self._source(tmp_path / "empty")

    def make_bad_datasource(self, tmp_path: Path) -> Any:
        folder = tmp_path / "bad"
        folder.mkdir()
        write_mcap(self.expected_table().slice(0, 5).to_pylist(), folder / "good.mcap")
        (folder / "broken.mcap").write_bytes(b"\x89MCAP0\r\n this is not an MCAP file")
        return self._source(folder)

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["broken.mcap"]
