"""CSV: ``read_csv`` and ``Dataset.write_csv`` through pyarrow.csv, with shardflow's
own C parser where it gives Arrow's table exactly."""

from __future__ import annotations

from shardflow.connectors.csv.datasink import CSVDatasink
from shardflow.connectors.csv.datasource import CSVDatasource

__all__ = ["CSVDatasink", "CSVDatasource"]
