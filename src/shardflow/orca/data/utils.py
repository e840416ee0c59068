"""``orca.data.utils``: Spark DataFrames into XShards of pandas DataFrames (Spark backend)."""

from shardflow.engine.xshards.spark.frames import spark_df_to_pd_sparkxshards

__all__ = ["spark_df_to_pd_sparkxshards"]
