"""Physical operators: what the streaming executor runs.

A physical plan is a list of source items (read tasks, or in-memory blocks) followed by a
chain of operators. A :class:`MapOperator` runs one task per input (a read task or a block)
through a fused transform; a :class:`LimitOperator` truncates the stream on the driver.

All-to-all operators (shuffle, sort, groupby) and actor-pool operators extend this list:
see docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Union

from shardflow.engine.transforms import FusedTransform


@dataclass
class MapOperator:
    """Runs ``transform`` over each input in its own task.

    Args:
        name: Shown in progress bars, stats and error messages.
        transform: The fused stages.
        kind: ``"thread"`` or ``"process"`` (local backend; Ray runs both as Ray tasks), or
            ``"driver"`` for work that must run in the driver process on every backend.
        min_rows_per_task: When set, each task takes input blocks until it has this many rows
            (the last task may have fewer).
    """

    name: str
    transform: FusedTransform
    kind: str = "thread"
    min_rows_per_task: Optional[int] = None


@dataclass
class LimitOperator:
    """Passes the first ``limit`` rows and stops everything upstream."""

    name: str
    limit: int


PhysicalOperator = Union[MapOperator, LimitOperator]


@dataclass
class PhysicalPlan:
    """Source items and the operator chain they flow through."""

    source_items: List[Any]
    source_name: str
    operators: List[PhysicalOperator] = field(default_factory=list)
    source_metadata: Optional[List[Any]] = None
