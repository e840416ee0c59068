"""shardflow: streaming data loading and preprocessing for ML, with Ray Data's API.

Runs embedded in this process by default (no cluster, nothing to start); call
``shardflow.init(backend="ray")`` to run the same code on Ray.

Examples:
    >>> import shardflow as sf
    >>> sf.range(10).map_batches(lambda b: {"x": b["id"] * 2}).sum("x")
    90
"""

from types import ModuleType

from shardflow.engine.compute import ActorPoolStrategy, TaskPoolStrategy
from shardflow.engine.context import DataContext, RetryPolicy
from shardflow.engine.data_iterator import DataIterator
from shardflow.engine.dataset import Dataset
from shardflow.engine.errors import UserCodeError, WorkerCrashedError
from shardflow.engine.execution_options import ExecutionOptions, ExecutionResources
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
    from_blocks,
    from_daft,
    from_huggingface,
    from_items,
    from_numpy,
    from_pandas,
    from_torch,
    range,
    range_tensor,
    read_datasource,
)
from shardflow.engine.runtime import init
from shardflow.engine.schema import Schema
from shardflow.engine.xshards.shards import XShards
from shardflow.sdk import (
    Block,
    BlockBasedFileDatasink,
    BlockMetadata,
    Datasink,
    Datasource,
    ReadTask,
    RowBasedFileDatasink,
    TaskContext,
    WriteResult,
    col,
    lit,
    register_connector,
)
from shardflow.sdk.expressions import download, udf
from shardflow.sdk.file_datasource import FileShuffleConfig
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.save_mode import SaveMode

__version__ = "0.1.0"

__all__ = [
    "ActorPoolStrategy",
    "Block",
    "BlockBasedFileDatasink",
    "BlockMetadata",
    "DataContext",
    "DataIterator",
    "ExecutionOptions",
    "ExecutionResources",
    "FileShuffleConfig",
    "FilenameProvider",
    "Dataset",
    "Datasink",
    "Datasource",
    "Partitioning",
    "PathPartitionFilter",
    "ReadTask",
    "RetryPolicy",
    "RowBasedFileDatasink",
    "SaveMode",
    "Schema",
    "TaskContext",
    "TaskPoolStrategy",
    "UserCodeError",
    "WorkerCrashedError",
    "WriteResult",
    "XShards",
    "col",
    "download",
    "from_arrow",
    "from_blocks",
    "from_daft",
    "from_huggingface",
    "from_items",
    "from_numpy",
    "from_pandas",
    "from_torch",
    "init",
    "lit",
    "range",
    "range_tensor",
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
    "udf",
]


def __getattr__(name: str) -> ModuleType:
    """``shardflow.xshards``, ``shardflow.orca`` and the Ray Data-named modules
    (``exceptions``, ``expressions``, ``datatype``) load on first use."""
    if name in ("xshards", "orca", "exceptions", "expressions", "datatype"):
        import importlib

        return importlib.import_module(f"shardflow.{name}")
    raise AttributeError(f"module 'shardflow' has no attribute {name!r}")
