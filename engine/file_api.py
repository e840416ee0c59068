"""File reads and writes: ``read_<format>`` functions and ``Dataset.write_<format>`` methods.

The Dataset class mixes in :class:`FileWriteMixin`; file connectors live in
shardflow.connectors and are reached through the SDK's FileBasedDatasource/FileDatasink.
"""

from __future__ import annotations


class FileWriteMixin:
    """``write_<format>`` methods of Dataset."""
