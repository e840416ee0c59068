"""shardflow: streaming data loading and preprocessing for ML, with Ray Data's API.

Runs embedded in this process by default (no cluster, nothing to start); call
``shardflow.init(backend="ray")`` to run the same code on Ray.

Examples:
    >>> import shardflow as sf
    >>> sf.range(10).map_batches(lambda b: {"x": b["id"] * 2}).sum("x")
    90
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from shardflow._arrow_pool import choose_before_pyarrow_loads

choose_before_pyarrow_loads()

if TYPE_CHECKING:
    from shardflow.engine.avro_api import read_avro
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
    from shardflow.engine.tfrecords_api import read_tfrecords
    from shardflow.engine.webdataset_api import read_webdataset
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
    "read_avro",
    "read_tfrecords",
    "read_webdataset",
    "read_images",
    "read_json",
    "read_numpy",
    "read_parquet",
    "read_text",
    "register_connector",
    "udf",
]

# The public names and the modules that define them: imported on first use, so that
# ``import shardflow`` (and every worker process, which imports shardflow.engine modules)
# loads only what a program touches.
_EXPORTS = {
    "ActorPoolStrategy": "shardflow.engine.compute",
    "TaskPoolStrategy": "shardflow.engine.compute",
    "DataContext": "shardflow.engine.context",
    "RetryPolicy": "shardflow.engine.context",
    "DataIterator": "shardflow.engine.data_iterator",
    "Dataset": "shardflow.engine.dataset",
    "UserCodeError": "shardflow.engine.errors",
    "WorkerCrashedError": "shardflow.engine.errors",
    "ExecutionOptions": "shardflow.engine.execution_options",
    "ExecutionResources": "shardflow.engine.execution_options",
    "read_binary_files": "shardflow.engine.file_api",
    "read_csv": "shardflow.engine.file_api",
    "read_images": "shardflow.engine.file_api",
    "read_json": "shardflow.engine.file_api",
    "read_numpy": "shardflow.engine.file_api",
    "read_parquet": "shardflow.engine.file_api",
    "read_text": "shardflow.engine.file_api",
    "read_iceberg": "shardflow.engine.iceberg_api",
    "read_avro": "shardflow.engine.avro_api",
    "read_tfrecords": "shardflow.engine.tfrecords_api",
    "read_webdataset": "shardflow.engine.webdataset_api",
    "from_arrow": "shardflow.engine.read_api",
    "from_blocks": "shardflow.engine.read_api",
    "from_daft": "shardflow.engine.read_api",
    "from_huggingface": "shardflow.engine.read_api",
    "from_items": "shardflow.engine.read_api",
    "from_numpy": "shardflow.engine.read_api",
    "from_pandas": "shardflow.engine.read_api",
    "from_torch": "shardflow.engine.read_api",
    "range": "shardflow.engine.read_api",
    "range_tensor": "shardflow.engine.read_api",
    "read_datasource": "shardflow.engine.read_api",
    "init": "shardflow.engine.runtime",
    "Schema": "shardflow.engine.schema",
    "XShards": "shardflow.engine.xshards.shards",
    "Block": "shardflow.sdk",
    "BlockBasedFileDatasink": "shardflow.sdk",
    "BlockMetadata": "shardflow.sdk",
    "Datasink": "shardflow.sdk",
    "Datasource": "shardflow.sdk",
    "ReadTask": "shardflow.sdk",
    "RowBasedFileDatasink": "shardflow.sdk",
    "TaskContext": "shardflow.sdk",
    "WriteResult": "shardflow.sdk",
    "col": "shardflow.sdk",
    "lit": "shardflow.sdk",
    "register_connector": "shardflow.sdk",
    "download": "shardflow.sdk.expressions",
    "udf": "shardflow.sdk.expressions",
    "FileShuffleConfig": "shardflow.sdk.file_datasource",
    "FilenameProvider": "shardflow.sdk.filename_provider",
    "Partitioning": "shardflow.sdk.partitioning",
    "PathPartitionFilter": "shardflow.sdk.partitioning",
    "SaveMode": "shardflow.sdk.save_mode",
}
_SUBMODULES = ("xshards", "orca", "exceptions", "expressions", "datatype")


def __getattr__(name: str) -> Any:
    """The public names load their module on first use; ``shardflow.xshards``,
    ``shardflow.orca`` and the Ray Data-named modules (``exceptions``, ``expressions``,
    ``datatype``) too."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"shardflow.{name}")
    raise AttributeError(f"module 'shardflow' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBMODULES))
