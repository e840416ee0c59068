"""Fixtures of the Delta Lake tests: S3 through moto's server in a process of its own.

deltalake's Rust calls hold the GIL while they wait for the network, so moto's threaded
server (tests/storage_fixtures.py) cannot answer them from the same process.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import pytest
from storage_fixtures import FAKE_KEY, FAKE_SECRET

pytest.importorskip(
    "deltalake", reason="deltalake is not installed (pip install 'shardflow[delta]')"
)


@pytest.fixture(scope="session")
def moto_process():
    """moto's S3 server in a child process on 127.0.0.1; yields its endpoint URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.skip("moto's server did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(30)


@pytest.fixture
def delta_s3(moto_process):
    """A fresh bucket: yields (``s3://bucket``, deltalake storage options, boto3 client)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=moto_process,
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_SECRET,
        region_name="us-east-1",
    )
    bucket = f"delta-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    options = {
        "AWS_ENDPOINT_URL": moto_process,
        "AWS_ACCESS_KEY_ID": FAKE_KEY,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    return f"s3://{bucket}", options, client
