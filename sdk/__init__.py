"""shardflow.sdk: the contracts a connector author codes against.

Depends on pyarrow, numpy and fsspec only; never on the engine or on Ray.
"""

from shardflow.sdk.block import (
    BATCH_FORMATS,
    Block,
    BlockMetadata,
    block_to_batch,
    block_to_rows,
    rows_to_block,
    to_block,
)
from shardflow.sdk.datasink import Datasink, TaskCancelled, TaskContext, WriteResult
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.expressions import Expr, ExprVisitor, UnsupportedExpressionError, col, lit
from shardflow.sdk.file_datasink import (
    BlockBasedFileDatasink,
    DestinationExistsError,
    FileDatasink,
    RowBasedFileDatasink,
    WriteCommitError,
)
from shardflow.sdk.file_datasource import FileBasedDatasource, FileShuffleConfig
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.input_identity import DoneInputs, InputItem, InputPiece
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.pushdowns import Pushdowns
from shardflow.sdk.registry import ConnectorSpec, get_registry, register_connector
from shardflow.sdk.staging import InterruptedCommitError
from shardflow.sdk.write_journal import ResumeMismatchError

__all__ = [
    "BATCH_FORMATS",
    "DestinationExistsError",
    "DoneInputs",
    "InputItem",
    "InputPiece",
    "InterruptedCommitError",
    "ResumeMismatchError",
    "TaskCancelled",
    "WriteCommitError",
    "Block",
    "BlockBasedFileDatasink",
    "BlockMetadata",
    "FileBasedDatasource",
    "FileDatasink",
    "FileShuffleConfig",
    "FilenameProvider",
    "Partitioning",
    "PathPartitionFilter",
    "Pushdowns",
    "RowBasedFileDatasink",
    "ConnectorSpec",
    "Datasink",
    "Datasource",
    "Expr",
    "ExprVisitor",
    "ReadTask",
    "TaskContext",
    "UnsupportedExpressionError",
    "WriteResult",
    "block_to_batch",
    "block_to_rows",
    "col",
    "get_registry",
    "lit",
    "register_connector",
    "rows_to_block",
    "to_block",
]
