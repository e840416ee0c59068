"""XShards of pandas DataFrames and Spark DataFrames, both ways (Orca's ``to_spark_df`` and
``spark_df_to_pd_sparkxshards``), and the operations Spark SQL runs for them: ``sort_values``
and ``group_by``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from shardflow.engine.xshards.aggregation import result_name
from shardflow.engine.xshards.errors import XShardsTypeError
from shardflow.engine.xshards.spark.errors import guarded

# Orca's aggregate names that pyspark.sql.functions spells otherwise.
_FUNCTIONS = {
    "mean": "avg",
    "sumDistinct": "sum_distinct",
    "countDistinct": "count_distinct",
}


def shards_to_spark_df(xshards: Any) -> Any:
    """The rows of ``xshards``' DataFrame shards as a Spark DataFrame, with the schema Arrow
    gives the first shard (the index is dropped)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from shardflow.engine.xshards.spark.session import spark_session

    first = xshards.take(1)
    if not first:
        raise XShardsTypeError("to_spark_df found no shard: this XShards is empty.")
    arrow = pa.Schema.from_pandas(first[0], preserve_index=False)
    schema = from_arrow_schema(arrow)
    rows = xshards.rdd.mapPartitions(guarded(_rows_of, "to_spark_df"))
    return spark_session().createDataFrame(rows, schema, verifySchema=False)


def _rows_of(frames: Iterable[Any]) -> Iterator[tuple]:
    for df in frames:
        yield from df.itertuples(index=False, name=None)


def spark_df_to_pd_sparkxshards(df: Any, squeeze: bool = False, index_col: Any = None) -> Any:
    """A Spark DataFrame as an XShards of pandas DataFrames, one per Spark partition (Orca's
    ``spark_df_to_pd_sparkxshards``).

    Args:
        df: A ``pyspark.sql.DataFrame``.
        squeeze: Give a pandas Series for a DataFrame of one column.
        index_col: A column (or list of them) to use as each DataFrame's index.

    Returns:
        An XShards on Spark.
    """
    from shardflow.engine.xshards.spark.shards import SparkBackedXShards

    if not hasattr(df, "rdd") or not hasattr(df, "columns"):
        raise XShardsTypeError(f"df must be a Spark DataFrame, got {type(df).__name__}.")
    convert = _ToPandas(list(df.columns), squeeze, index_col)
    return SparkBackedXShards(df.rdd.mapPartitions(guarded(convert, "spark_df_to_pd_sparkxshards")))


class _ToPandas:
    def __init__(self, columns: list[str], squeeze: bool, index_col: Any):
        self.columns, self.squeeze, self.index_col = columns, squeeze, index_col

    def __call__(self, rows: Iterable[Any]) -> Iterator[Any]:
        import pandas as pd

        records = [tuple(row) for row in rows]
        if not records:
            return
        frame = pd.DataFrame.from_records(records, columns=self.columns)
        if self.index_col is not None:
            frame = frame.set_index(self.index_col)
        if self.squeeze and len(frame.columns) == 1:
            frame = frame.iloc[:, 0]
        yield frame


def sort_frames(xshards: Any, keys: list[str], ascending: list[bool]) -> Any:
    """The rows of the DataFrame shards sorted by ``keys`` (nulls last), cut into as many
    range partitions as ``xshards`` has (empty ones hold no shard)."""
    from pyspark.sql import functions as F

    num = xshards.num_partitions()
    df = shards_to_spark_df(xshards)
    _check_columns(keys, df.columns)
    order = [
        F.col(k).asc_nulls_last() if up else F.col(k).desc_nulls_last()
        for k, up in zip(keys, ascending)
    ]
    ordered = df.repartitionByRange(num, *order).sortWithinPartitions(*order)
    return spark_df_to_pd_sparkxshards(ordered)


def group_frames(xshards: Any, keys: list[str], pairs: list[tuple[str, str]]) -> Any:
    """Spark SQL's ``groupBy(keys).agg(...)`` of the DataFrame shards, as DataFrame shards in
    as many partitions as ``xshards`` has."""
    from pyspark.sql import functions as F

    num = xshards.num_partitions()
    df = shards_to_spark_df(xshards)
    columns = [
        getattr(F, _FUNCTIONS.get(stat, stat))(F.col(column)).alias(result_name(column, stat))
        for column, stat in pairs
    ]
    result = df.groupBy(*keys).agg(*columns) if keys else df.agg(*columns)
    return spark_df_to_pd_sparkxshards(result.repartition(num))


def _check_columns(keys: list[str], columns: list[str]) -> None:
    from shardflow.engine.xshards.errors import XShardsKeyError

    missing = [k for k in keys if k not in columns]
    if missing:
        raise XShardsKeyError(f"{missing} do not exist in this Table; its columns are {columns}.")
