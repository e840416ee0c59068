"""The model of a sample Hudi table: the latest version of every record, with the instant
that wrote it, after each commit. The oracle the Hudi tests compare reads with."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from shardflow.connectors.hudi.sample_tables import SampleHudiTable


@dataclass
class ModelTable:
    """A SampleHudiTable with the records each commit left: ``versions[i]`` maps each record
    key to (row, instant) after the i-th commit."""

    table: SampleHudiTable
    versions: list[dict[int, tuple[dict, str]]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.table.path

    @property
    def instants(self) -> list[str]:
        return self.table.instants

    def commit(self, rows: pa.Table) -> str:
        instant = self.table.commit(rows)
        latest = dict(self.versions[-1]) if self.versions else {}
        for row in rows.to_pylist():
            latest[row["id"]] = (row, instant)
        self.versions.append(latest)
        return instant

    def snapshot(self) -> list[dict]:
        """The latest records, sorted by id, with their commit time."""
        latest = self.versions[-1] if self.versions else {}
        return [
            {**row, "_hoodie_commit_time": instant} for _, (row, instant) in sorted(latest.items())
        ]

    def incremental(self, start: str | None, end: str | None) -> list[dict]:
        """The latest records written after ``start`` and up to ``end`` (latest version of
        each at ``end``), sorted by id."""
        if end is None:
            state = self.versions[-1]
        else:
            state = self.versions[self.instants.index(end)]
        return [
            {**row, "_hoodie_commit_time": instant}
            for _, (row, instant) in sorted(state.items())
            if (start is None or instant > start) and (end is None or instant <= end)
        ]


def trips(ids, fares, cities=None) -> pa.Table:
    cities = cities or [["sf", "la", "nyc"][i % 3] for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array(cities, pa.string()),
            "fare": pa.array(fares, pa.float64()),
            "note": pa.array([f"trip {i}" for i in ids], pa.string()),
        }
    )


def rows_of(ds, columns=("id", "city", "fare", "note", "_hoodie_commit_time")) -> list[dict]:
    """The dataset's rows restricted to ``columns``, sorted by id."""
    return sorted(({c: r[c] for c in columns} for r in ds.take_all()), key=lambda r: r["id"])
