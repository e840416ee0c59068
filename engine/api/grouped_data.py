"""Grouping and aggregation: ``Dataset.groupby`` (GroupedData), ``Dataset.aggregate``,
``unique`` and the global ``sum``/``min``/``max``/``mean``/``std``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shardflow.engine.api.aggregate import AggregateFn, Count, Max, Mean, Min, Std, Sum
from shardflow.engine.api.aggregate_collections import Unique
from shardflow.engine.api.exchanges import _positive_int, check_columns_exist, key_columns
from shardflow.engine.execution.errors import missing_column_message
from shardflow.engine.plan.logical import Aggregate, LogicalPlan, MapGroups
from shardflow.sdk.block import validate_batch_format


def _check_aggs(aggs: Sequence[Any], method: str) -> tuple[Any, ...]:
    if not aggs:
        raise ValueError(f"{method}: give at least one aggregation, e.g. Count() or Sum('x').")
    for agg in aggs:
        if not isinstance(agg, AggregateFn):
            raise TypeError(
                f"{method} takes aggregations from shardflow.aggregate (Count, Sum, ...), got "
                f"{type(agg).__name__}."
            )
    return tuple(aggs)


def _check_agg_columns(ds: Any, aggs: Sequence[Any]) -> None:
    schema = ds._cheap_schema()
    if schema is None or not schema.names:
        return
    from shardflow.engine.execution.exchange.grouping import _is_numeric

    for agg in aggs:
        for column in agg.target_columns():
            if column not in schema.names:
                raise ValueError(missing_column_message(column, schema.names))
            if agg.numeric_only() and not _is_numeric(schema.field(column).type):
                raise ValueError(
                    f"{agg.name}: column '{column}' has type {schema.field(column).type}, but "
                    f"{type(agg).__name__} needs a numeric column."
                )


class GroupedData:
    """A dataset grouped by key columns, as returned by ``Dataset.groupby``.

    Output datasets hold one row per group: the key columns, then one column per aggregation.
    Groups come out sorted by key (Ray Data gives them in no particular order).

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.from_items([{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}])
        >>> ds.groupby("k").sum("v").take_all()
        [{'k': 'a', 'sum(v)': 4}, {'k': 'b', 'sum(v)': 2}]
    """

    def __init__(self, dataset: Any, keys: tuple[str, ...], num_partitions: int | None):
        self._dataset = dataset
        self._keys = keys
        self._num_partitions = num_partitions

    def __repr__(self) -> str:
        return f"GroupedData(dataset={self._dataset!r}, key={list(self._keys) or None!r})"

    def aggregate(self, *aggs: AggregateFn) -> Any:
        """One row per group with the result of each aggregation.

        Examples:
            >>> import shardflow as sf
            >>> from shardflow.aggregate import Count, Max
            >>> ds = sf.from_items([{"k": i % 2, "v": i} for i in range(4)])
            >>> ds.groupby("k").aggregate(Count(), Max("v")).take_all()
            [{'k': 0, 'count()': 2, 'max(v)': 2}, {'k': 1, 'count()': 2, 'max(v)': 3}]
        """
        checked = _check_aggs(aggs, "aggregate")
        _check_agg_columns(self._dataset, checked)
        return self._dataset._with(Aggregate(self._keys, checked, self._num_partitions))

    def _on(self, agg_cls: type, on: str | list[str] | None, **kwargs: Any) -> Any:
        if on is None:
            schema = self._dataset.schema()
            on = [] if schema is None else [c for c in schema.names if c not in self._keys]
        columns = [on] if isinstance(on, str) else list(on)
        if not columns:
            raise ValueError("At least 1 column to aggregate on has to be provided")
        return self.aggregate(*[agg_cls(c, **kwargs) for c in columns])

    def count(self) -> Any:
        """Rows per group, in column ``count()``."""
        return self.aggregate(Count())

    def sum(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Per-group sum of ``on`` (a column, a list, or every non-key column)."""
        return self._on(Sum, on, ignore_nulls=ignore_nulls)

    def min(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Per-group minimum of ``on``."""
        return self._on(Min, on, ignore_nulls=ignore_nulls)

    def max(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Per-group maximum of ``on``."""
        return self._on(Max, on, ignore_nulls=ignore_nulls)

    def mean(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Per-group mean of ``on``."""
        return self._on(Mean, on, ignore_nulls=ignore_nulls)

    def std(
        self, on: str | list[str] | None = None, ddof: int = 1, ignore_nulls: bool = True
    ) -> Any:
        """Per-group standard deviation of ``on``."""
        return self._on(Std, on, ddof=ddof, ignore_nulls=ignore_nulls)

    def map_groups(
        self,
        fn: Callable[[Any], Any],
        *,
        zero_copy_batch: bool = True,
        compute: Any = None,
        batch_format: str | None = "default",
        fn_args: Sequence[Any] | None = None,
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: Sequence[Any] | None = None,
        fn_constructor_kwargs: dict[str, Any] | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        concurrency: Any = None,
        ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
        **ray_remote_args: Any,
    ) -> Any:
        """Apply ``fn`` to each group: it receives all rows of one group as one batch and
        returns a batch (or a generator of batches).

        Args:
            fn: A function, or a callable class (constructed once per task).
            zero_copy_batch: Accepted for compatibility; group batches are always fresh.
            batch_format: ``"default"`` (a pandas DataFrame, as Ray Data's code gives),
                ``"pandas"``, ``"numpy"``, ``"pyarrow"``, or None (the block itself, a
                ``pyarrow.Table``).
            fn_args: Extra positional arguments for ``fn``.
            fn_kwargs: Extra keyword arguments for ``fn``.
            fn_constructor_args: Constructor arguments when ``fn`` is a class.
            fn_constructor_kwargs: Constructor keyword arguments when ``fn`` is a class.
            num_cpus: As in ``map_batches`` (checked the same way); the groups are processed
                in the exchange's reduce tasks.
            num_gpus: As in ``map_batches``.
            memory: As in ``map_batches``.
            concurrency: As in ``map_batches``.
            compute: As in ``map_batches``.
            ray_remote_args_fn: As in ``map_batches``.

        Returns:
            A dataset of ``fn``'s outputs, groups in key order.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.from_items([{"k": i % 2, "v": i} for i in range(6)])
            >>> ds.groupby("k").map_groups(lambda b: {"k": b["k"][:1], "n": [len(b["v"])]}).take_all()
            [{'k': 0, 'n': 3}, {'k': 1, 'n': 3}]
        """
        from shardflow.engine.api.compute import resolve_map_options
        from shardflow.engine.api.map import _check_fn, _udf

        _check_fn(fn, "map_groups")
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        # Checked as map_batches checks them; the function runs in the exchange's reduce
        # tasks, one call per group, a class constructed once per task.
        resolve_map_options(
            fn,
            method="map_groups",
            compute=compute,
            concurrency=concurrency,
            fn_constructor_args=fn_constructor_args,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            memory=memory,
            ray_remote_args_fn=ray_remote_args_fn,
            ray_remote_args=ray_remote_args,
        )
        # Ray Data's code hands groups of table blocks to the function as pandas DataFrames
        # by default (its docstring says NumPy; its code wins).
        if batch_format in ("default", "native"):
            fmt = "pandas"
        else:
            fmt = validate_batch_format(batch_format)
        return self._dataset._with(MapGroups(self._keys, udf, fmt, self._num_partitions))

    def with_column(self, column_name: str, expr: Any, **ray_remote_args: Any) -> Any:
        """Add (or replace) column ``column_name`` with an expression evaluated within each
        group: every row is kept, with the new column appended.

        Args:
            column_name: Name of the column to add.
            expr: An expression (``col``, ``lit``, operators, ``udf`` functions).
            **ray_remote_args: Resource arguments of the tasks, as in ``map_groups``.

        Returns:
            A new Dataset of all rows and columns plus the new column, groups in key order.

        Examples:
            >>> import shardflow as sf
            >>> from shardflow.expressions import col
            >>> ds = sf.from_items([{"g": 1, "v": 1}, {"g": 1, "v": 2}])
            >>> ds.groupby("g").with_column("v2", col("v") * 2).take_all()
            [{'g': 1, 'v': 1, 'v2': 2}, {'g': 1, 'v': 2, 'v2': 4}]
        """
        from shardflow.sdk.expressions import DownloadExpr, Expr

        if not isinstance(column_name, str) or not column_name:
            raise ValueError(f"column_name must be a non-empty string, got: {column_name!r}")
        if not isinstance(expr, Expr):
            raise TypeError("expr must be a Ray Data expression created via the expression API.")
        if isinstance(expr, DownloadExpr):
            raise TypeError("GroupedData.with_column does not yet support download expressions.")
        return self.map_groups(
            _with_group_column,
            batch_format=None,
            fn_kwargs={"column_name": column_name, "expr": expr},
            **ray_remote_args,
        )


def _with_group_column(block: Any, column_name: str, expr: Any) -> Any:
    """One group's block with the expression's column set (GroupedData.with_column)."""
    from shardflow.engine.api.expressions import add_columns
    from shardflow.sdk.expression_eval import evaluate

    return add_columns(block, [(column_name, evaluate(expr, block))])


class AggregateMixin:
    """Dataset methods for grouping and aggregating."""

    _plan: LogicalPlan

    def groupby(
        self, key: str | list[str] | None, num_partitions: int | None = None
    ) -> GroupedData:
        """Group rows by the values of ``key`` (one column or several; None for one group).

        Args:
            key: Column name(s) to group by, or None to aggregate everything as one group.
            num_partitions: Number of partitions of the exchange (by default from the data
                size).

        Returns:
            A GroupedData; call an aggregation or ``map_groups`` on it.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"k": 1}, {"k": 2}, {"k": 1}]).groupby("k").count().take_all()
            [{'k': 1, 'count()': 2}, {'k': 2, 'count()': 1}]
        """
        keys = () if key is None else key_columns(key, "groupby")
        _positive_int(num_partitions, "num_partitions")
        check_columns_exist(self, keys, "groupby")
        return GroupedData(self, keys, num_partitions)

    def aggregate(self, *aggs: AggregateFn) -> dict[str, Any]:
        """Aggregate the whole dataset; returns ``{aggregation name: value}``.

        Examples:
            >>> import shardflow as sf
            >>> from shardflow.aggregate import Count, Sum
            >>> sf.range(10).aggregate(Count(), Sum("id"))
            {'count()': 10, 'sum(id)': 45}
        """
        checked = _check_aggs(aggs, "aggregate")
        _check_agg_columns(self, checked)
        derived = self._with(Aggregate((), checked, None))  # type: ignore[attr-defined]
        rows = derived.take_all()
        self._last_stats = derived._last_stats  # stats() tells how the answer was computed
        return rows[0] if rows else {}

    def _aggregate_on(self, agg_cls: type, on: str | list[str] | None, **kwargs: Any) -> Any:
        if on is None:
            schema = self.schema()  # type: ignore[attr-defined]
            on = [] if schema is None else list(schema.names)
        columns = [on] if isinstance(on, str) else list(on)
        if not columns:
            raise ValueError("At least 1 column to aggregate on has to be provided")
        result = self.aggregate(*[agg_cls(c, **kwargs) for c in columns])
        return next(iter(result.values())) if len(result) == 1 else result

    def sum(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Sum of a column (a value), of several (a dict), or of every column (``on=None``).

        Null when the dataset is empty, or when ``ignore_nulls=False`` and a value is null.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(5).sum("id")
            10
        """
        return self._aggregate_on(Sum, on, ignore_nulls=ignore_nulls)

    def min(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Minimum of one or more columns (see ``sum`` for ``on``)."""
        return self._aggregate_on(Min, on, ignore_nulls=ignore_nulls)

    def max(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Maximum of one or more columns (see ``sum`` for ``on``)."""
        return self._aggregate_on(Max, on, ignore_nulls=ignore_nulls)

    def mean(self, on: str | list[str] | None = None, ignore_nulls: bool = True) -> Any:
        """Mean of one or more columns (see ``sum`` for ``on``)."""
        return self._aggregate_on(Mean, on, ignore_nulls=ignore_nulls)

    def std(
        self, on: str | list[str] | None = None, ddof: int = 1, ignore_nulls: bool = True
    ) -> Any:
        """Standard deviation of one or more columns (``ddof`` as in NumPy).

        Examples:
            >>> import shardflow as sf
            >>> round(sf.from_items([{"x": 1.0}, {"x": 3.0}]).std("x"), 4)
            1.4142
        """
        return self._aggregate_on(Std, on, ddof=ddof, ignore_nulls=ignore_nulls)

    def unique(self, column: str, ignore_nulls: bool = False) -> list[Any]:
        """The distinct values of ``column``.

        Examples:
            >>> import shardflow as sf
            >>> sorted(sf.from_items([{"a": 1}, {"a": 2}, {"a": 1}]).unique("a"))
            [1, 2]
        """
        if not isinstance(column, str):
            raise TypeError(f"unique takes one column name, got {column!r}.")
        result = self.aggregate(Unique(column, ignore_nulls=ignore_nulls))
        values = next(iter(result.values()))
        return list(values) if values is not None else []
