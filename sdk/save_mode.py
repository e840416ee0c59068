"""Save modes of writes: what happens when the destination already holds data."""

from __future__ import annotations

from enum import Enum
from typing import Any


class SaveMode(str, Enum):
    """What a write does when its destination already holds data (Ray Data's names).

    * ``ERROR`` (and ``CREATE``): raise ``ValueError`` naming the destination.
    * ``APPEND``: add new files next to the existing ones.
    * ``OVERWRITE``: replace the destination's contents (at commit, all or nothing).
    * ``IGNORE``: write nothing and leave the destination as it is.
    * ``UPSERT``: only for table sinks that support it; file writes refuse it.

    shardflow's file writes default to ``ERROR``, where Ray Data's default to ``APPEND``.

    Examples:
        >>> from shardflow import SaveMode
        >>> SaveMode("append") is SaveMode.APPEND
        True
    """

    CREATE = "create"
    APPEND = "append"
    OVERWRITE = "overwrite"
    IGNORE = "ignore"
    ERROR = "error"
    UPSERT = "upsert"


def to_save_mode(mode: Any, allowed: tuple[SaveMode, ...] = tuple(SaveMode)) -> SaveMode:
    """``mode`` (a SaveMode or its name, any case) as a SaveMode among ``allowed``."""
    value = mode.value if isinstance(mode, SaveMode) else mode
    if isinstance(value, str):
        try:
            result = SaveMode(value.lower())
        except ValueError:
            result = None
        if result is not None and result in allowed:
            return result
    names = ", ".join(repr(m.value) for m in allowed)
    raise ValueError(f"mode must be one of {names} (or a shardflow.SaveMode), got {mode!r}.")
