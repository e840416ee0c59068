"""Stages: the picklable work done inside a task (user functions, column
changes, filters), fused into one transform per task."""
