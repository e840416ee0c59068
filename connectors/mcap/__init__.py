"""MCAP: ``read_mcap`` of MCAP (Message Capture) files, robotics logs of timestamped messages.
Needs the ``mcap`` reader (``pip install 'shardflow[mcap]'``), imported only when used."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.mcap.datasource import MCAPDatasource, TimeRange

__all__ = ["MCAPDatasource", "TimeRange"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector mcap`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.mcap.conformance_suite import MCAPSuite

        return MCAPSuite
    raise AttributeError(name)
