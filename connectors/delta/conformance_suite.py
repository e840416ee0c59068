"""The conformance suite of the Delta Lake connector (``shardflow check-connector delta``):
tables written with deltalake under ``tmp_path``, partitioned, over several versions."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance

SAMPLE = pa.table(
    {
        "id": pa.array(range(60), pa.int64()),
        "name": pa.array([f"n{i % 6}" for i in range(60)], pa.string()),
        "score": pa.array([i / 8 for i in range(60)], pa.float64()),
    }
)


class DeltaSuite(ConnectorConformance):
    name = "delta"
    appends = 3

    def _spec(self) -> Any:
        return get_registry().get(self.name)  # as a third-party package's suite would

    def expected_table(self) -> pa.Table:
        return SAMPLE

    def _table(self, tmp_path: Any, role: str, appends: int) -> str:
        from deltalake import write_deltalake

        path = str(tmp_path / role)
        data = self.expected_table()
        step = -(-data.num_rows // max(appends, 1))
        for i in range(appends):
            write_deltalake(path, data.slice(i * step, step), mode="append", partition_by=["name"])
        return path

    def make_datasource(self, tmp_path: Any) -> Any:
        return self._spec().datasource(self._table(tmp_path, "data", self.appends))

    def make_empty_datasource(self, tmp_path: Any) -> Any:
        from deltalake import write_deltalake

        path = str(tmp_path / "empty")
        write_deltalake(path, self.expected_table().slice(0, 0))
        return self._spec().datasource(path)

    def make_bad_datasource(self, tmp_path: Any) -> Any:
        path = self._table(tmp_path, "bad", 1)
        victim = sorted((tmp_path / "bad").rglob("*.parquet"))[0]
        victim.write_bytes(b"PAR1 this is not parquet")
        self._bad_file = victim.name
        return self._spec().datasource(path)

    def bad_source_mentions(self, tmp_path: Any) -> list[str]:
        return [self._bad_file]

    def make_datasink(self, tmp_path: Any) -> Any:
        return self._spec().datasink(str(tmp_path / "out"))

    def read_back(self, tmp_path: Any) -> pa.Table:
        from deltalake import DeltaTable

        table = DeltaTable(str(tmp_path / "out"))
        return pa.table(table.to_pyarrow_table()).select(SAMPLE.column_names)
