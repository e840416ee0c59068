"""Without pyiceberg installed, shardflow works and the Iceberg API says what to install."""

from __future__ import annotations

import os
import subprocess
import sys

WITHOUT_PYICEBERG = """
import sys
sys.modules["pyiceberg"] = None  # as if it were not installed
import shardflow as sf
from shardflow.sdk.registry import get_registry

assert sf.range(3).count() == 3
for call in (
    lambda: sf.read_iceberg("db.table"),
    lambda: sf.range(3).write_iceberg("db.table"),
    lambda: sf.read_datasource("iceberg", table_identifier="db.table"),
):
    try:
        call()
    except ImportError as exc:
        assert "pip install 'shardflow[iceberg]'" in str(exc), exc
    else:
        raise AssertionError("no ImportError")
assert "shardflow[iceberg]" in get_registry().broken()["iceberg"]
assert "iceberg" not in [s.name for s in get_registry().list()]
"""


def test_iceberg_without_pyiceberg_says_what_to_install():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYICEBERG],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
