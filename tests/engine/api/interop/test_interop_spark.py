"""from_spark / to_spark with pyspark on local[2] (the session fixture `spark`): rows and
Arrow types round trip, nested and timestamp types included, streaming under the memory
budget."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

import shardflow as sf

pytest.importorskip("pyspark")

pytestmark = pytest.mark.timeout(600)  # a SparkSession starts slowly on a loaded machine

UTC = datetime.timezone.utc


def _nested_frame(spark):
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField(
                "point",
                T.StructType(
                    [T.StructField("x", T.DoubleType()), T.StructField("y", T.DoubleType())]
                ),
            ),
            T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType())),
            T.StructField("at", T.TimestampType()),
            T.StructField("local", T.TimestampNTZType()),
            T.StructField("day", T.DateType()),
        ]
    )
    rows = [
        (
            i,
            [f"t{j}" for j in range(i % 3)],
            (float(i), -float(i)),
            {"k": i},
            datetime.datetime(2024, 1, 1, i, 30, tzinfo=UTC),
            datetime.datetime(2024, 2, 1, i, 15),
            datetime.date(2024, 3, 1 + i),
        )
        for i in range(6)
    ]
    return spark.createDataFrame(rows, schema).repartition(3)


def test_from_spark_rows_and_types(spark, backend):
    df = _nested_frame(spark)
    expected = df.toArrow().sort_by("id")  # Spark's own Arrow conversion is the oracle
    got = sf.from_spark(df).to_arrow().sort_by("id")
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()
    assert got.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert got.schema.field("local").type == pa.timestamp("us")


def test_to_spark_round_trip(spark, backend, tmp_path):
    table = pa.table(
        {
            "id": pa.array(range(5), pa.int64()),
            "tags": pa.array(
                [[f"t{j}" for j in range(i)] for i in range(5)], pa.list_(pa.string())
            ),
            "point": pa.array([{"x": float(i), "y": 1.0} for i in range(5)]),
            "attrs": pa.array([[("k", i)] for i in range(5)], pa.map_(pa.string(), pa.int32())),
            "at": pa.array(
                [datetime.datetime(2024, 1, 1, i, tzinfo=UTC) for i in range(5)],
                pa.timestamp("ns", tz="UTC"),
            ),
            "local": pa.array(
                [datetime.datetime(2024, 1, 2, i) for i in range(5)], pa.timestamp("us")
            ),
        }
    )
    ds = sf.from_arrow(table).repartition(2)
    df = ds.to_spark(spark, staging_path=str(tmp_path / "staged"))
    assert dict(df.dtypes)["at"] == "timestamp" and dict(df.dtypes)["local"] == "timestamp_ntz"
    back = df.toArrow().sort_by("id")
    expected = table.set_column(5 - 1, "at", table.column("at").cast(pa.timestamp("us", tz="UTC")))
    assert back.select(expected.column_names).to_pylist() == expected.to_pylist()
    again = sf.from_spark(df).to_arrow().sort_by("id")  # and back into shardflow
    assert again.to_pylist() == back.to_pylist()


def test_from_spark_streams_within_the_memory_budget(spark, fresh_context):
    """~24 MiB of rows pass a 4 MiB budget: Spark's batches stream, never all held."""
    sf.init(backend="local")
    fresh_context.memory_budget_bytes = 4 * 1024 * 1024
    df = spark.range(0, 200_000, numPartitions=4).selectExpr("id", "repeat('x', 100) AS s")
    ds = sf.from_spark(df)
    rows = 0
    for batch in ds.iter_batches(batch_size=4096, batch_format="pyarrow"):
        rows += batch.num_rows
    assert rows == 200_000
    stats = ds._last_stats
    total = stats.operators[0].bytes_out
    assert total >= 200_000 * 100
    # The one streaming read task hands on a few blocks (Spark batches, ~1 MiB here) past
    # the budget before backpressure holds it (measured: 4.3 to 6.4 MiB); the whole
    # DataFrame (21 MiB) is never held.
    one_block = total / 20
    limit = fresh_context.memory_budget_bytes + 3 * one_block
    assert 0 < stats.peak_bytes_in_flight <= limit, stats.to_string()
    assert stats.peak_bytes_in_flight < total / 3


def test_spark_arguments_are_checked(spark):
    with pytest.raises(TypeError, match="pyspark.sql.DataFrame"):
        sf.from_spark([1, 2])
    with pytest.raises(TypeError, match="SparkSession"):
        sf.range(2).to_spark("spark")
    with pytest.raises(TypeError, match="Python objects"):
        sf.from_items([{"o": object()}]).to_spark(spark)
