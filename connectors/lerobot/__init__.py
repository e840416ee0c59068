"""LeRobot v3 robotics datasets: ``read_lerobot`` reads Parquet frames with their camera images.
Needs av and Pillow (``pip install 'shardflow[lerobot]'``), imported only when a dataset is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.lerobot.datasource import LeRobotDatasource

__all__ = ["LeRobotDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector lerobot`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.lerobot.conformance_suite import LeRobotSuite

        return LeRobotSuite
    raise AttributeError(name)
