"""Fixtures for file connector tests: real S3 (moto's server) and GCS (gcp-storage-emulator).

Both servers listen on 127.0.0.1 on a free port, start once per session, and hold data in
memory. Each test gets a fresh bucket. ``store`` parametrizes a test over local disk, S3 and
GCS, giving a fresh folder URI and the options to reach it.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List

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
    storage_options: Dict[str, Any] = field(default_factory=dict)

    @property
    def fs(self) -> Any:
        import fsspec

        protocol = {"local": "file", "s3": "s3", "gcs": "gs"}[self.kind]
        return fsspec.filesystem(protocol, **self.storage_options)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *[p.strip("/") for p in parts]])

    def options(self) -> Dict[str, Any]:
        """Keyword arguments for read_*/write_* calls."""
        return {"storage_options": self.storage_options} if self.storage_options else {}

    def listing(self, *parts: str) -> List[str]:
        """Every object or file under a path, relative to it, sorted (hidden ones included)."""
        fs = self.fs
        fs.invalidate_cache()
        base = self.path(*parts)
        stripped = fs._strip_protocol(base).rstrip("/")
        if not fs.exists(stripped):
            return []
        return sorted(p[len(stripped) + 1 :] for p in fs.find(stripped))

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


@pytest.fixture
def s3_options(s3_endpoint):
    return {
        "key": FAKE_KEY,
        "secret": FAKE_SECRET,
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }


@pytest.fixture
def s3_bucket(s3_endpoint, s3_options):
    """A fresh, empty bucket; yields ``s3://<bucket>``."""
    import boto3

    name = f"test-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=FAKE_KEY,
        aws_secret_access_key=FAKE_SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=name)
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


class _Reader:
    """A read-only file wrapper that counts bytes and can fail once past a byte offset."""

    def __init__(self, f: Any, fs: "InstrumentedLocalFileSystem"):
        self._f = f
        self._fs = fs
        self._pos_read = 0

    def _maybe_fail(self) -> None:
        fs = self._fs
        if (
            fs.fail_reads_after is not None
            and self._pos_read >= fs.fail_reads_after
            and fs.read_failures < fs.fail_reads
        ):
            fs.read_failures += 1
            raise TimeoutError("read timed out (injected)")

    def read(self, size: int = -1) -> bytes:
        self._maybe_fail()
        data = self._f.read(size)
        self._pos_read += len(data)
        self._fs.bytes_read += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self) -> "_Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._f.close()


class InstrumentedLocalFileSystem:
    """Factory for a local filesystem that counts bytes read and injects transient faults.

    ``fail_opens``: the first N opens for reading raise ConnectionResetError.
    ``fail_reads`` with ``fail_reads_after``: that many reads raise TimeoutError once a file
    has been read past that many bytes.
    """

    def __new__(cls, fail_opens: int = 0, fail_reads: int = 0, fail_reads_after: Any = None):
        from fsspec.implementations.local import LocalFileSystem

        class _Instrumented(LocalFileSystem):
            cachable = False

            def __init__(self) -> None:
                super().__init__()
                self.fail_opens, self.fail_reads, self.fail_reads_after = (
                    fail_opens,
                    fail_reads,
                    fail_reads_after,
                )
                self.open_failures = self.read_failures = self.bytes_read = self.opens = 0

            def _open(self, path, mode="rb", block_size=None, **kwargs):
                f = super()._open(path, mode, block_size=block_size, **kwargs)
                if "r" not in mode:
                    return f
                self.opens += 1
                if self.open_failures < self.fail_opens:
                    self.open_failures += 1
                    f.close()
                    raise ConnectionResetError(
                        f"connection reset by peer (injected) opening {path}"
                    )
                return _Reader(f, self)

        return _Instrumented()


@pytest.fixture
def fast_retries(fresh_context):
    """Retries without waiting, so fault-injection tests stay fast."""
    from shardflow.engine.context import RetryPolicy

    fresh_context.retry = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002)
    return fresh_context


@pytest.fixture
def instrumented_fs():
    """``instrumented_fs(fail_opens=..., fail_reads=..., fail_reads_after=...)`` makes a fresh
    local filesystem that counts ``bytes_read`` and injects transient faults."""
    return InstrumentedLocalFileSystem
