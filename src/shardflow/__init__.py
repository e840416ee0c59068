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
    from shardflow.engine.api.audio import read_audio
    from shardflow.engine.api.avro import read_avro
    from shardflow.engine.api.compute import ActorPoolStrategy, TaskPoolStrategy
    from shardflow.engine.api.context import DataContext, DatasetContext, RetryPolicy
    from shardflow.engine.api.create import (
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
    from shardflow.engine.api.dataset import Dataset
    from shardflow.engine.api.delta import read_delta
    from shardflow.engine.api.execution_options import ExecutionOptions, ExecutionResources
    from shardflow.engine.api.file_writes import (
        read_binary_files,
        read_csv,
        read_images,
        read_json,
        read_numpy,
        read_parquet,
        read_text,
    )
    from shardflow.engine.api.hudi import read_hudi
    from shardflow.engine.api.iceberg import read_iceberg
    from shardflow.engine.api.interop.dask import from_dask
    from shardflow.engine.api.interop.modin import from_modin
    from shardflow.engine.api.interop.ray_data import from_ray_data
    from shardflow.engine.api.interop.spark import from_spark
    from shardflow.engine.api.interop.tensorflow import from_tf
    from shardflow.engine.api.lance import read_lance
    from shardflow.engine.api.lerobot import read_lerobot
    from shardflow.engine.api.mcap import read_mcap
    from shardflow.engine.api.mix import MixStoppingCondition
    from shardflow.engine.api.object_refs import (
        from_arrow_refs,
        from_numpy_refs,
        from_pandas_refs,
    )
    from shardflow.engine.api.orc import read_orc
    from shardflow.engine.api.schema import Schema
    from shardflow.engine.api.split import NodeIdStr
    from shardflow.engine.api.sql import read_sql
    from shardflow.engine.api.summary import DatasetSummary
    from shardflow.engine.api.tfrecords import read_tfrecords
    from shardflow.engine.api.video import read_videos
    from shardflow.engine.api.webdataset import read_webdataset
    from shardflow.engine.api.zarr import read_zarr
    from shardflow.engine.execution.errors import UserCodeError, WorkerCrashedError
    from shardflow.engine.execution.runtime import init
    from shardflow.engine.execution.stats_summary import list_stats_summaries
    from shardflow.engine.iteration.data_iterator import DataIterator, DatasetIterator
    from shardflow.engine.xshards.shards import XShards
    from shardflow.preprocessor import Preprocessor
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
    from shardflow.sdk.catalog import Catalog, CatalogAccessMode, ReaderFormat, ResolvedSource
    from shardflow.sdk.expressions import download, udf
    from shardflow.sdk.file_datasource import FileShuffleConfig
    from shardflow.sdk.filename_provider import FilenameProvider
    from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
    from shardflow.sdk.random_seeds import RandomSeedConfig
    from shardflow.sdk.save_mode import SaveMode

__version__ = "0.1.0"

__all__ = [
    "ActorPoolStrategy",
    "Block",
    "BlockBasedFileDatasink",
    "BlockMetadata",
    "Catalog",
    "CatalogAccessMode",
    "DataContext",
    "DataIterator",
    "DatasetContext",
    "DatasetIterator",
    "DatasetSummary",
    "ExecutionOptions",
    "ExecutionResources",
    "FileShuffleConfig",
    "FilenameProvider",
    "Dataset",
    "Datasink",
    "Datasource",
    "MixStoppingCondition",
    "NodeIdStr",
    "Partitioning",
    "PathPartitionFilter",
    "Preprocessor",
    "RandomSeedConfig",
    "ReadTask",
    "ReaderFormat",
    "ResolvedSource",
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
    "from_arrow_refs",
    "from_blocks",
    "from_daft",
    "from_dask",
    "from_huggingface",
    "from_items",
    "from_modin",
    "from_numpy",
    "from_numpy_refs",
    "from_pandas",
    "from_pandas_refs",
    "from_ray_data",
    "from_spark",
    "from_tf",
    "from_torch",
    "init",
    "list_stats_summaries",
    "lit",
    "range",
    "range_tensor",
    "read_audio",
    "read_binary_files",
    "read_csv",
    "read_datasource",
    "read_delta",
    "read_hudi",
    "read_iceberg",
    "read_avro",
    "read_tfrecords",
    "read_webdataset",
    "read_images",
    "read_mcap",
    "read_orc",
    "read_zarr",
    "read_json",
    "read_lance",
    "read_lerobot",
    "read_numpy",
    "read_parquet",
    "read_sql",
    "read_text",
    "read_videos",
    "register_connector",
    "udf",
]

# The public names and the modules that define them: imported on first use, so that
# ``import shardflow`` (and every worker process, which imports shardflow.engine modules)
# loads only what a program touches.
_EXPORTS = {
    "ActorPoolStrategy": "shardflow.engine.api.compute",
    "TaskPoolStrategy": "shardflow.engine.api.compute",
    "DataContext": "shardflow.engine.api.context",
    "DatasetContext": "shardflow.engine.api.context",
    "RetryPolicy": "shardflow.engine.api.context",
    "DataIterator": "shardflow.engine.iteration.data_iterator",
    "DatasetIterator": "shardflow.engine.iteration.data_iterator",
    "Dataset": "shardflow.engine.api.dataset",
    "UserCodeError": "shardflow.engine.execution.errors",
    "WorkerCrashedError": "shardflow.engine.execution.errors",
    "ExecutionOptions": "shardflow.engine.api.execution_options",
    "ExecutionResources": "shardflow.engine.api.execution_options",
    "read_binary_files": "shardflow.engine.api.file_writes",
    "read_csv": "shardflow.engine.api.file_writes",
    "read_images": "shardflow.engine.api.file_writes",
    "read_json": "shardflow.engine.api.file_writes",
    "read_numpy": "shardflow.engine.api.file_writes",
    "read_parquet": "shardflow.engine.api.file_writes",
    "read_text": "shardflow.engine.api.file_writes",
    "read_iceberg": "shardflow.engine.api.iceberg",
    "read_audio": "shardflow.engine.api.audio",
    "read_videos": "shardflow.engine.api.video",
    "read_lance": "shardflow.engine.api.lance",
    "read_lerobot": "shardflow.engine.api.lerobot",
    "read_delta": "shardflow.engine.api.delta",
    "read_hudi": "shardflow.engine.api.hudi",
    "read_sql": "shardflow.engine.api.sql",
    "read_avro": "shardflow.engine.api.avro",
    "read_mcap": "shardflow.engine.api.mcap",
    "read_orc": "shardflow.engine.api.orc",
    "read_zarr": "shardflow.engine.api.zarr",
    "read_tfrecords": "shardflow.engine.api.tfrecords",
    "read_webdataset": "shardflow.engine.api.webdataset",
    "from_arrow": "shardflow.engine.api.create",
    "from_arrow_refs": "shardflow.engine.api.object_refs",
    "from_numpy_refs": "shardflow.engine.api.object_refs",
    "from_pandas_refs": "shardflow.engine.api.object_refs",
    "MixStoppingCondition": "shardflow.engine.api.mix",
    "DatasetSummary": "shardflow.engine.api.summary",
    "from_blocks": "shardflow.engine.api.create",
    "from_daft": "shardflow.engine.api.create",
    "from_huggingface": "shardflow.engine.api.create",
    "from_items": "shardflow.engine.api.create",
    "from_numpy": "shardflow.engine.api.create",
    "from_pandas": "shardflow.engine.api.create",
    "from_torch": "shardflow.engine.api.create",
    "range": "shardflow.engine.api.create",
    "range_tensor": "shardflow.engine.api.create",
    "read_datasource": "shardflow.engine.api.create",
    "from_dask": "shardflow.engine.api.interop.dask",
    "from_modin": "shardflow.engine.api.interop.modin",
    "from_ray_data": "shardflow.engine.api.interop.ray_data",
    "from_spark": "shardflow.engine.api.interop.spark",
    "from_tf": "shardflow.engine.api.interop.tensorflow",
    "init": "shardflow.engine.execution.runtime",
    "list_stats_summaries": "shardflow.engine.execution.stats_summary",
    "Schema": "shardflow.engine.api.schema",
    "NodeIdStr": "shardflow.engine.api.split",
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
    "Catalog": "shardflow.sdk.catalog",
    "CatalogAccessMode": "shardflow.sdk.catalog",
    "ReaderFormat": "shardflow.sdk.catalog",
    "ResolvedSource": "shardflow.sdk.catalog",
    "udf": "shardflow.sdk.expressions",
    "FileShuffleConfig": "shardflow.sdk.file_datasource",
    "FilenameProvider": "shardflow.sdk.filename_provider",
    "Partitioning": "shardflow.sdk.partitioning",
    "PathPartitionFilter": "shardflow.sdk.partitioning",
    "SaveMode": "shardflow.sdk.save_mode",
    "RandomSeedConfig": "shardflow.sdk.random_seeds",
    "Preprocessor": "shardflow.preprocessor",
}
_SUBMODULES = (
    "xshards",
    "orca",
    "exceptions",
    "expressions",
    "datatype",
    "aggregate",
    "extensions",
    "collate_fn",
    "datasource",
    "context",
    "preprocessor",
)


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
