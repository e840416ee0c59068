"""``orca.common``: OrcaContext, init_orca_context and stop_orca_context."""

from shardflow.engine.xshards.orca_context import OrcaContext, init_orca_context, stop_orca_context

__all__ = ["OrcaContext", "init_orca_context", "stop_orca_context"]
