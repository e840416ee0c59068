"""Behaviour of the {{ cookiecutter.connector_name }} connector beyond the conformance kit."""

from __future__ import annotations

import pyarrow as pa
import pytest
import shardflow as sf

from {{ cookiecutter.__module_name }} import {{ cookiecutter.__class_prefix }}Datasink, {{ cookiecutter.__class_prefix }}Datasource
from {{ cookiecutter.__module_name }}.conformance import sample_table, write_sample


def test_found_by_name_through_the_entry_point(tmp_path):
    folder = write_sample(tmp_path / "data")
    got = sf.read_datasource("{{ cookiecutter.connector_name }}", path=str(folder)).to_arrow()
    assert got.sort_by("id").equals(sample_table())


def test_select_is_pushed_into_the_read(tmp_path):
    source = {{ cookiecutter.__class_prefix }}Datasource(str(write_sample(tmp_path / "data")))
    projected = source.apply_projection({"score": "s"})
    tasks = projected.get_read_tasks(1)
    assert tasks[0].schema == pa.schema([("s", pa.float64())])
    got = sf.read_datasource(source).select_columns(["score"]).to_arrow()
    expected = sample_table().column("score").to_pylist()
    assert sorted(got.column("score").to_pylist()) == sorted(expected)


def test_write_then_read_by_name(tmp_path):
    sf.from_arrow(sample_table()).write_datasink("{{ cookiecutter.connector_name }}", path=str(tmp_path / "out"))
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files and all(name.startswith("part-") for name in files)
    got = sf.read_datasource("{{ cookiecutter.connector_name }}", path=str(tmp_path / "out"), schema=sample_table().schema)
    assert got.to_arrow().sort_by("id").equals(sample_table())


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        sf.read_datasource({{ cookiecutter.__class_prefix }}Datasource(str(tmp_path / "nowhere"))).count()


def test_bad_arguments():
    with pytest.raises(TypeError, match="path"):
        {{ cookiecutter.__class_prefix }}Datasource(None)
    with pytest.raises(TypeError, match="path"):
        {{ cookiecutter.__class_prefix }}Datasink("")
