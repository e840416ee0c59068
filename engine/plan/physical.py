"""The physical plan: the operators of one execution, upstream first, the output last.

Operators live in engine/execution/operators/ (one module per kind); the planner (engine/plan/planner.py)
builds the plan from a logical plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shardflow.engine.execution.operators.base import PhysicalOperator


@dataclass
class PhysicalPlan:
    """Operators in topological order; each has one consumer, and the last feeds the user."""

    operators: list[PhysicalOperator] = field(default_factory=list)

    @property
    def output(self) -> PhysicalOperator:
        return self.operators[-1]

    def shown(self) -> list[PhysicalOperator]:
        """The operators that appear in stats (the input operators do not)."""
        return [op for op in self.operators if op.shown_in_stats]
