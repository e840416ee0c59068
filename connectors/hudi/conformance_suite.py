"""The conformance suite of the Hudi connector (``shardflow check-connector hudi``): partitioned
copy-on-write tables laid down under ``tmp_path`` by :mod:`.sample_tables`, over several
commits that update records, so that file groups have several slices."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.connectors.hudi.sample_tables import META_COLUMNS, SampleHudiTable
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

SAMPLE = pa.table(
    {
        "id": pa.array(range(60), pa.int64()),
        "name": pa.array([f"n{i % 4}" for i in range(60)], pa.string()),
        "score": pa.array([i / 8 for i in range(60)], pa.float64()),
    }
)


class HudiSuite(DatasourceConformance):
    name = "hudi"
    commits = 3

    def _spec(self) -> Any:
        return get_registry().get(self.name)  # as a third-party package's suite would

    def expected_table(self) -> pa.Table:
        return SAMPLE

    def _table(self, tmp_path: Any, role: str, commits: int) -> SampleHudiTable:
        """SAMPLE in ``commits`` commits: each inserts a share of the rows and rewrites the
        previous share with stale scores first, so the latest slices hold SAMPLE."""
        table = SampleHudiTable(
            tmp_path / role, partition_field="name", max_file_rows=6, table_name=role
        )
        step = -(-SAMPLE.num_rows // max(commits, 1))
        for i in range(commits):
            share = SAMPLE.slice(i * step, step)
            stale = share.set_column(2, "score", pa.array([-1.0] * share.num_rows))
            table.commit(stale)
            table.commit(share)
        return table

    def make_datasource(self, tmp_path: Any) -> Any:
        return _without_meta_columns(
            self._spec().datasource(self._table(tmp_path, "data", self.commits).path)
        )

    def make_empty_datasource(self, tmp_path: Any) -> Any:
        table = SampleHudiTable(tmp_path / "empty", partition_field="name")
        return self._spec().datasource(table.path)

    def make_bad_datasource(self, tmp_path: Any) -> Any:
        table = self._table(tmp_path, "bad", 1)
        victim = sorted((tmp_path / "bad").rglob("*.parquet"))[-1]
        victim.write_bytes(b"PAR1 this is not parquet")
        self._bad_names = [victim.name, table.path]
        return self._spec().datasource(table.path)

    def bad_source_mentions(self, tmp_path: Any) -> list[str]:
        # hudi 0.4 reads the footers when it plans a snapshot: its error names the table;
        # hudi 0.5 reads them in the read task, whose error names the file.
        return self._bad_names


def _without_meta_columns(source: Any) -> Any:
    """``source`` with Hudi's meta columns projected away (they hold commit times and file
    names, which the expected table cannot know), through the projection the engine uses."""
    from shardflow.sdk.pushdowns import Pushdowns

    columns = [c for c in SAMPLE.column_names if c not in META_COLUMNS]
    return source.with_pushdowns(Pushdowns().with_projection({c: c for c in columns}))
