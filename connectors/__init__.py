"""shardflow.connectors: the built-in datasources and datasinks, one package per format or system
(parquet/, csv/, json/, iceberg/, ...). Uses shardflow.sdk only."""

from __future__ import annotations

from typing import Any


def conformance(name: str) -> Any:
    """The conformance suite of built-in connector ``name`` (for ``shardflow check-connector``).

    Imports the test kit only when called, so using a connector never loads it.
    """
    from shardflow.connectors.suites import SUITES

    if name not in SUITES:
        raise LookupError(f"No built-in conformance suite for connector {name!r}.")
    return SUITES[name]
