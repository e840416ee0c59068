"""Every built-in connector passes the conformance kit (shardflow.sdk.testing).

The suites live in shardflow.connectors.suites (so ``shardflow check-connector`` can run them);
here each becomes a pytest class, as a third-party package's test module would subclass them.
"""

from __future__ import annotations

import pytest

from shardflow.connectors.suites import SUITES
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance, run_conformance
from shardflow.sdk.testing.discovery import find_conformance_suite


def _builtin_names():
    """Connectors registered by shardflow itself (their classes live in shardflow.connectors)."""
    names = set()
    for spec in get_registry().list():
        classes = [c for c in (spec.datasource, spec.datasink) if c is not None]
        if any(getattr(c, "__module__", "").startswith("shardflow.connectors.") for c in classes):
            names.add(spec.name)
    return names


for _name, _suite in SUITES.items():
    _cls = type(f"Test{_suite.__name__[: -len('Suite')]}", (_suite,), {})
    globals()[_cls.__name__] = _cls


def test_every_builtin_connector_has_a_suite():
    missing = sorted(_builtin_names() - set(SUITES))
    assert not missing, f"built-in connectors without a conformance suite: {missing}"


@pytest.mark.parametrize("name", sorted(SUITES))
def test_check_connector_finds_builtin_suites(name):
    assert find_conformance_suite(name) is SUITES[name]


@pytest.mark.parametrize("name", sorted(SUITES))
def test_pipelines_on_both_backends(name, backend, tmp_path):
    suite = SUITES[name]
    checks = ["pipeline_through_shardflow", "empty_source_reads_empty"]
    if issubclass(suite, ConnectorConformance):
        checks += ["write_through_shardflow", "failed_pipeline_write_leaves_nothing"]
    report = run_conformance(suite, checks=checks)
    assert report.ok, report.format()
    assert report.count("passed") >= 2, report.format()
