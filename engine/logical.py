"""The logical plan: a source and the chain of operations a Dataset was built from."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa

from shardflow.engine.transforms import ExprFilterStage, ProjectStage, RowMapStage, Stage
from shardflow.sdk.datasource import Datasource


@dataclass(frozen=True)
class ReadSource:
    """Read through a Datasource.

    Args:
        datasource: The source.
        parallelism: Requested number of read tasks; -1 means automatic.
        per_task_row_limit: Set by the optimizer when a limit was pushed into the read.
    """

    datasource: Datasource
    parallelism: int = -1
    per_task_row_limit: Optional[int] = None

    @property
    def name(self) -> str:
        return f"Read{self.datasource.get_name()}"


@dataclass(frozen=True)
class BlocksSource:
    """Blocks already in memory (from_items, from_pandas, materialize, ...)."""

    blocks: Tuple[Any, ...]
    name: str = "FromBlocks"
    metadata: Optional[Tuple[Any, ...]] = None


@dataclass(frozen=True)
class MapOp:
    """A map-like operation that fuses into tasks: one stage of a FusedTransform.

    ``row_preserving`` marks operations that keep the number and order of rows (a limit may
    be pushed past them).
    """

    stage: Stage
    row_preserving: bool = False

    @property
    def name(self) -> str:
        return self.stage.name


@dataclass(frozen=True)
class LimitOp:
    limit: int

    @property
    def name(self) -> str:
        return f"Limit[{self.limit}]"


@dataclass(frozen=True)
class WriteOp:
    datasink: Any
    write_uuid: str = ""

    @property
    def name(self) -> str:
        return f"Write{self.datasink.get_name()}"


@dataclass(frozen=True)
class LogicalPlan:
    """A source and its operations, oldest first. Immutable: each Dataset call makes a new one."""

    source: Any
    ops: Tuple[Any, ...] = field(default_factory=tuple)

    def with_op(self, op: Any) -> "LogicalPlan":
        return replace(self, ops=self.ops + (op,))

    def describe(self) -> List[str]:
        return [self.source.name] + [op.name for op in self.ops]


def is_projection(op: Any) -> bool:
    return isinstance(op, MapOp) and isinstance(op.stage, ProjectStage)


def is_expr_filter(op: Any) -> bool:
    return isinstance(op, MapOp) and isinstance(op.stage, ExprFilterStage)


def is_row_map(op: Any) -> bool:
    return isinstance(op, MapOp) and isinstance(op.stage, RowMapStage)


def projection_map_of(stage: ProjectStage, current: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """Compose a select or rename with the current {source column: output name} map.

    Returns None when the stage cannot be expressed as a projection map (a drop without a
    known column list).
    """
    if stage.select is not None:
        if current is None:
            return {c: c for c in stage.select}
        inverse = {out: src for src, out in current.items()}
        if any(c not in inverse for c in stage.select):
            return None
        return {inverse[c]: c for c in stage.select}
    if stage.rename is not None and current is not None:
        return {src: stage.rename.get(out, out) for src, out in current.items()}
    return None
