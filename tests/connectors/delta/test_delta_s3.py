"""read_delta and write_delta on S3 (moto's server), through deltalake's object store."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shardflow as sf

deltalake = pytest.importorskip("deltalake")
pytestmark = pytest.mark.timeout(180)


def _objects(client, bucket):
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _data(start, n):
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 4}" for i in ids]})


def _fail_on(marker_id, batch):
    if marker_id in batch["id"].to_pylist():
        raise RuntimeError("injected failure in a write task")
    return batch


def test_round_trip_filter_and_time_travel_on_s3(delta_s3):
    bucket, options, client = delta_s3
    path = f"{bucket}/events"
    sf.from_arrow(_data(0, 300)).repartition(3).write_delta(
        path, partition_by=["day"], storage_options=options
    )
    sf.from_arrow(_data(300, 100)).write_delta(path, storage_options=options)
    oracle = deltalake.DeltaTable(path, storage_options=options).to_pyarrow_dataset()
    got = sf.read_delta(path, storage_options=options, filter=sf.col("day") == "d1").to_arrow()
    expected = oracle.to_table(filter=pc.field("day") == "d1")
    assert got.sort_by("id").to_pylist() == expected.sort_by("id").to_pylist()
    assert sf.read_delta(path, version=0, storage_options=options).count() == 300
    assert sf.read_delta(path, storage_options=options).count() == 400

    # A failed write leaves every object as it was.
    before = _objects(client, bucket.removeprefix("s3://"))
    ds = sf.from_arrow([_data(400 + 10 * i, 10) for i in range(4)]).map_batches(
        functools.partial(_fail_on, 425), batch_format="pyarrow"
    )
    with pytest.raises(Exception, match="injected failure"):
        ds.write_delta(path, storage_options=options)
    assert _objects(client, bucket.removeprefix("s3://")) == before
    assert deltalake.DeltaTable(path, storage_options=options).version() == 1


def test_credentials_never_appear(delta_s3):
    bucket, options, _ = delta_s3
    from shardflow.connectors.delta import DeltaDatasink, DeltaDatasource

    sf.from_arrow(_data(0, 5)).write_delta(f"{bucket}/t", storage_options=options)
    for shown in (
        repr(DeltaDatasource(f"{bucket}/t", storage_options=options)),
        repr(DeltaDatasink(f"{bucket}/t", storage_options=options)),
    ):
        assert options["AWS_SECRET_ACCESS_KEY"] not in shown
    with pytest.raises(FileNotFoundError) as info:
        sf.read_delta(f"{bucket}/missing", storage_options=options).count()
    assert options["AWS_SECRET_ACCESS_KEY"] not in str(info.value)
