"""The logical plan: a source and the operations a Dataset was built from, as plain data.

Logical operators hold only what the user asked for (a function and its arguments, a key, a
seed, a number of outputs); nothing here runs. The optimizer rewrites plans of these values,
and the planner turns them into physical operators (engine/plan/planner.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from shardflow.engine.api.compute import DEFAULT_MAP_OPTIONS, MapOptions
from shardflow.sdk.datasource import Datasource
from shardflow.sdk.expressions import Expr


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


# -- sources ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ReadSource:
    """Read through a Datasource.

    Args:
        datasource: The source.
        parallelism: Requested number of read tasks; -1 means automatic.
        per_task_row_limit: Set by the optimizer when a limit was pushed into the read.
        concurrency: The most read tasks running at once (None: as many as slots allow).
    """

    datasource: Datasource
    parallelism: int = -1
    per_task_row_limit: int | None = None
    concurrency: int | None = None

    @property
    def name(self) -> str:
        return f"Read{self.datasource.get_name()}"


@dataclass(frozen=True, eq=False)
class BlocksSource:
    """Blocks already computed (from_items, from_pandas, materialize, splits, ...).

    ``blocks`` holds tables or block references (engine.refs); ``metadata`` one
    BlockMetadata per block when known.
    """

    blocks: tuple[Any, ...]
    name: str = "FromBlocks"
    metadata: tuple[Any, ...] | None = None


# -- one-to-one operations (fused into tasks) --------------------------------------------


@dataclass(frozen=True, eq=False)
class UDFCall:
    """A user function and the arguments it is called or constructed with."""

    fn: Any
    fn_args: tuple[Any, ...] = ()
    fn_kwargs: dict[str, Any] = field(default_factory=dict)
    fn_constructor_args: tuple[Any, ...] = ()
    fn_constructor_kwargs: dict[str, Any] = field(default_factory=dict)


class MapLike:
    """Marker of operations that run inside map tasks and fuse with their neighbours.

    ``row_preserving`` marks those that keep the number and order of rows (a limit may be
    pushed past them, and a known row count stays known). Those that run a user function
    carry ``options`` (engine/api/compute.py): a task pool or an actor pool, and resources.
    """

    row_preserving = False


@dataclass(frozen=True, eq=False)
class MapRows(MapLike):
    udf: UDFCall
    options: MapOptions = DEFAULT_MAP_OPTIONS
    row_preserving = True

    @property
    def name(self) -> str:
        return f"Map({_fn_name(self.udf.fn)})"


@dataclass(frozen=True, eq=False)
class FlatMap(MapLike):
    udf: UDFCall
    options: MapOptions = DEFAULT_MAP_OPTIONS

    @property
    def name(self) -> str:
        return f"FlatMap({_fn_name(self.udf.fn)})"


@dataclass(frozen=True, eq=False)
class FilterRows(MapLike):
    udf: UDFCall
    options: MapOptions = DEFAULT_MAP_OPTIONS

    @property
    def name(self) -> str:
        return f"Filter({_fn_name(self.udf.fn)})"


@dataclass(frozen=True, eq=False)
class FilterExpr(MapLike):
    expr: Expr

    @property
    def name(self) -> str:
        return f"Filter({self.expr!r})"


@dataclass(frozen=True, eq=False)
class MapBatches(MapLike):
    udf: UDFCall
    batch_size: Any = None
    batch_format: str = "numpy"
    zero_copy_batch: bool = True
    options: MapOptions = DEFAULT_MAP_OPTIONS

    @property
    def name(self) -> str:
        return f"MapBatches({_fn_name(self.udf.fn)})"


@dataclass(frozen=True, eq=False)
class Project(MapLike):
    """select_columns, drop_columns or rename_columns (exactly one of the three is set)."""

    select: tuple[str, ...] | None = None
    drop: tuple[str, ...] | None = None
    rename: dict[str, str] | None = None
    # Added by the optimizer (not asked for by the user): a missing column is reported as
    # the operation it serves reports it, a ValueError naming the column.
    implicit: bool = False
    row_preserving = True

    @property
    def name(self) -> str:
        if self.select is not None:
            return f"SelectColumns({list(self.select)})"
        if self.drop is not None:
            return f"DropColumns({list(self.drop)})"
        return f"RenameColumns({self.rename})"


@dataclass(frozen=True, eq=False)
class AddColumn(MapLike):
    col: str
    fn: Any
    batch_format: str = "pandas"
    row_preserving = True

    @property
    def name(self) -> str:
        return f"AddColumn({self.col})"


@dataclass(frozen=True, eq=False)
class RandomSample(MapLike):
    """Keep each row with probability ``fraction``."""

    fraction: float
    seed: Any = None  # an int, a RandomSeedConfig or None

    @property
    def name(self) -> str:
        return f"RandomSample({self.fraction})"


@dataclass(frozen=True, eq=False)
class Write:
    """Write through ``datasink``. A resumable write carries ``done``: the input pieces
    (``shardflow.sdk.input_identity.DoneInputs``) earlier runs wrote, which its read tasks
    skip."""

    datasink: Any
    write_uuid: str = ""
    done: Any = None
    resumable: bool = False

    @property
    def name(self) -> str:
        return f"Write{self.datasink.get_name()}"


# -- operations on the whole stream -------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    limit: int

    @property
    def name(self) -> str:
        return f"Limit[{self.limit}]"


@dataclass(frozen=True, eq=False)
class SortKey:
    """Columns to order by, each ascending or descending; nulls always last."""

    columns: tuple[str, ...]
    descending: tuple[bool, ...]

    def arrow_sort_keys(self) -> list[tuple[str, str, str]]:
        return [
            (c, "descending" if d else "ascending", "at_end")
            for c, d in zip(self.columns, self.descending)
        ]


@dataclass(frozen=True, eq=False)
class RandomShuffle:
    seed: Any = None  # an int, a RandomSeedConfig or None
    num_blocks: int | None = None
    name: str = "RandomShuffle"


@dataclass(frozen=True, eq=False)
class RandomizeBlockOrder:
    seed: Any = None  # an int, a RandomSeedConfig or None
    name: str = "RandomizeBlockOrder"


@dataclass(frozen=True, eq=False)
class Repartition:
    """Ray's repartition: split/merge in order, shuffle, hash by keys, or rows per block."""

    num_blocks: int | None = None
    target_num_rows_per_block: int | None = None
    strict: bool = False
    shuffle: bool = False
    keys: tuple[str, ...] | None = None
    sort: bool = False

    @property
    def name(self) -> str:
        return "Repartition"


