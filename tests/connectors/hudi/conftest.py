"""Fixtures of the Hudi tests: sample tables laid down with pyarrow (hudi-rs does not write
tables), each with its model (hudi_models.ModelTable)."""

from __future__ import annotations

import pytest

pytest.importorskip("hudi", reason="hudi is not installed (pip install 'shardflow[hudi]')")

from hudi_models import ModelTable, trips

from shardflow.connectors.hudi.sample_tables import SampleHudiTable


@pytest.fixture
def trips_table(tmp_path) -> ModelTable:
    """A partitioned copy-on-write table over three commits: 30 inserts, then updates and
    inserts across partitions, then one partition's updates; file groups of at most 6
    records, so most of them have two or three slices."""
    model = ModelTable(SampleHudiTable(tmp_path / "trips", partition_field="city", max_file_rows=6))
    model.commit(trips(list(range(30)), [i * 1.5 for i in range(30)]))
    model.commit(trips([0, 4, 7, 30, 31], [-1.0, -2.0, -3.0, 300.0, 310.0]))
    model.commit(trips([1, 10, 13], [-4.0, -5.0, -6.0], ["la", "la", "la"]))
    return model
