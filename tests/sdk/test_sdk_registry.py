"""The connector registry: names in code, and packages found through entry points.

Installed packages are simulated by ``*.dist-info`` folders on ``sys.path``, which is how
``importlib.metadata`` finds real installations.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.sdk import BlockMetadata, Datasink, Datasource, ReadTask
from shardflow.sdk.registry import (
    BUILTIN_CONNECTORS,
    ENTRY_POINT_GROUP,
    ConnectorRegistry,
    ConnectorSpec,
    LazyConnector,
)


class CountingDatasource(Datasource):
    """``n`` integers in column ``v``, in ``parts`` read tasks."""

    def __init__(self, n: int = 10, parts: int = 2):
        self.n, self.parts = n, parts

    def get_read_tasks(self, parallelism, **kwargs):
        bounds = np.linspace(0, self.n, self.parts + 1, dtype=int)
        return [
            ReadTask(
                lambda lo=int(lo), hi=int(hi): [pa.table({"v": np.arange(lo, hi)})],
                BlockMetadata(num_rows=int(hi - lo), size_bytes=8 * int(hi - lo)),
            )
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]


class NullSink(Datasink):
    def write(self, blocks, ctx):
        return sum(b.num_rows for b in blocks)


def _write_dist(site, dist_name: str, entry_points: dict) -> None:
    # wheels spell the folder with underscores; a hyphen would end the name early
    info = site / f"{dist_name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
    lines = [f"[{ENTRY_POINT_GROUP}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


PLUGIN_MODULE = textwrap.dedent(
    """
    import pyarrow as pa
    from shardflow.sdk import BlockMetadata, ConnectorSpec, Datasource, ReadTask


    class GoodDatasource(Datasource):
        def __init__(self, value=1):
            self.value = value

        def get_read_tasks(self, parallelism, **kwargs):
            value = self.value
            return [ReadTask(lambda: [pa.table({"good": [value]})], BlockMetadata(1, 8))]


    def spec():
        return ConnectorSpec("good-factory", datasource=GoodDatasource)


    NOT_A_CONNECTOR = 42
    """
)


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """A folder on sys.path holding fake installed packages with entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sf_test_plugin.py").write_text(PLUGIN_MODULE)
    _write_dist(
        site,
        "good-pkg",
        {
            "good": "sf_test_plugin:GoodDatasource",
            "good-factory": "sf_test_plugin:spec",
        },
    )
    _write_dist(
        site,
        "broken-pkg",
        {
            "missing-module": "sf_test_no_such_module:Thing",
            "wrong-object": "sf_test_plugin:NOT_A_CONNECTOR",
        },
    )
    _write_dist(site, "dup-one", {"dup": "sf_test_plugin:GoodDatasource"})
    _write_dist(site, "dup-two", {"dup": "sf_test_plugin:GoodDatasource"})
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("sf_test_plugin", None)


# -- registration in code --------------------------------------------------------------


def test_register_and_get():
    registry = ConnectorRegistry()
    spec = registry.register("counting", datasource=CountingDatasource)
    assert isinstance(spec, ConnectorSpec)
    assert registry.get("counting") is spec
    assert spec.package == "<code>"
    assert "read" in spec.capabilities and "write" not in spec.capabilities
    assert [s.name for s in registry.list()] == ["counting"]


def test_same_package_may_register_again_but_other_package_may_not():
    registry = ConnectorRegistry()
    registry.register("x", datasource=CountingDatasource, package="pkg-a")
    registry.register("x", datasource=CountingDatasource, package="pkg-a")
    with pytest.raises(ValueError, match="pkg-a.*pkg-b"):
        registry.register("x", datasource=CountingDatasource, package="pkg-b")
    replaced = registry.register("x", datasink=NullSink, package="pkg-b", replace=True)
    assert registry.get("x") is replaced


def test_register_validates_arguments():
    registry = ConnectorRegistry()
    with pytest.raises(ValueError, match="non-empty"):
        registry.register(" ", datasource=CountingDatasource)
    with pytest.raises(ValueError, match="datasource, a datasink"):
        registry.register("nothing")
    with pytest.raises(TypeError, match="datasource"):
        registry.register("bad", datasource=42)


def test_unknown_name_lists_known_names():
    registry = ConnectorRegistry()
    registry.register("alpha", datasource=CountingDatasource)
    with pytest.raises(KeyError, match="alpha"):
        registry.get("beta")


def test_read_datasource_by_name():
    sf.register_connector("sf-test-counting", datasource=CountingDatasource, replace=True)
    rows = sf.read_datasource("sf-test-counting", n=7, parts=3).take_all()
    assert rows == [{"v": i} for i in range(7)]


def test_read_args_need_a_name():
    with pytest.raises(TypeError, match="does not take"):
        sf.read_datasource(CountingDatasource(), n=3)


def test_write_only_connector_cannot_read_and_vice_versa():
    sf.register_connector("sf-test-sink-only", datasink=NullSink, replace=True)
    sf.register_connector("sf-test-source-only", datasource=CountingDatasource, replace=True)
    with pytest.raises(ValueError, match="can only write"):
        sf.read_datasource("sf-test-sink-only")
    with pytest.raises(ValueError, match="can only read"):
        sf.range(3).write_datasink("sf-test-source-only")


def test_read_datasource_unknown_name():
    with pytest.raises(KeyError, match="sf-test-never-registered"):
        sf.read_datasource("sf-test-never-registered")


