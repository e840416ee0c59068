"""shardflow.sdk.testing: the conformance kit every connector runs, ours and third-party ones.

Subclass a base class in a test module, say how to build your connector over a known
dataset, and pytest runs every check of the contract against it::

    import pyarrow as pa
    from shardflow.sdk.testing import DatasourceConformance

    class TestMySource(DatasourceConformance):
        def make_datasource(self, tmp_path):
            (tmp_path / "a.myf").write_text("...")
            return MySource(str(tmp_path))

        def expected_table(self):
            return pa.table({"x": [1, 2, 3]})

The same suite runs outside pytest with :func:`run_conformance`, which is what
``shardflow check-connector NAME`` does for an installed connector that exposes its suite
as ``conformance`` (see the connector guide).
"""

from shardflow.sdk.testing.checks import CHECKS, Check, SkipCheck
from shardflow.sdk.testing.compare import assert_rows_included, assert_same_rows
from shardflow.sdk.testing.discovery import find_conformance_suite
from shardflow.sdk.testing.runner import CheckResult, ConformanceReport, run_conformance
from shardflow.sdk.testing.suite import (
    ConnectorConformance,
    DatasinkConformance,
    DatasourceConformance,
    checks_for,
    describe_checks,
)

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "ConformanceReport",
    "ConnectorConformance",
    "DatasinkConformance",
    "DatasourceConformance",
    "SkipCheck",
    "assert_rows_included",
    "assert_same_rows",
    "checks_for",
    "describe_checks",
    "find_conformance_suite",
    "run_conformance",
]
