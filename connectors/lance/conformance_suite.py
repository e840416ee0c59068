"""The conformance suite of the Lance connector: datasets written and read back with pylance."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance

TABLE = pa.table(
    {
        "id": pa.array(np.arange(60), pa.int64()),
        "name": pa.array([f"n{i % 6}" if i % 7 else None for i in range(60)], pa.string()),
        "score": pa.array(np.arange(60) / 8, pa.float64()),
    }
)


class LanceSuite(ConnectorConformance):
    name = "lance"

    def _lance(self):
        return require("lance", "lance", "The Lance conformance suite")

    def expected_table(self):
        return TABLE

    def make_datasource(self, tmp_path):
        uri = str(tmp_path / "data.lance")
        self._lance().write_dataset(TABLE, uri, max_rows_per_file=16)  # 4 fragments
        return get_registry().get(self.name).datasource(uri)

    def make_empty_datasource(self, tmp_path):
        uri = str(tmp_path / "empty.lance")
        self._lance().write_dataset(TABLE.slice(0, 0), uri)
        return get_registry().get(self.name).datasource(uri)

    def make_bad_datasource(self, tmp_path):
        uri = tmp_path / "bad.lance"
        self._lance().write_dataset(TABLE, str(uri), max_rows_per_file=30)
        data_file = sorted((uri / "data").iterdir())[0]
        data_file.write_bytes(b"not a lance file")
        self._bad_file = data_file.name
        return get_registry().get(self.name).datasource(str(uri))

    def bad_source_mentions(self, tmp_path):
        return [self._bad_file]

    def make_datasink(self, tmp_path):
        return get_registry().get(self.name).datasink(str(tmp_path / "out.lance"))

    def read_back(self, tmp_path):
        return self._lance().dataset(str(tmp_path / "out.lance")).to_table()
