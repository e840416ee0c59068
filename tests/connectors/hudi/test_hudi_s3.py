"""read_hudi on S3 (moto's server), through hudi-rs's object store and ``storage_options``.

hudi-rs holds the GIL while it waits for the network, so the server runs in a process of its
own (``s3_process_endpoint``).
"""

from __future__ import annotations

import pytest
from hudi_models import ModelTable, rows_of, trips
from storage_fixtures import FAKE_KEY, FAKE_SECRET, new_bucket

import shardflow as sf
from shardflow.connectors.hudi.sample_tables import SampleHudiTable

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def s3_table(s3_process_endpoint, tmp_path):
    """A sample table copied into a fresh bucket: (its s3:// URI, storage options, model)."""
    bucket, client = new_bucket(s3_process_endpoint, "hudi")
    model = ModelTable(SampleHudiTable(tmp_path / "trips", partition_field="city", max_file_rows=5))
    model.commit(trips(list(range(20)), [float(i) for i in range(20)]))
    model.commit(trips([3, 6, 20], [-3.0, -6.0, 20.0]))
    for file in sorted(p for p in (tmp_path / "trips").rglob("*") if p.is_file()):
        key = f"tables/trips/{file.relative_to(tmp_path / 'trips').as_posix()}"
        client.upload_file(str(file), bucket, key)
    options = {
        "aws_endpoint_url": s3_process_endpoint,
        "aws_access_key_id": FAKE_KEY,
        "aws_secret_access_key": FAKE_SECRET,
        "aws_region": "us-east-1",
        "aws_allow_http": "true",
    }
    return f"s3://{bucket}/tables/trips", options, model


def test_snapshot_filter_and_incremental_on_s3(s3_table, backend):
    uri, options, model = s3_table
    ds = sf.read_hudi(uri, storage_options=options)
    assert rows_of(ds) == model.snapshot()
    assert all(f.startswith(uri + "/") for f in ds.input_files())
    la = sf.read_hudi(uri, filters=[("city", "=", "la")], storage_options=options)
    assert rows_of(la) == [r for r in model.snapshot() if r["city"] == "la"]
    first = model.instants[0]
    changes = sf.read_hudi(
        uri,
        query_type="incremental",
        hudi_options={"hoodie.read.file_group.start_timestamp": first},
        storage_options=options,
    )
    assert rows_of(changes) == model.incremental(first, None)


def test_missing_table_on_s3_names_it(s3_table):
    uri, options, _ = s3_table
    with pytest.raises(FileNotFoundError, match="No Hudi table at s3://.*/tables/other"):
        sf.read_hudi(uri.replace("trips", "other"), storage_options=options).take_all()
