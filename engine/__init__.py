"""shardflow.engine: the Dataset and what runs it (plans, optimizer, executor, backends)."""
