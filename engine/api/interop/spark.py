"""Spark: ``from_spark`` (Spark's Arrow batches streamed into blocks) and the work of
``Dataset.to_spark`` (Parquet files Spark reads).

``from_spark`` runs the DataFrame on Spark's executors, which turn each Arrow batch of their
partitions into one Arrow IPC stream in a binary cell (``mapInArrow``); the driver pulls
those cells one partition at a time (``toLocalIterator``), so Spark's driver holds at most two
partitions and shardflow's read task hands on one block per batch under the memory budget.
The read task uses the SparkSession, so it runs in the driver on every backend.

``to_spark`` writes the dataset as Parquet into a staging folder, by shardflow's streaming
write (Ray tasks on the Ray backend), and returns ``spark.read.parquet`` over it: Spark's
executors read the files, so neither driver ever holds the dataset.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import uuid
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require

_IPC_COLUMN = "arrow_ipc"


def _is_spark_dataframe(df: Any) -> bool:
    return type(df).__module__.startswith("pyspark.") and hasattr(df, "mapInArrow")


def _is_spark_session(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.") and hasattr(spark, "read")


def spark_arrow_schema(df: Any) -> pa.Schema:
    """The Arrow schema Spark's ``toArrow()`` gives the DataFrame (timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = df.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    return to_arrow_schema(df.schema, timezone="UTC", prefers_large_types=large == "true")


def _batches_as_ipc(batches: Any) -> Any:
    """In Spark's Python workers: each Arrow batch becomes one Arrow IPC stream in a cell."""
    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        cell = pa.array([sink.getvalue().to_pybytes()], pa.binary())
        yield pa.record_batch([cell], names=[_IPC_COLUMN])


class SparkDatasource(Datasource):
    """A Spark DataFrame's rows, read as Spark's Arrow batches by one task in the driver."""

    def __init__(self, df: Any):
        self._df = df
        self._schema = spark_arrow_schema(df)

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ReadTask]:
        return [ReadTask(_SparkBatches(self._df, self._schema), BlockMetadata(None, None))]

    def get_name(self) -> str:
        return "FromSpark"

    def reads_in_driver(self) -> bool:
        return True  # the SparkSession cannot leave this process


class _SparkBatches:
    def __init__(self, df: Any, schema: pa.Schema):
        self.df, self.schema = df, schema

    def __call__(self) -> Any:
        encoded = self.df.mapInArrow(_batches_as_ipc, f"{_IPC_COLUMN} binary")
        produced = False
        for row in encoded.toLocalIterator(prefetchPartitions=True):
            with pa.ipc.open_stream(pa.py_buffer(row[0])) as reader:
                table = reader.read_all()
            if table.num_rows:
                produced = True
                yield table.cast(self.schema)
        if not produced:
            yield self.schema.empty_table()


def from_spark(
    df: Any, *, parallelism: int | None = None, override_num_blocks: int | None = None
) -> Any:
    """Create a :class:`~shardflow.Dataset` from a `Spark DataFrame`.

    Rows move through Arrow, streaming: Spark's executors encode each Arrow batch of their
    partitions, and the driver pulls them one partition at a time, so neither Spark's driver
    nor shardflow ever holds the whole DataFrame. Columns have the Arrow types of Spark's
    ``DataFrame.toArrow()``: timestamps ``timestamp[us, tz=UTC]`` (``TimestampNTZType``:
    without a time zone), structs, arrays and maps nested as Arrow structs, lists and maps,
    decimals ``decimal128``. Each Arrow batch of Spark
    (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) is one block.

    Works with any SparkSession, local or on a cluster (Ray Data needs RayDP). The read runs
    in the driver, which holds the session, on both backends; each consumption of the
    dataset runs the DataFrame again (``materialize()`` keeps the rows).

    Args:
        df: A ``pyspark.sql.DataFrame``.
        parallelism: Deprecated spelling of ``override_num_blocks``.
        override_num_blocks: Accepted for compatibility with Ray Data: the blocks are
            Spark's Arrow batches.

    Returns:
        A lazy :class:`~shardflow.Dataset`.

    Examples:
        >>> import shardflow as sf  # doctest: +SKIP
        >>> df = spark.createDataFrame([(1, "a"), (2, "b")], ["id", "s"])  # doctest: +SKIP
        >>> sf.from_spark(df).take_all()  # doctest: +SKIP
        [{'id': 1, 's': 'a'}, {'id': 2, 's': 'b'}]
    """
    require("pyspark", "spark", "from_spark")
    if not _is_spark_dataframe(df):
        raise TypeError(f"from_spark takes a pyspark.sql.DataFrame, got {type(df).__name__}.")
    for name, value in (("parallelism", parallelism), ("override_num_blocks", override_num_blocks)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"from_spark: {name} must be a positive int or None, got {value!r}.")
    from shardflow.engine.api.create import read_datasource

    return read_datasource(SparkDatasource(df))


