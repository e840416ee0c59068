"""``Dataset.explain``: the logical plan, as given and as optimized, and the operators the
planner makes of each, printed as trees in Ray Data's layout."""

from __future__ import annotations

from typing import Any

from shardflow.engine.plan.logical import Join, LogicalPlan


def _label(node: Any) -> str:
    kind = type(node).__name__
    name = getattr(node, "name", kind)
    if name == kind or name.startswith((f"{kind}[", f"{kind}(")):
        return name
    return f"{kind}[{name}]"


def _logical_tree(plan: LogicalPlan) -> list[tuple[int, str]]:
    """``(depth, label)`` lines of ``plan``, its last operation first; the plans an
    operation combines (union, mix, zip, join) follow as its further inputs."""

    def walk(ops: tuple[Any, ...], source: Any, depth: int) -> list[tuple[int, str]]:
        if not ops:
            return [(depth, _label(source))]
        op = ops[-1]
        lines = [(depth, _label(op))]
        lines += walk(ops[:-1], source, depth + 1)
        others = [op.right] if isinstance(op, Join) else list(getattr(op, "others", ()))
        for other in others:
            lines += walk(other.ops, other.source, depth + 1)
        return lines

    return walk(plan.ops, plan.source, 0)


def _physical_tree(physical: Any) -> list[tuple[int, str]]:
    def walk(op: Any, depth: int) -> list[tuple[int, str]]:
        lines = [(depth, _label(op))]
        for upstream in op.input_ops:
            lines += walk(upstream, depth + 1)
        return lines

    return walk(physical.output, 0)


def _render(lines: list[tuple[int, str]]) -> str:
    out = []
    for depth, label in lines:
        out.append(label if depth == 0 else "   " * (depth - 1) + "+- " + label)
    return "\n".join(out)


def explain_plan(plan: LogicalPlan) -> str:
    """The four sections ``Dataset.explain`` prints for ``plan``."""
    from shardflow.engine.api.context import DataContext
    from shardflow.engine.execution.runtime import current_backend
    from shardflow.engine.plan.optimizer import optimize
    from shardflow.engine.plan.planner import ReadTaskCache, plan_physical

    context = DataContext.get_current()
    backend = current_backend(context)
    optimized = optimize(plan)
    read_tasks = ReadTaskCache(context)
    sections = [
        ("Logical Plan", _render(_logical_tree(plan))),
        ("Logical Plan (Optimized)", _render(_logical_tree(optimized))),
        (
            "Physical Plan",
            _render(_physical_tree(plan_physical(plan, backend, context, read_tasks))),
        ),
        (
            "Physical Plan (Optimized)",
            _render(_physical_tree(plan_physical(optimized, backend, context, read_tasks))),
        ),
    ]
    return "".join(f"\n-------- {title} --------\n{body}\n" for title, body in sections)


class ExplainMixin:
    """The ``explain`` method of Dataset."""

    _plan: LogicalPlan

    def explain(self) -> None:
        """Print the dataset's logical plan, as built and as optimized (projections,
        filters and limits pushed into the read), and the physical operators the planner
        makes of each (one-to-one operations fused into one operator), as in Ray Data.

        Nothing runs: only the read tasks are planned. The names are shardflow's
        operators, which differ from Ray Data's.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10).map(lambda r: r).explain()  # doctest: +NORMALIZE_WHITESPACE
            <BLANKLINE>
            -------- Logical Plan --------
            MapRows[Map(<lambda>)]
            +- ReadSource[ReadRange]
            <BLANKLINE>
            -------- Logical Plan (Optimized) --------
            MapRows[Map(<lambda>)]
            +- ReadSource[ReadRange]
            <BLANKLINE>
            -------- Physical Plan --------
            MapOperator[ReadRange->Map(<lambda>)]
            +- InputOperator[ReadRange]
            <BLANKLINE>
            -------- Physical Plan (Optimized) --------
            MapOperator[ReadRange->Map(<lambda>)]
            +- InputOperator[ReadRange]
            <BLANKLINE>
        """
        print(explain_plan(self._plan))
