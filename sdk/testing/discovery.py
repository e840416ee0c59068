"""Find the conformance suite an installed connector ships, so it can be checked by name.

The convention: the connector's package exposes an attribute named ``conformance`` that is
a conformance suite class (a subclass of DatasourceConformance, DatasinkConformance or
ConnectorConformance), or a function returning one that takes no arguments or the
connector's name (one function can then serve every connector of a package). It is looked up on

1. the module its ``shardflow.connectors`` entry point names (``pkg:connector`` -> ``pkg``),
2. the modules that define its Datasource and Datasink classes, and their parent packages.

A module-level ``__getattr__`` may provide it lazily, so using the connector never imports
the test kit.
"""

from __future__ import annotations

import importlib
from importlib import metadata as importlib_metadata
from typing import Any

from shardflow.sdk.registry import ENTRY_POINT_GROUP, ConnectorSpec, get_registry
from shardflow.sdk.testing.suite import checks_for

ATTRIBUTE = "conformance"


def _candidate_modules(name: str, spec: ConnectorSpec) -> list[str]:
    modules: list[str] = []
    try:
        for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == name:
                modules.append(ep.value.split(":")[0].strip())
    except Exception:  # a broken installation: fall back to the classes' modules
        pass
    for obj in (spec.datasource, spec.datasink):
        module = getattr(obj, "__module__", None)
        if not module:
            continue
        parts = module.split(".")
        modules += [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
    seen, ordered = set(), []
    for module in modules:
        if module not in seen and module not in ("shardflow", "shardflow.sdk"):
            seen.add(module)
            ordered.append(module)
    return ordered


def _takes_an_argument(fn: Any) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _as_suite(obj: Any, name: str) -> Any | None:
    if checks_for(obj):
        return obj
    if callable(obj) and not isinstance(obj, type):
        made = obj(name) if _takes_an_argument(obj) else obj()
        if checks_for(made):
            return made
    return None


def find_conformance_suite(name: str) -> Any:
    """The conformance suite of the registered connector ``name``.

    Args:
        name: A connector name, as listed by ``shardflow connectors``.

    Returns:
        A suite class (or instance) to give to :func:`run_conformance`.

    Raises:
        KeyError: No connector has that name.
        ImportError: The connector's entry point failed to load.
        LookupError: The connector ships no suite; the message says how to add one.
    """
    spec = get_registry().get(name)
    modules = _candidate_modules(name, spec)
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        obj = getattr(module, ATTRIBUTE, None)
        if obj is None:
            continue
        suite = _as_suite(obj, name)
        if suite is None:
            raise LookupError(
                f"{module_name}.{ATTRIBUTE} of connector {name!r} is a {type(obj).__name__}, not a "
                "conformance suite: make it a subclass of "
                "shardflow.sdk.testing.ConnectorConformance (or DatasourceConformance / "
                "DatasinkConformance)."
            )
        return suite
    looked = ", ".join(modules) or "no module"
    raise LookupError(
        f"Connector {name!r} (from {spec.package}) ships no conformance suite. Expose one as "
        f"'{ATTRIBUTE}' in the module of its entry point (looked in: {looked}): a subclass of "
        "shardflow.sdk.testing.ConnectorConformance that builds the connector over sample data."
    )
