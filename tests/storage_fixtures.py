"""Storage servers for tests, shared by every test folder: real S3 (moto's server) and GCS
(gcp-storage-emulator), both on 127.0.0.1 on a free port, started once per session and holding
data in memory. Each test gets a fresh bucket. ``store`` parametrizes a test over local disk, S3
and GCS, giving a fresh folder URI and the options to reach it.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

# gcsfs probes for hierarchical-namespace buckets on every call unless told not to; the
# emulator does not answer those probes and each call would wait for a timeout.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

FAKE_KEY = "testing-access-key"
FAKE_SECRET = "testing-secret-key-do-not-leak"


@dataclass
class Store:
    """A place to write files in tests: local disk, S3 or GCS."""

    kind: str
    root: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def fs(self) -> Any:
        import fsspec

        protocol = {"local": "file", "s3": "s3", "gcs": "gs"}[self.kind]
        return fsspec.filesystem(protocol, **self.storage_options)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *[p.strip("/") for p in parts]])

    def options(self) -> dict[str, Any]:
        """Keyword arguments for read_*/write_* calls."""
        return {"storage_options": self.storage_options} if self.storage_options else {}

    def listing(self, *parts: str) -> list[str]:
        """Every object or file under a path, relative to it, sorted (hidden ones included)."""
        fs = self.fs
        fs.invalidate_cache()
        base = self.path(*parts)
        stripped = fs._strip_protocol(base).rstrip("/")
        if not fs.exists(stripped):
            return []
        return sorted(p[len(stripped) + 1 :] for p in fs.find(stripped))

    def data_files(self, *parts: str) -> list[str]:
        """The listing of a folder a write committed, less its ``_SUCCESS``: commits write it
        last on object stores (checked here), never on local disk."""
        listing = self.listing(*parts)
        if listing:
            assert ("_SUCCESS" in listing) == (self.kind != "local"), listing
        return [rel for rel in listing if rel != "_SUCCESS"]

    def write_bytes(self, relative: str, data: bytes) -> None:
        fs = self.fs
        target = fs._strip_protocol(self.path(relative))
        if self.kind == "local":
            fs.makedirs(os.path.dirname(target), exist_ok=True)
        with fs.open(target, "wb") as f:
            f.write(data)
        fs.invalidate_cache()


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server on 127.0.0.1; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer("127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def s3_process_endpoint():
    """moto's S3 server in a child process on 127.0.0.1; yields its endpoint URL.

    For libraries whose native calls hold the GIL while they wait for the network (hudi-rs):
    the threaded server of ``s3_endpoint`` could not answer them from the same process.
    """
    import socket
    import subprocess
    import sys
    import time

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
def s3_options(s3_endpoint):
    return {
        "key": FAKE_KEY,
        "secret": FAKE_SECRET,
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }


def new_bucket(endpoint: str, prefix: str = "test") -> tuple[str, Any]:
    """A fresh, empty bucket on the S3 server at ``endpoint``: (its name, a boto3 client)."""
    import boto3

    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=name)
    return name, client


@pytest.fixture
def s3_bucket(s3_endpoint, s3_options):
    """A fresh, empty bucket; yields ``s3://<bucket>``."""
    name, _ = new_bucket(s3_endpoint)
    yield f"s3://{name}"


@pytest.fixture(scope="session")
def gcs_endpoint():
    """gcp-storage-emulator on 127.0.0.1, in memory; yields its endpoint URL."""
    from gcp_storage_emulator.server import create_server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.ERROR)
    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    port = server._api._httpd.server_address[1]
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def gcs_options(gcs_endpoint):
    return {"endpoint_url": gcs_endpoint, "token": "anon", "project": "shardflow-test"}


@pytest.fixture
def gcs_bucket(gcs_options):
    """A fresh, empty bucket; yields ``gs://<bucket>``."""
    import fsspec

    name = f"test-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("gs", **gcs_options).mkdir(name)
    yield f"gs://{name}"


@pytest.fixture(params=["local", "s3", "gcs"])
def store(request, tmp_path):
    """A fresh folder on local disk, S3 or GCS."""
    if request.param == "local":
        yield Store("local", str(tmp_path / "store"))
    elif request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        yield Store("s3", f"{bucket}/data", request.getfixturevalue("s3_options"))
    else:
        bucket = request.getfixturevalue("gcs_bucket")
        yield Store("gcs", f"{bucket}/data", request.getfixturevalue("gcs_options"))


@pytest.fixture
def local_store(tmp_path):
    return Store("local", str(tmp_path / "store"))


@pytest.fixture
def s3_store(s3_bucket, s3_options):
    return Store("s3", f"{s3_bucket}/data", s3_options)
