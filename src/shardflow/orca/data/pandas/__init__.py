"""``orca.data.pandas``: read CSV, JSON and Parquet files into XShards of pandas DataFrames."""

from shardflow.engine.xshards.readers import read_csv, read_json, read_parquet

__all__ = ["read_csv", "read_json", "read_parquet"]
