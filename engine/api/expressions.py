"""``Dataset.with_column`` and ``with_columns``: new or replaced columns from expressions.

The expressions of one call are evaluated on each input block (see
sdk/expression_eval.py), in one map stage fused with its neighbours; a column of an existing
name is replaced where it stands, a new one appended. The output schema is known without
running anything: evaluating on an empty table of the input schema gives the types (a
``udf`` declares its own).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.engine.execution.stages.transforms import Stage
from shardflow.engine.plan.logical import MapLike
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import TaskContext
from shardflow.sdk.expression_eval import RowPosition, evaluate, random_executions
from shardflow.sdk.expressions import (
    AliasExpr,
    DownloadExpr,
    Expr,
    StructFieldExpr,
    UDFExpr,
    UnnestExpr,
)


def add_columns(block: pa.Table, columns: list[tuple[str, Any]]) -> pa.Table:
    """``block`` with each ``(name, values)``: replacing a column of that name in place,
    else appended."""
    for name, values in columns:
        index = block.schema.get_field_index(name)
        if index == -1:
            block = block.append_column(name, values)
        else:
            block = block.set_column(index, name, values)
    return block


@dataclass(frozen=True, eq=False)
class WithColumns(MapLike):
    """Logical operation of ``with_column(s)``: ``(name, expression)`` pairs, in order."""

    columns: tuple[tuple[str, Expr], ...]
    row_preserving = True

    @property
    def name(self) -> str:
        return f"WithColumns({[name for name, _ in self.columns]})"

    def make_stage(self) -> WithColumnsStage:
        executions = random_executions(expr for _, expr in self.columns)
        return WithColumnsStage(self.columns, self.name, executions)

    def output_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """The schema after this operation, from the types the expressions give on no rows."""
        empty = schema.empty_table()
        try:
            typed = [(name, evaluate(expr, empty, dry_run=True)) for name, expr in self.columns]
        except Exception:
            return None
        return add_columns(empty, typed).schema


class WithColumnsStage(Stage):
    """Evaluates the expressions on each block and sets their columns."""

    def __init__(
        self,
        columns: tuple[tuple[str, Expr], ...],
        name: str,
        executions: dict[str, int] | None = None,
    ):
        self.columns, self.name = columns, name
        # The execution's number for each random() in the expressions (its seeds).
        self.executions = executions or {}

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        rows_before = 0
        for block_idx, block in enumerate(blocks):
            position = RowPosition(ctx.task_idx, rows_before, block_idx, self.executions)
            values = [
                (name, evaluate(expr, block, position=position)) for name, expr in self.columns
            ]
            rows_before += block.num_rows
            yield add_columns(block, values)


class ExpressionsMixin:
    """``with_column`` and ``with_columns``, mixed into Dataset."""

    def with_column(self, column_name: str, expr: Expr) -> Any:
        """Add (or replace) column ``column_name`` with the values of an expression.

        Args:
            column_name: Name of the column; an existing column of that name is replaced
                where it stands, a new one is appended.
            expr: An expression over the columns: ``col``, ``lit``, operators, ``cast``,
                ``udf`` functions, or ``download`` of the files a column names.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(3).with_column("twice", sf.col("id") * 2)
            >>> ds.take_all()
            [{'id': 0, 'twice': 0}, {'id': 1, 'twice': 2}, {'id': 2, 'twice': 4}]
        """
        _check_name(column_name, "with_column")
        if isinstance(expr, UnnestExpr):
            expr.alias(column_name)  # raises: an unnest names its own columns
        if not isinstance(expr, Expr):
            raise TypeError(
                f"with_column needs an expression (sf.col(...), sf.lit(...), a udf call), got "
                f"{type(expr).__name__}: {expr!r}."
            )
        return self._with(WithColumns(((column_name, expr),)))  # type: ignore[attr-defined]

    def with_columns(
        self, exprs: Mapping | UnnestExpr | None = None, *more_exprs: Mapping | UnnestExpr
    ) -> Any:
        """Add (or replace) several columns, each ``{name: expression}``, in one step.

        Every expression sees the columns as they were before this call. An
        :func:`~shardflow.expressions.unnest` argument adds one column per field of a
        struct-valued expression, named after the fields.

        Args:
            exprs: A mapping of column name to expression, or an ``unnest(...)``; more
                mappings or unnests may follow.

        Returns:
            A new Dataset (this one when no expression is given).

        Raises:
            ValueError: for an ``unnest`` whose struct type is not known without running the
                dataset (after a ``map_batches``, say): materialize first, or declare the
                ``udf``'s struct ``return_dtype``.
            TypeError: for an ``unnest`` of an expression whose values are not structs.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(2).with_columns({"a": sf.col("id") + 1, "b": sf.lit("x")}).take_all()
            [{'id': 0, 'a': 1, 'b': 'x'}, {'id': 1, 'a': 2, 'b': 'x'}]
        """
        columns: list[tuple[str, Expr]] = []
        for mapping in ([] if exprs is None else [exprs]) + list(more_exprs):
            if isinstance(mapping, UnnestExpr):
                columns.extend(self._unnest_columns(mapping))
                continue
            if not isinstance(mapping, Mapping):
                raise TypeError(
                    "`with_columns` arguments must be mappings from column name to expression, "
                    f"or unnest() expressions, got {type(mapping).__name__}."
                )
            for name, expr in mapping.items():
                _check_name(name, "with_columns")
                if isinstance(expr, DownloadExpr):
                    raise ValueError(
                        "`with_columns` does not support DownloadExpr. "
                        "Use `with_column` for download expressions instead."
                    )
                if isinstance(expr, UnnestExpr):
                    expr.alias(name)  # raises: an unnest names its own columns
                if not isinstance(expr, Expr):
                    raise TypeError(
                        f"with_columns needs expressions; {name!r} maps to {type(expr).__name__}."
                    )
                columns.append((name, expr))
        if not columns:
            return self
        return self._with(WithColumns(tuple(columns)))  # type: ignore[attr-defined]

    def _unnest_columns(self, unnest: UnnestExpr) -> list[tuple[str, Expr]]:
        """One ``(field name, field of the struct)`` per field of ``unnest``'s struct; its
        fields share the struct's expression, which is evaluated once per block."""
        struct_type = _static_type(unnest.expr, self)
        if struct_type is None:
            raise ValueError(
                "unnest() requires the struct type of the wrapped expression to be known when "
                "the plan is built, but it could not be resolved. Either wrap an expression "
                "with a declared struct return_dtype (e.g. "
                "@udf(return_dtype=DataType.struct(...))), or ensure the input dataset's "
                "schema is known (upstream map/map_batches calls make it unavailable: "
                "materialize() first)."
            )
        if not pa.types.is_struct(struct_type):
            raise TypeError(
                "unnest() requires a struct-typed expression, but the wrapped expression "
                f"resolves to {struct_type}."
            )
        names = [struct_type.field(i).name for i in range(struct_type.num_fields)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(
                f"unnest() cannot expand a struct with duplicate field names {duplicates}: the "
                "expanded columns would overwrite each other."
            )
        return [(name, StructFieldExpr(unnest.expr, i)) for i, name in enumerate(names)]


def _static_type(expr: Expr, ds: Any) -> pa.DataType | None:
    """The Arrow type of ``expr``'s values when known without running ``ds``: a ``udf``'s
    declared type, or the type it has on the dataset's known schema."""
    while isinstance(expr, AliasExpr):
        expr = expr.operand
    if isinstance(expr, UDFExpr):
        try:
            return expr.return_dtype.to_arrow_dtype()
        except Exception:
            return None
    schema = ds._arrow_schema(fetch_if_missing=False)
    if schema is None:
        return None
    try:
        return evaluate(expr, schema.empty_table(), dry_run=True).type
    except Exception:
        return None


def _check_name(name: Any, method: str) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{method} needs a column name (a non-empty string), got {name!r}.")
