"""Backends: the only code that knows where tasks run; local (threads and worker
processes from a zygote) and Ray (tasks, actors and the object store)."""
