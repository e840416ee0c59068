"""shardflow.connectors: built-in datasources and datasinks. Uses shardflow.sdk only."""
