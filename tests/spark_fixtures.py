"""A SparkSession for tests: pyspark on local[2] with Java, bound to 127.0.0.1, started once per
test session and stopped at its end. Tests that use it skip when pyspark or Java is missing.

One process holds at most one SparkContext: every test that needs Spark takes the ``spark``
fixture; none starts a session of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest


def _java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        return None
    return os.path.dirname(os.path.dirname(os.path.realpath(java)))


@pytest.fixture(scope="session")
def spark():
    """A SparkSession on local[2], loopback only, with the UI off and Arrow transfers on."""
    pytest.importorskip(
        "pyspark", reason="pyspark is not installed (pip install 'shardflow[spark]')"
    )
    java_home = _java_home()
    if java_home is None:
        pytest.skip("Spark needs Java (a JDK 17 or newer on PATH or in JAVA_HOME)")
    os.environ.setdefault("JAVA_HOME", java_home)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    scratch = tempfile.mkdtemp(prefix="shardflow-spark-")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("shardflow-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", scratch)
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
        # The JIT's first tier only, and the serial collector: the tests' JVM lives for a
        # minute of small jobs, where C2 compiling and parallel GC threads cost half its CPU.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    shutil.rmtree(scratch, ignore_errors=True)
