"""``orca.data.pandas.preprocessing``: where Orca defines its readers."""

from shardflow.engine.xshards.readers import read_csv, read_json, read_parquet

__all__ = ["read_csv", "read_json", "read_parquet"]
