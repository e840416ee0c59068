"""Fixtures of the Delta Lake tests: S3 through moto's server in a process of its own.

deltalake's Rust calls hold the GIL while they wait for the network, so moto's threaded
server cannot answer them from the same process: the tests use ``s3_process_endpoint`` (moto
in a child process, tests/storage_fixtures.py).
"""

from __future__ import annotations

import pytest
from storage_fixtures import FAKE_KEY, FAKE_SECRET, new_bucket

pytest.importorskip(
    "deltalake", reason="deltalake is not installed (pip install 'shardflow[delta]')"
)


@pytest.fixture
def delta_s3(s3_process_endpoint):
    """A fresh bucket: yields (``s3://bucket``, deltalake storage options, boto3 client)."""
    bucket, client = new_bucket(s3_process_endpoint, "delta")
    options = {
        "AWS_ENDPOINT_URL": s3_process_endpoint,
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    return f"s3://{bucket}", options, client
