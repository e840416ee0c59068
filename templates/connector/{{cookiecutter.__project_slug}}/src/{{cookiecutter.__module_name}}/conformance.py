"""The conformance suite of this connector: sample data and the hooks shardflow's kit needs.

``tests/test_conformance.py`` subclasses :class:`Conformance` so pytest runs every check, and
``shardflow check-connector {{ cookiecutter.connector_name }}`` finds it as the package's
``conformance`` attribute.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from shardflow.sdk.testing import ConnectorConformance

from {{ cookiecutter.__module_name }}.datasink import {{ cookiecutter.__class_prefix }}Datasink
from {{ cookiecutter.__module_name }}.datasource import {{ cookiecutter.__class_prefix }}Datasource, list_files, read_file

ROWS = 30
FILES = 3


def sample_table() -> pa.Table:
    """The rows of the sample dataset: ids, names with nulls, and scores."""
    ids = list(range(ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([None if i % 7 == 3 else f"name-{i % 5}" for i in ids], pa.string()),
            "score": pa.array([i / 4 for i in ids], pa.float64()),
        }
    )


def write_sample(folder: Path) -> Path:
    """Write the sample dataset as FILES JSON Lines files (plus a marker file readers skip)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = sample_table().to_pylist()
    step = -(-ROWS // FILES)
    for i in range(FILES):
        lines = [json.dumps(row) for row in rows[i * step : (i + 1) * step]]
        (folder / f"part-{i}.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "_SUCCESS").write_text("")
    return folder


class Conformance(ConnectorConformance):
    """Hooks for the kit: where the sample data is, and how to read back what was written."""

    def make_datasource(self, tmp_path: Path) -> {{ cookiecutter.__class_prefix }}Datasource:
        return {{ cookiecutter.__class_prefix }}Datasource(str(write_sample(tmp_path / "data")))

    def expected_table(self) -> pa.Table:
        return sample_table()

    def make_empty_datasource(self, tmp_path: Path) -> {{ cookiecutter.__class_prefix }}Datasource:
        (tmp_path / "empty").mkdir()
        return {{ cookiecutter.__class_prefix }}Datasource(str(tmp_path / "empty"))

    def make_bad_datasource(self, tmp_path: Path) -> {{ cookiecutter.__class_prefix }}Datasource:
        folder = write_sample(tmp_path / "bad")
        (folder / "part-9-broken.jsonl").write_text('{"id": 1, "name": \n')
        return {{ cookiecutter.__class_prefix }}Datasource(str(folder), schema=sample_table().schema)

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["part-9-broken.jsonl"]

    def make_datasink(self, tmp_path: Path) -> {{ cookiecutter.__class_prefix }}Datasink:
        return {{ cookiecutter.__class_prefix }}Datasink(str(tmp_path / "out"))

    def read_back(self, tmp_path: Path) -> pa.Table:
        # Read the committed files directly, not through the sink, so the check is independent.
        from fsspec.implementations.local import LocalFileSystem

        fs = LocalFileSystem()
        files = list_files(fs, str(tmp_path / "out"))
        tables = [read_file(fs, f, sample_table().schema) for f in files]
        return pa.concat_tables(tables) if tables else sample_table().slice(0, 0)
