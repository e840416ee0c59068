"""Errors at the edges of storage: missing credentials, refused credentials and an
unreachable endpoint give one paragraph naming the cause and what to do, after a bounded,
logged number of retries, without the storage client's traceback; the CLI says the same."""

from __future__ import annotations

import json
import logging
import socket
import traceback

import pytest

import shardflow as sf
from shardflow.cli import main
from shardflow.engine.api.context import RetryPolicy
from shardflow.sdk.storage_errors import (
    StorageCredentialsError,
    StorageUnreachableError,
    explain_storage_error,
)


@pytest.fixture
def no_aws_credentials(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata lookups
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shown(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def test_missing_credentials(s3_bucket, s3_endpoint, no_aws_credentials):
    options = {"client_kwargs": {"endpoint_url": s3_endpoint}}
    with pytest.raises(StorageCredentialsError) as info:
        sf.read_parquet(f"{s3_bucket}/data/", storage_options=options)
    error = info.value
    assert isinstance(error, PermissionError)
    message = str(error)
    assert message.startswith(f"{s3_bucket}/data")
    assert "no credentials" in message and "AWS_ACCESS_KEY_ID" in message
    shown = _shown(error)
    assert "botocore" not in shown and "aiobotocore" not in shown
    assert len(shown.splitlines()) < 10, shown
    assert error.original is not None  # the client's error stays at hand


def test_unreachable_endpoint_fails_after_logged_retries(fresh_context, caplog):
    fresh_context.retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    options = {"client_kwargs": {"endpoint_url": endpoint}, "key": "k", "secret": "s"}
    with caplog.at_level(logging.WARNING, logger="shardflow.sdk.retry"):
        with pytest.raises(StorageUnreachableError) as info:
            sf.read_parquet("s3://bucket/data/", storage_options=options)
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 2, retries  # attempts 1 and 2 of 3 were retried, and logged
    assert "attempt 1 of 3" in retries[0] and "attempt 2 of 3" in retries[1]
    message = str(info.value)
    assert endpoint in message and "after 3 attempts" in message and "endpoint_url" in message
    assert "botocore" not in _shown(info.value)


def test_explanations_of_client_errors():
    from botocore.exceptions import ClientError, NoCredentialsError

    refused = ClientError(
        {
            "Error": {
                "Code": "InvalidAccessKeyId",
                "Message": "The AWS Access Key Id you provided does not exist in our records.",
            }
        },
        "ListObjectsV2",
    )
    error = explain_storage_error(refused, "s3://b/x")
    assert isinstance(error, StorageCredentialsError)
    assert "refused the credentials" in str(error)
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "Get")
    assert "denied access" in str(explain_storage_error(denied, "s3://b/x"))
    assert isinstance(explain_storage_error(NoCredentialsError(), "s3://b/x"), PermissionError)
    # local paths and unrelated errors are left alone
    assert explain_storage_error(PermissionError("denied"), "/tmp/x") is None
    assert explain_storage_error(ValueError("bad parquet"), "s3://b/x") is None


def test_cli_inspect_without_credentials(s3_bucket, s3_endpoint, no_aws_credentials, capsys):
    options = json.dumps({"client_kwargs": {"endpoint_url": s3_endpoint}})
    code = main(["inspect", f"{s3_bucket}/data/", "--storage-options", options])
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.err and "botocore" not in captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("shardflow: error: s3://")
    assert "no credentials" in lines[0]


def test_ragged_udf_output_says_which_columns():
    with pytest.raises(ValueError) as info:
        ds = sf.range(4, override_num_blocks=1)
        ds.map_batches(lambda b: {"a": b["id"], "b": b["id"][:1]}).take_all()
    message = str(info.value)
    assert "different lengths" in message and "'a': 4" in message and "'b': 1" in message
    assert "Traceback" not in message  # the message says it all