# -- to_spark -------------------------------------------------------------------------------

_staging_lock = threading.Lock()
_staging_root: str | None = None


def _default_staging() -> str:
    """A folder of this process for staged files, removed when the interpreter exits."""
    global _staging_root
    with _staging_lock:
        if _staging_root is None:
            _staging_root = tempfile.mkdtemp(prefix="shardflow-to-spark-")
            atexit.register(shutil.rmtree, _staging_root, True)
        return _staging_root


def spark_compatible(schema: pa.Schema) -> pa.Schema:
    """The schema Spark can read from Parquet: nanosecond timestamps (pandas' default)
    become microseconds, Spark's precision (Spark's own ``createDataFrame`` truncates them
    too); tensor columns become their storage (lists). Other types are kept."""
    from shardflow.sdk.object_column import is_object_type

    fields = []
    for field in schema:
        kind = field.type
        if is_object_type(kind):
            raise TypeError(
                f"to_spark: column {field.name!r} holds Python objects, which Spark cannot "
                "store; convert it to an Arrow type (numbers, strings, lists, structs) first."
            )
        if isinstance(kind, pa.ExtensionType):
            kind = kind.storage_type
        if pa.types.is_timestamp(kind) and kind.unit == "ns":
            kind = pa.timestamp("us", tz=kind.tz)
        fields.append(field.with_type(kind))
    return pa.schema(fields, metadata=schema.metadata)


class _ToSparkTypes:
    def __init__(self, schema: pa.Schema):
        self.schema = schema

    def __call__(self, batch: pa.Table) -> pa.Table:
        columns = []
        for column, field in zip(batch.columns, self.schema):
            if isinstance(column.type, pa.ExtensionType):
                column = pa.chunked_array(
                    [chunk.storage for chunk in column.chunks], column.type.storage_type
                )
            columns.append(column.cast(field.type, safe=False))
        return pa.Table.from_arrays(columns, schema=self.schema)


def to_spark(dataset: Any, spark: Any, staging_path: str | None = None) -> Any:
    """The work of :meth:`Dataset.to_spark` (see its docstring)."""
    require("pyspark", "spark", "Dataset.to_spark")
    if not _is_spark_session(spark):
        raise TypeError(f"to_spark takes a pyspark.sql.SparkSession, got {type(spark).__name__}.")
    if staging_path is not None and not isinstance(staging_path, (str, os.PathLike)):
        raise TypeError(
            f"to_spark: staging_path must be a path, got {type(staging_path).__name__}."
        )
    schema = dataset._arrow_schema()
    if schema is None:
        raise ValueError("to_spark: the dataset has no columns; Spark needs a schema.")
    target = spark_compatible(schema)
    root = os.fspath(staging_path) if staging_path is not None else _default_staging()
    folder = f"{root.rstrip('/')}/{uuid.uuid4().hex}"
    ds = dataset
    if target != schema:
        ds = dataset.map_batches(_ToSparkTypes(target), batch_format="pyarrow", batch_size=None)
    ds.write_parquet(folder)
    return spark.read.parquet(_spark_path(folder))


def _spark_path(folder: str) -> str:
    if "://" in folder:
        return folder.replace("s3://", "s3a://", 1) if folder.startswith("s3://") else folder
    return "file://" + os.path.abspath(folder)
