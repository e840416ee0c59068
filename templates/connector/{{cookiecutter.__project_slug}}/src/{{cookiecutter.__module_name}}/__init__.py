"""{{ cookiecutter.description }}

Registered with shardflow under the name ``{{ cookiecutter.connector_name }}`` through the entry point
group ``shardflow.connectors`` (see pyproject.toml).

Examples:
    >>> import shardflow as sf
    >>> ds = sf.read_datasource("{{ cookiecutter.connector_name }}", path="data/")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk import ConnectorSpec

from {{ cookiecutter.__module_name }}.datasink import {{ cookiecutter.__class_prefix }}Datasink
from {{ cookiecutter.__module_name }}.datasource import {{ cookiecutter.__class_prefix }}Datasource

NAME = "{{ cookiecutter.connector_name }}"

__all__ = ["NAME", "{{ cookiecutter.__class_prefix }}Datasink", "{{ cookiecutter.__class_prefix }}Datasource", "connector"]


def connector() -> ConnectorSpec:
    """The entry point: what shardflow registers under ``{{ cookiecutter.connector_name }}``."""
    return ConnectorSpec(
        name=NAME,
        datasource={{ cookiecutter.__class_prefix }}Datasource,
        datasink={{ cookiecutter.__class_prefix }}Datasink,
    )


def __getattr__(name: str) -> Any:
    # ``conformance`` is the suite ``shardflow check-connector`` runs; imported on demand so that
    # using the connector never imports the test kit.
    if name == "conformance":
        from {{ cookiecutter.__module_name }}.conformance import Conformance

        return Conformance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
