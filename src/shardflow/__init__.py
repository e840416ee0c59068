"""shardflow: streaming data loading and preprocessing for ML, with Ray Data's API.

Runs embedded in this process by default (no cluster, nothing to start); call
``shardflow.init(backend="ray")`` to run the same code on Ray.

Examples:
    >>> import shardflow as sf
    >>> sf.range(10).map_batches(lambda b: {"x": b["id"] * 2}).sum("x")
    90
"""

from shardflow.engine.context import DataContext, RetryPolicy
from shardflow.engine.dataset import Dataset
from shardflow.engine.errors import UserCodeError, WorkerCrashedError
from shardflow.engine.file_api import (
    read_binary_files,
    read_csv,
    read_images,
    read_json,
    read_numpy,
    read_parquet,
    read_text,
)
from shardflow.engine.iceberg_api import read_iceberg
from shardflow.engine.read_api import (
    from_arrow,
    from_items,
    from_numpy,
    from_pandas,
    range,
    read_datasource,
)
from shardflow.engine.runtime import init
from shardflow.sdk.file_datasink import FilenameProvider
from shardflow.sdk.file_datasource import FileShuffleConfig
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk import (
    Block,
    BlockMetadata,
    Datasink,
    Datasource,
    ReadTask,
    TaskContext,
    WriteResult,
    col,
    lit,
    register_connector,
)

__version__ = "0.1.0"

__all__ = [
    "Block",
    "BlockMetadata",
    "DataContext",
    "FileShuffleConfig",
    "FilenameProvider",
    "Dataset",
    "Datasink",
    "Datasource",
    "Partitioning",
    "PathPartitionFilter",
    "ReadTask",
    "RetryPolicy",
    "TaskContext",
    "UserCodeError",
    "WorkerCrashedError",
    "WriteResult",
    "col",
    "from_arrow",
    "from_items",
    "from_numpy",
    "from_pandas",
    "init",
    "lit",
    "range",
    "read_binary_files",
    "read_csv",
    "read_datasource",
    "read_iceberg",
    "read_images",
    "read_json",
    "read_numpy",
    "read_parquet",
    "read_text",
    "register_connector",
]
