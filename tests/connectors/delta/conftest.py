"""Fixtures of the Delta Lake tests: S3 through moto's server in a process of its own.

deltalake's Rust calls hold the GIL while they wait for the network, so moto's threaded
server cannot answer them from the same process: the tests use ``s3_process_endpoint`` (moto
in a child process, tests/storage_fixtures.py).
"""

from __future__ import annotations

import uuid

import pytest
from storage_fixtures import FAKE_KEY, FAKE_SECRET

pytest.importorskip(
    "deltalake", reason="deltalake is not installed (pip install 'shardflow[delta]')"
)


@pytest.fixture
def delta_s3(s3_process_endpoint):
    """A fresh bucket: yields (``s3://bucket``, deltalake storage options, boto3 client)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=s3_process_endpoint,
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_SECRET,
        region_name="us-east-1",
    )
    bucket = f"delta-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    options = {
        "AWS_ENDPOINT_URL": s3_process_endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    return f"s3://{bucket}", options, client