# -- entry points ----------------------------------------------------------------------


def test_entry_point_connectors_are_found(plugin_site):
    registry = ConnectorRegistry()
    good = registry.get("good")
    assert good.package == "good-pkg"
    assert good.datasource.__name__ == "GoodDatasource"
    assert registry.get("good-factory").datasource is good.datasource


def test_broken_entry_points_are_reported_by_name(plugin_site, caplog):
    registry = ConnectorRegistry()
    broken = registry.broken()
    assert "sf_test_no_such_module" in broken["missing-module"]
    assert "broken-pkg" in broken["missing-module"]
    assert "wrong-object" in broken
    with pytest.raises(ImportError, match="missing-module"):
        registry.get("missing-module")
    # the good connectors still load
    assert registry.get("good").package == "good-pkg"
    assert any("missing-module" in r.getMessage() for r in caplog.records)


def test_duplicate_names_from_two_packages_raise(plugin_site):
    registry = ConnectorRegistry()
    with pytest.raises((ValueError, ImportError), match="dup-one.*dup-two|dup-two.*dup-one"):
        registry.get("dup")


def test_entry_points_are_read_lazily(plugin_site, monkeypatch):
    calls = []
    real = importlib.metadata.entry_points

    def counting_entry_points(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting_entry_points)
    registry = ConnectorRegistry()
    registry.register("in-code", datasource=CountingDatasource)
    assert calls == []
    registry.get("good")
    registry.get("good")
    assert calls == [{"group": ENTRY_POINT_GROUP}]


def test_unreadable_entry_points_do_not_break_lookup(monkeypatch):
    def failing(**kwargs):
        raise RuntimeError("corrupt installation")

    monkeypatch.setattr(importlib.metadata, "entry_points", failing)
    registry = ConnectorRegistry()
    registry.register("in-code", datasource=CountingDatasource)
    assert registry.get("in-code").name == "in-code"


SUBPROCESS_CHECK = textwrap.dedent(
    """
    import json, sys
    import shardflow as sf
    from shardflow.sdk import get_registry

    result = {"ray_imported": "ray" in sys.modules}
    result["good"] = sf.read_datasource("good", value=5).take_all()
    result["broken"] = sorted(get_registry().broken())
    try:
        sf.read_datasource("dup")
        result["dup"] = "no error"
    except Exception as exc:
        result["dup"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(result))
    """
)


def test_installed_packages_in_a_fresh_interpreter(plugin_site):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plugin_site)] + [p for p in sys.path if p])
    proc = subprocess.run(
        [sys.executable, "-c", SUBPROCESS_CHECK],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ray_imported"] is False
    assert result["good"] == [{"good": 5}]
    assert {"missing-module", "wrong-object"} <= set(result["broken"])
    assert "dup-one" in result["dup"] and "dup-two" in result["dup"]


# -- built-in connectors, known by dotted path ---------------------------------------------------


def test_lazy_connectors_are_imported_when_first_used():
    lazy = LazyConnector("shardflow.connectors.range.RangeDatasource")
    registry = ConnectorRegistry(lazy={"lazy-range": lazy})
    spec = registry.get("lazy-range")
    assert spec.datasource.__name__ == "RangeDatasource" and spec.package == "shardflow"
    assert spec.capabilities == ["read"]
    assert [s.name for s in registry.list()] == ["lazy-range"]


def test_missing_optional_dependency_says_what_to_install():
    lazy = LazyConnector(
        "shardflow.connectors.range.RangeDatasource",
        requires=("no_such_module_for_shardflow_tests",),
        install="pip install 'shardflow[extra]'",
    )
    registry = ConnectorRegistry(lazy={"needs-extra": lazy})
    hint = r"no_such_module_for_shardflow_tests.*pip install 'shardflow\[extra\]'"
    with pytest.raises(ImportError, match=hint):
        registry.get("needs-extra")
    assert "shardflow[extra]" in registry.broken()["needs-extra"]
    assert registry.list() == []


def test_builtin_names_are_reserved_unless_replaced():
    registry = ConnectorRegistry(lazy=BUILTIN_CONNECTORS)
    with pytest.raises(ValueError, match="Two connectors are named 'parquet'"):
        registry.register("parquet", datasource=CountingDatasource)
    registry.register("parquet", datasource=CountingDatasource, replace=True)
    assert registry.get("parquet").datasource is CountingDatasource
    assert registry.get("csv").datasource.__name__ == "CSVDatasource"


def test_every_builtin_connector_resolves():
    registry = ConnectorRegistry(lazy=BUILTIN_CONNECTORS)
    names = {s.name for s in registry.list()} | set(registry.broken())
    assert names == set(BUILTIN_CONNECTORS)
    for spec in registry.list():
        assert spec.datasource is not None or spec.datasink is not None
        classes = [c for c in (spec.datasource, spec.datasink) if c is not None]
        assert all(c.__module__.startswith("shardflow.connectors.") for c in classes)


def test_importing_shardflow_registers_nothing_eagerly():
    code = (
        "import sys, shardflow as sf\n"
        "from shardflow.sdk.registry import get_registry\n"
        "assert 'shardflow.connectors.range' not in sys.modules\n"
        "assert sf.read_datasource('range', n=3).count() == 3\n"
        "assert 'shardflow.connectors.range' in sys.modules\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
