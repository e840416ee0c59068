"""Audio files: ``read_audio`` decodes WAV, FLAC, OGG (Vorbis, Opus), MP3 ... with soundfile.
Needs soundfile (``pip install 'shardflow[audio]'``), imported only when audio is read."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.audio.datasource import AudioDatasource

__all__ = ["AudioDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector audio`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.audio.conformance_suite import AudioSuite

        return AudioSuite
    raise AttributeError(name)
