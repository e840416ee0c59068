"""An S3 server (moto, on 127.0.0.1) for XShards' file tests, started once per session."""

from __future__ import annotations

import logging
import uuid

import pytest

KEY, SECRET = "testing-access-key", "testing-secret-key"


@pytest.fixture(scope="session")
def xshards_s3_endpoint():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer("127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_store(xshards_s3_endpoint):
    """A fresh bucket: (``s3://bucket``, storage_options)."""
    import boto3

    name = f"xshards-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=xshards_s3_endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    options = {
        "key": KEY,
        "secret": SECRET,
        "client_kwargs": {"endpoint_url": xshards_s3_endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    return f"s3://{name}", options


@pytest.fixture(params=["local", "ray", pytest.param("spark", marks=pytest.mark.slow)])
def orca_backend(request, fresh_context):
    """Run the test with XShards on shardflow's local backend, on Ray, and on Spark local[2]
    (the session of the ``spark`` fixture, joined by ``init_orca_context``). The Spark runs
    are slow cases (``make test-slow``); test_xshards_spark.py covers Spark in every run."""
    import shardflow as sf
    from shardflow.orca import init_orca_context, stop_orca_context

    if request.param == "spark":
        request.getfixturevalue("spark")
        init_orca_context(cluster_mode="local", cores=2, backend="spark")
        yield "spark"
        stop_orca_context()
        return
    if request.param == "ray":
        request.getfixturevalue("ray_session")
        sf.init(backend="ray")
    else:
        sf.init(backend="local")
    yield request.param
