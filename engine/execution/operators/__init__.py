"""Physical operators: what the streaming executor runs, one module per kind, all
implementing the protocol in ``base.PhysicalOperator`` (the executor never asks their kind)."""

from shardflow.engine.execution.operators.base import OperatorRuntime, PhysicalOperator

__all__ = ["OperatorRuntime", "PhysicalOperator"]
