"""Physical operators: what the streaming executor runs, one module per kind.

All implement the protocol in ``base.PhysicalOperator``; the executor drives them without
knowing their kind.
"""

from shardflow.engine.execution.operators.base import OperatorRuntime, PhysicalOperator

__all__ = ["OperatorRuntime", "PhysicalOperator"]
