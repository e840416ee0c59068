"""XShards, Orca's data-parallel API (shards of Python objects), on the shardflow engine;
the user API is ``shardflow.xshards`` (and ``shardflow.orca.data``)."""
