"""shardflow.engine: the Dataset and what runs it, a folder per layer: api/ (what users call),
plan/ (logical plan, optimizer, planner), execution/, iteration/, splits/ and xshards/."""
