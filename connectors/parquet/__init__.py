"""Parquet: ``read_parquet`` and ``Dataset.write_parquet``: reading row groups,
choosing encodings, and shardflow's own writer of flat columns with its C encoders."""
