"""Execution: the streaming executor, the memory budget, block references, spilling
and shared memory; physical operators, exchanges, stages and backends in the folders below."""
