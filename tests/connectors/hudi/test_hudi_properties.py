"""Property: for any sequence of upsert commits, read_hudi's snapshot is the latest version of
every record and an incremental query between any two instants is the records whose latest
version was committed between them (the model in hudi_models), whatever the file group size
and the number of read tasks."""

from __future__ import annotations

import tempfile

import pytest
from hudi_models import ModelTable, rows_of, trips
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.connectors.hudi.sample_tables import SampleHudiTable

pytestmark = pytest.mark.timeout(180)

commit_ids = st.lists(st.integers(0, 25), min_size=1, max_size=12, unique=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(commit_ids, min_size=1, max_size=3),
    max_file_rows=st.sampled_from([None, 2, 5]),
    blocks=st.integers(1, 6),
    window=st.tuples(st.integers(-1, 2), st.integers(0, 3)),
    partitioned=st.booleans(),
)
def test_snapshot_and_incremental_match_the_model(
    commits, max_file_rows, blocks, window, partitioned
):
    with tempfile.TemporaryDirectory() as folder:
        model = ModelTable(
            SampleHudiTable(
                f"{folder}/t",
                partition_field="city" if partitioned else None,
                max_file_rows=max_file_rows,
            )
        )
        for number, ids in enumerate(commits):
            model.commit(trips(ids, [float(i * 10 + number) for i in ids]))
        snapshot = sf.read_hudi(model.path, override_num_blocks=blocks)
        assert rows_of(snapshot) == model.snapshot()

        last = len(model.instants) - 1
        start_at, end_at = min(window[0], last), min(window[1], last)
        if start_at >= end_at:
            start_at, end_at = -1, end_at
        start = None if start_at < 0 else model.instants[start_at]
        end = model.instants[end_at]
        options = {"hoodie.read.file_group.end_timestamp": end}
        if start is not None:
            options["hoodie.read.file_group.start_timestamp"] = start
        changes = sf.read_hudi(
            model.path, query_type="incremental", hudi_options=options, override_num_blocks=blocks
        )
        assert rows_of(changes) == model.incremental(start, end)