@dataclass(frozen=True, eq=False)
class Sort:
    key: SortKey
    boundaries: tuple[Any, ...] | None = None
    name: str = "Sort"


@dataclass(frozen=True, eq=False)
class TopK:
    """The first ``limit`` rows of a sort, as the optimizer plans ``sort(...)`` followed by a
    limit (``limit(k)``, ``take(k)``): the same rows in the same order, ties in input order."""

    key: SortKey
    limit: int
    boundaries: tuple[Any, ...] | None = None
    # A KeyBound the runs tighten and the read consults (late materialization only).
    bound: Any = None

    @property
    def name(self) -> str:
        return f"TopK[{self.limit}]"


@dataclass(frozen=True, eq=False)
class Aggregate:
    """Group by ``keys`` (empty for one group over everything) and compute ``aggs``.

    ``encoded_keys``: keys the optimizer let the read deliver as Arrow dictionaries (see
    ``ParquetDatasource.with_encoded_columns``); the partial aggregation groups by their
    codes and decodes them otherwise.
    """

    keys: tuple[str, ...]
    aggs: tuple[Any, ...]
    num_partitions: int | None = None
    name: str = "Aggregate"
    encoded_keys: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class MapGroups:
    keys: tuple[str, ...]
    udf: UDFCall
    batch_format: str = "numpy"
    num_partitions: int | None = None

    @property
    def name(self) -> str:
        return f"MapGroups({_fn_name(self.udf.fn)})"


@dataclass(frozen=True, eq=False)
class Union:
    others: tuple[LogicalPlan, ...]
    name: str = "Union"


@dataclass(frozen=True, eq=False)
class Mix:
    """Interleave this plan's blocks with those of ``others`` toward row ratios ``weights``
    (one per input, this plan's first). ``stop_on_shortest``: stop when the input whose
    turn it is has run out (else an exhausted input drops out and the others go on)."""

    others: tuple[LogicalPlan, ...]
    weights: tuple[float, ...]
    stop_on_shortest: bool
    name: str = "Mix"


@dataclass(frozen=True, eq=False)
class Zip:
    others: tuple[LogicalPlan, ...]
    name: str = "Zip"


@dataclass(frozen=True, eq=False)
class Join:
    right: LogicalPlan
    join_type: str
    on: tuple[str, ...]
    right_on: tuple[str, ...]
    left_suffix: str | None = None
    right_suffix: str | None = None
    num_partitions: int | None = None
    name: str = "Join"


# -- the plan -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LogicalPlan:
    """A source and its operations, oldest first. Immutable: each Dataset call makes a new one.

    Operations that combine datasets (Union, Mix, Zip, Join) hold the other plans.
    """

    source: Any
    ops: tuple[Any, ...] = field(default_factory=tuple)

    def with_op(self, op: Any) -> LogicalPlan:
        return replace(self, ops=self.ops + (op,))

    def describe(self) -> list[str]:
        return [self.source.name] + [op.name for op in self.ops]


def is_row_preserving(op: Any) -> bool:
    return isinstance(op, MapLike) and op.row_preserving


def projection_map_of(op: Project, current: dict[str, str] | None) -> dict[str, str] | None:
    """Compose a select or rename with the current {source column: output name} map.

    Returns None when the operation cannot be expressed as a projection map (a drop without a
    known column list).
    """
    if op.select is not None:
        if current is None:
            return {c: c for c in op.select}
        inverse = {out: src for src, out in current.items()}
        if any(c not in inverse for c in op.select):
            return None
        return {inverse[c]: c for c in op.select}
    if op.rename is not None and current is not None:
        return {src: op.rename.get(out, out) for src, out in current.items()}
    return None
