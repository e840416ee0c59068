"""Fixtures of the differential suite: ``ray.data`` on the session's Ray, shardflow locally.

The suite needs Ray Data (``pip install -e .[test,bench]``, which ``make test`` does) and
skips as a whole without it. Ray is the session fixture of tests/conftest.py: started once,
with two CPUs, on 127.0.0.1.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

import pytest
from harness import use_sort_shuffles

sys.path.insert(0, os.path.dirname(__file__))  # the harness and the case modules

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")

try:  # ray.data needs Ray Data's own dependencies, which the bench extra installs
    import ray.data  # noqa: F401

    HAVE_RAY_DATA = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_RAY_DATA = False


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="ray.data is not installed (pip install -e .[bench])")
    for item in items:
        if str(item.fspath).startswith(here):
            # Ray Data warns about its own deprecations; they say nothing about shardflow.
            item.add_marker(pytest.mark.filterwarnings("ignore"))
            if not HAVE_RAY_DATA:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def rd(ray_session):
    """``ray.data``, quiet, on the session's Ray."""
    import ray.data

    for name in ("ray", "ray.data", "ray.data._internal"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", module="ray")
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    if hasattr(context, "enable_operator_progress_bars"):
        context.enable_operator_progress_bars = False
    use_sort_shuffles(context)
    return ray.data


@pytest.fixture
def sfm(fresh_context):
    """``shardflow`` on its local backend."""
    import shardflow

    shardflow.init(backend="local")
    return shardflow
