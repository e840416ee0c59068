"""The SparkSession XShards run on, when ``init_orca_context(backend="spark")`` asked for one.

One process holds at most one SparkContext: an active one (started by the user, a test
fixture or ``spark-submit``) is joined and never stopped here; a session started here is
stopped by ``stop_orca_context()``. A local master binds the driver to 127.0.0.1 with the UI
off, so nothing listens beyond this machine.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from shardflow.sdk.optional import require

_lock = threading.Lock()
_state: dict[str, Any] = {"session": None, "started": False}


def spark_session_or_none() -> Any:
    """The SparkSession XShards run on, or None when they run on the engine."""
    session = _state["session"]
    if session is None:
        return None
    if session.sparkContext._jsc is None:  # stopped by someone else
        _state.update(session=None, started=False)
        return None
    return session


def spark_session() -> Any:
    """The SparkSession XShards run on (raises when they do not run on Spark)."""
    session = spark_session_or_none()
    if session is None:
        raise RuntimeError(
            "No SparkSession for XShards: call init_orca_context(backend='spark') first."
        )
    return session


def use_spark(
    master: str | None = None,
    cores: int | None = None,
    conf: dict[str, str] | None = None,
    app_name: str = "shardflow-xshards",
) -> Any:
    """Run XShards on Spark from now on: join the active SparkContext, or start one.

    Args:
        master: A Spark master URL (``"local[2]"``, ``"spark://host:7077"``, ``"yarn"``);
            by default ``local[cores]``; ``""`` takes the one ``spark-submit`` configured.
            Ignored when a SparkContext is already active.
        cores: Cores of a local master (all when None).
        conf: More Spark settings for a session started here.
        app_name: The application's name.

    Returns:
        The SparkSession.
    """
    require("pyspark", "spark", "XShards on Spark")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    with _lock:
        if SparkContext._active_spark_context is not None:
            session = SparkSession.builder.getOrCreate()
            _state.update(session=session, started=False)
            return session
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName(app_name)
        if master != "":  # "" takes the master spark-submit configured
            master = master or f"local[{cores or '*'}]"
            builder = builder.master(master)
        if master and master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            builder = (
                builder.config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.ui.enabled", "false")
            )
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _state.update(session=session, started=True)
        return session


def leave_spark() -> None:
    """XShards run on the engine again; stop the session only if ``use_spark`` started it."""
    with _lock:
        session, started = _state["session"], _state["started"]
        _state.update(session=None, started=False)
        if session is not None and started:
            session.stop()
