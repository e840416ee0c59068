"""Video files: ``read_videos`` decodes frames with PyAV (FFmpeg), one row per frame.
Needs av (``pip install 'shardflow[video]'``), imported only when video is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.video.datasource import VideoDatasource

__all__ = ["VideoDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector videos`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.video.conformance_suite import VideoSuite

        return VideoSuite
    raise AttributeError(name)
