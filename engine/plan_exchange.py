"""Planning the operations that are not one-to-one: unions, zips, joins and exchanges."""

from __future__ import annotations

from typing import Any

from shardflow.engine.logical import Union
from shardflow.engine.operators.base import PhysicalOperator
from shardflow.engine.operators.union import UnionOperator


def plan_special(planner: Any, op: Any, last: PhysicalOperator) -> PhysicalOperator:
    """The operator for ``op`` fed by ``last`` (and by the plans ``op`` holds)."""
    if isinstance(op, Union):
        others = [planner.chain(p) for p in op.others]
        return planner.add(UnionOperator(op.name, [last] + others))
    raise TypeError(f"Unknown operation {op!r}.")
