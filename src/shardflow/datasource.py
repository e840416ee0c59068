"""Datasources, sinks and file-layer names, as Ray Data's ``ray.data.datasource``.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.datasource import DummyOutputDatasink
    >>> sink = DummyOutputDatasink()
    >>> sf.range(3).write_datasink(sink)
    >>> sink.num_ok
    1
"""

from __future__ import annotations

from shardflow.connectors.lerobot import LeRobotDatasource
from shardflow.connectors.mcap import MCAPDatasource, TimeRange
from shardflow.sdk.datasink import Datasink, WriteResult, WriteReturnType
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.datasource_extras import (
    BaseFileMetadataProvider,
    Connection,
    DefaultFileMetadataProvider,
    DummyOutputDatasink,
    FileMetadataProvider,
    PartitionStyle,
    PathPartitionParser,
    RandomIntRowDatasource,
    Reader,
)
from shardflow.sdk.file_datasink import BlockBasedFileDatasink, RowBasedFileDatasink
from shardflow.sdk.file_datasource import FileBasedDatasource, FileShuffleConfig
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.save_mode import SaveMode

__all__ = [
    "BaseFileMetadataProvider",
    "BlockBasedFileDatasink",
    "Connection",
    "Datasink",
    "Datasource",
    "DefaultFileMetadataProvider",
    "DummyOutputDatasink",
    "FileBasedDatasource",
    "FileMetadataProvider",
    "FileShuffleConfig",
    "FilenameProvider",
    "LeRobotDatasource",
    "MCAPDatasource",
    "PartitionStyle",
    "Partitioning",
    "PathPartitionFilter",
    "PathPartitionParser",
    "RandomIntRowDatasource",
    "ReadTask",
    "Reader",
    "RowBasedFileDatasink",
    "SaveMode",
    "TimeRange",
    "WriteResult",
    "WriteReturnType",
]
