"""Aggregations, with Ray Data's classes and semantics (``shardflow.aggregate``).

An aggregation folds the rows of a group (or of the whole dataset) into one value in four
steps: an initial accumulator per group, a partial accumulator per block, merges of
accumulators, and a final value. ``AggregateFn`` takes those steps as functions;
``AggregateFnV2`` as methods to override (``aggregate_block``, ``combine``, ``finalize``).

Nulls follow Ray's rules: with ``ignore_nulls=True`` a group's result is null only when it
has no non-null value; with ``ignore_nulls=False`` any null makes the result null.

The built-in aggregations (Count, Sum, Min, Max, Mean, Std, AbsMax) also run vectorized
over whole blocks inside the engine (engine/execution/exchange/vectorized.py); the methods here define
their meaning and serve custom code that calls them directly.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.aggregate import Count, Mean
    >>> ds = sf.from_items([{"k": i % 2, "v": i} for i in range(6)])
    >>> ds.groupby("k").aggregate(Count(), Mean("v")).take_all()
    [{'k': 0, 'count()': 3, 'mean(v)': 2.0}, {'k': 1, 'count()': 3, 'mean(v)': 3.0}]
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Block = pa.Table


def is_null(value: Any) -> bool:
    """None and NaN are null values of an accumulator."""
    if value is None:
        return True
    try:
        return isinstance(value, float) and math.isnan(value)
    except TypeError:
        return False


class AggregateFn:
    """An aggregation given by functions.

    Args:
        init: ``init(key)`` returns the initial accumulator of the group with key ``key``.
        merge: ``merge(a, b)`` merges two accumulators.
        name: Name of the output column.
        accumulate_row: ``accumulate_row(acc, row)`` folds one row (a dict) into ``acc``.
        accumulate_block: ``accumulate_block(acc, block)`` folds a whole block (a
            pyarrow.Table); give this or ``accumulate_row``, not both.
        finalize: ``finalize(acc)`` turns the last accumulator into the output value.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import AggregateFn
        >>> total = AggregateFn(
        ...     init=lambda k: 0,
        ...     accumulate_row=lambda acc, row: acc + row["id"],
        ...     merge=lambda a, b: a + b,
        ...     name="total",
        ... )
        >>> sf.range(5).aggregate(total)
        {'total': 10}
    """

    def __init__(
        self,
        init: Callable[[Any], Any],
        merge: Callable[[Any, Any], Any],
        name: str,
        accumulate_row: Callable[[Any, dict[str, Any]], Any] | None = None,
        accumulate_block: Callable[[Any, Block], Any] | None = None,
        finalize: Callable[[Any], Any] | None = None,
    ):
        if (accumulate_row is None) == (accumulate_block is None):
            raise ValueError("Exactly one of accumulate_row or accumulate_block must be provided.")
        if not isinstance(name, str):
            raise TypeError("`name` must be provided.")
        if accumulate_block is None:
            row_fn = accumulate_row

            def accumulate_block(acc: Any, block: Block) -> Any:
                for row in block.to_pylist():
                    acc = row_fn(acc, row)
                return acc

        self.name = name
        self.init = init
        self.merge = merge
        self.accumulate_block = accumulate_block
        self.finalize = finalize or (lambda acc: acc)

    # The four steps as the engine calls them (overridden by AggregateFnV2).

    def _engine_init(self, key: Any) -> Any:
        return self.init(key)

    def _engine_accumulate(self, accumulator: Any, block: Block) -> Any:
        return self.accumulate_block(accumulator, block)

    def _engine_merge(self, a: Any, b: Any) -> Any:
        return self.merge(a, b)

    def _engine_finalize(self, accumulator: Any) -> Any:
        return self.finalize(accumulator)

    def target_columns(self) -> list[str]:
        """Columns the aggregation reads (checked against the schema before running)."""
        return []

    def numeric_only(self) -> bool:
        """Whether the aggregation needs a numeric column."""
        return False

    def output_field(self, input_schema: pa.Schema) -> pa.Field | None:
        """The output column's field for input of ``input_schema``, when known without
        running (None here: the type comes from the values)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class AggregateFnV2(AggregateFn, abc.ABC):
    """Base class of aggregations defined by methods.

    Subclasses implement ``aggregate_block(block)`` (a partial accumulator of one block) and
    ``combine(current, new)``, and may override ``finalize(acc)``. The null rules of the
    module docstring are applied around them.

    Args:
        name: Name of the output column, such as ``"sum(x)"``.
        zero_factory: Makes the accumulator of an empty group when nulls are not ignored.
        on: The column aggregated, or None for the whole row.
        ignore_nulls: Skip nulls (True), or let any null make the result null (False).
    """

    def __init__(
        self, name: str, zero_factory: Callable[[], Any], *, on: str | None, ignore_nulls: bool
    ):
        if not name:
            raise ValueError(f"Non-empty string has to be provided as name (got {name})")
        if not isinstance(name, str):
            raise TypeError("`name` must be provided.")
        if on is not None and not isinstance(on, str):
            raise ValueError(f"`on` must be a column name or None, got {on!r}.")
        self._target_col_name = on
        self._ignore_nulls = ignore_nulls
        self._zero_factory = zero_factory
        self._agg_name = name.split("(", 1)[0] if "(" in name else name
        self.name = name

    def get_target_column(self) -> str | None:
        return self._target_col_name

    def get_agg_name(self) -> str:
        """The aggregation's kind, e.g. ``"sum"`` for ``"sum(x)"``."""
        return self._agg_name

    def target_columns(self) -> list[str]:
        return [] if self._target_col_name is None else [self._target_col_name]

    @abc.abstractmethod
    def aggregate_block(self, block: Block) -> Any:
        """The partial accumulator of one block (a pyarrow.Table)."""

    @abc.abstractmethod
    def combine(self, current_accumulator: Any, new: Any) -> Any:
        """Merge two accumulators."""

    def finalize(self, accumulator: Any) -> Any:
        """The output value of an accumulator (the accumulator itself by default)."""
        return accumulator

    # -- the null rules ---------------------------------------------------------------

    def _engine_init(self, key: Any) -> Any:
        # With ignore_nulls, None marks "no value seen yet"; otherwise None would mean "a
        # null was seen", so an empty group starts from the real zero.
        return None if self._ignore_nulls else self._zero_factory()

    def _engine_accumulate(self, accumulator: Any, block: Block) -> Any:
        return self._engine_merge(accumulator, self.aggregate_block(block))

    def _engine_merge(self, current: Any, new: Any) -> Any:
        # None means "no value" (ignoring nulls) or "a null was seen" (not ignoring them). A
        # NaN result is kept and combined (NaN + x is NaN), so a NaN anywhere in a group
        # gives the same answer whichever blocks it falls in; ``_engine_finalize`` then turns
        # it into null when nulls are ignored, as Ray Data's built-in aggregations give.
        if self._ignore_nulls:
            if current is None:
                return new
            if new is None:
                return current
        else:
            if new is None:
                return new
            if current is None:
                return current
        return self.combine(current, new)

    def _engine_finalize(self, accumulator: Any) -> Any:
        if accumulator is None:
            return None
        value = None if is_null(accumulator) else self.finalize(accumulator)
        if self._ignore_nulls and is_null(value):
            return None
        return accumulator if is_null(accumulator) else value


class VectorizedAggregateFnV2(AggregateFnV2):
    """Base class of aggregations whose partial accumulators combine as a whole column.

    Subclasses implement ``aggregate_block(block)`` and ``_combine_column(column)``, which
    merges a column of partial accumulators (a pyarrow array) into one. shardflow folds
    accumulators two at a time, each fold being ``_combine_column`` of a two-row column, so
    the result is the same as combining the whole column at once.
    """

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return self._combine_column(_column_of_two(current_accumulator, new))

    @abc.abstractmethod
    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        """One accumulator from a column of partial accumulators."""


def _column_of_two(a: Any, b: Any) -> pa.Array:
    try:
        return pa.array([a, b])
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        from shardflow.sdk.block import to_block

        return to_block({"v": [a, b]}).column(0).combine_chunks()


def _column(block: Block, name: str) -> pa.ChunkedArray:
    return block.column(name)


def _scalar(value: pa.Scalar) -> Any:
    return value.as_py()


class Count(VectorizedAggregateFnV2):
    """Number of rows, or of values of column ``on`` (nulls counted unless ``ignore_nulls``).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import Count
        >>> sf.range(10).aggregate(Count())
        {'count()': 10}
    """

    def __init__(
        self, on: str | None = None, ignore_nulls: bool = False, alias_name: str | None = None
    ):
        super().__init__(
            alias_name or f"count({on or ''})", lambda: 0, on=on, ignore_nulls=ignore_nulls
        )

    def aggregate_block(self, block: Block) -> int:
        if self._target_col_name is None:
            return block.num_rows
        column = _column(block, self._target_col_name)
        return len(column) - column.null_count if self._ignore_nulls else len(column)

    def combine(self, current_accumulator: int, new: int) -> int:
        return current_accumulator + new

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return _scalar(pc.sum(accumulator_col, skip_nulls=self._ignore_nulls))


class Sum(VectorizedAggregateFnV2):
    """Sum of column ``on``."""

    def __init__(
        self, on: str | None = None, ignore_nulls: bool = True, alias_name: str | None = None
    ):
        super().__init__(alias_name or f"sum({on})", lambda: 0, on=on, ignore_nulls=ignore_nulls)

    def numeric_only(self) -> bool:
        return True

    def aggregate_block(self, block: Block) -> Any:
        return _scalar(
            pc.sum(
                _column(block, self._target_col_name), skip_nulls=self._ignore_nulls, min_count=1
            )
        )

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return current_accumulator + new

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return _scalar(pc.sum(accumulator_col, skip_nulls=self._ignore_nulls))


class Min(VectorizedAggregateFnV2):
    """Minimum of column ``on``."""

    def __init__(
        self,
        on: str | None = None,
        ignore_nulls: bool = True,
        alias_name: str | None = None,
        zero_factory: Callable[[], Any] = lambda: float("+inf"),
    ):
        super().__init__(alias_name or f"min({on})", zero_factory, on=on, ignore_nulls=ignore_nulls)

    def aggregate_block(self, block: Block) -> Any:
        return _scalar(pc.min(_column(block, self._target_col_name), skip_nulls=self._ignore_nulls))

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return min(current_accumulator, new)

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return _scalar(pc.min(accumulator_col, skip_nulls=self._ignore_nulls))


class Max(VectorizedAggregateFnV2):
    """Maximum of column ``on``."""

    def __init__(
        self,
        on: str | None = None,
        ignore_nulls: bool = True,
        alias_name: str | None = None,
        zero_factory: Callable[[], Any] = lambda: float("-inf"),
    ):
        super().__init__(alias_name or f"max({on})", zero_factory, on=on, ignore_nulls=ignore_nulls)

    def aggregate_block(self, block: Block) -> Any:
        return _scalar(pc.max(_column(block, self._target_col_name), skip_nulls=self._ignore_nulls))

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return max(current_accumulator, new)

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return _scalar(pc.max(accumulator_col, skip_nulls=self._ignore_nulls))


class Mean(AggregateFnV2):
    """Mean of column ``on``; the accumulator is ``[sum, count]``."""

    def __init__(
        self, on: str | None = None, ignore_nulls: bool = True, alias_name: str | None = None
    ):
        super().__init__(
            alias_name or f"mean({on})", lambda: [0, 0], on=on, ignore_nulls=ignore_nulls
        )

    def numeric_only(self) -> bool:
        return True

    def aggregate_block(self, block: Block) -> Any:
        column = _column(block, self._target_col_name)
        count = len(column) - column.null_count if self._ignore_nulls else len(column)
        if not count:
            return None
        total = _scalar(pc.sum(column, skip_nulls=self._ignore_nulls, min_count=1))
        return None if total is None else [total, count]

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return [current_accumulator[0] + new[0], current_accumulator[1] + new[1]]

    def finalize(self, accumulator: Any) -> Any:
        return float("nan") if accumulator[1] == 0 else accumulator[0] / accumulator[1]


class Std(AggregateFnV2):
    """Standard deviation of column ``on`` (``ddof`` as in NumPy); the accumulator is
    ``[M2, mean, count]``, merged with Chan's parallel formula."""

    def __init__(
        self,
        on: str | None = None,
        ddof: int = 1,
        ignore_nulls: bool = True,
        alias_name: str | None = None,
    ):
        super().__init__(
            alias_name or f"std({on})", lambda: [0, 0, 0], on=on, ignore_nulls=ignore_nulls
        )
        self._ddof = ddof

    def numeric_only(self) -> bool:
        return True

    def aggregate_block(self, block: Block) -> Any:
        column = _column(block, self._target_col_name)
        count = len(column) - column.null_count if self._ignore_nulls else len(column)
        if not count:
            return None
        total = _scalar(pc.sum(column, skip_nulls=self._ignore_nulls, min_count=1))
        if total is None:
            return None
        mean = total / count
        values = pc.cast(column, pa.float64())
        m2 = _scalar(pc.sum(pc.power(pc.subtract(values, mean), 2)))
        return [m2, mean, count]

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        m2_a, mean_a, n_a = current_accumulator
        m2_b, mean_b, n_b = new
        n = n_a + n_b
        delta = mean_b - mean_a
        return [m2_a + m2_b + delta * delta * n_a * n_b / n, (mean_a * n_a + mean_b * n_b) / n, n]

    def finalize(self, accumulator: Any) -> Any:
        m2, _, n = accumulator
        return float("nan") if n - self._ddof <= 0 else math.sqrt(m2 / (n - self._ddof))


class AbsMax(VectorizedAggregateFnV2):
    """Largest absolute value of column ``on``."""

    def __init__(
        self,
        on: str | None = None,
        ignore_nulls: bool = True,
        alias_name: str | None = None,
        zero_factory: Callable[[], Any] = lambda: 0,
    ):
        if on is None or not isinstance(on, str):
            raise ValueError(f"Column to aggregate on has to be provided (got {on})")
        super().__init__(
            alias_name or f"abs_max({on})", zero_factory, on=on, ignore_nulls=ignore_nulls
        )

    def numeric_only(self) -> bool:
        return True

    def aggregate_block(self, block: Block) -> Any:
        column = _column(block, self._target_col_name)
        low = _scalar(pc.min(column, skip_nulls=self._ignore_nulls))
        high = _scalar(pc.max(column, skip_nulls=self._ignore_nulls))
        if is_null(low) or is_null(high):
            return None
        return max(abs(low), abs(high))

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return max(current_accumulator, new)

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return _scalar(pc.max(accumulator_col, skip_nulls=self._ignore_nulls))


class Quantile(VectorizedAggregateFnV2):
    """The ``q`` quantile of column ``on`` (linear interpolation, as pyarrow.compute.quantile)."""

    def __init__(
        self,
        on: str | None = None,
        q: float = 0.5,
        ignore_nulls: bool = True,
        alias_name: str | None = None,
    ):
        if not isinstance(q, (int, float)) or isinstance(q, bool) or not 0 <= q <= 1:
            raise ValueError(f"Quantile: q must be between 0 and 1, got {q!r}.")
        self._q = q
        super().__init__(alias_name or f"quantile({on})", list, on=on, ignore_nulls=ignore_nulls)

    def numeric_only(self) -> bool:
        return True

    def aggregate_block(self, block: Block) -> Any:
        return _column(block, self._target_col_name).to_pylist()

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        return list(current_accumulator) + list(new)

    def _combine_column(self, accumulator_col: pa.Array) -> Any:
        return pc.list_flatten(accumulator_col).to_pylist()

    def finalize(self, accumulator: Any) -> Any:
        values = [v for v in accumulator if v is not None]
        if not values or (not self._ignore_nulls and len(values) < len(accumulator)):
            return None
        return pc.quantile(pa.array(values), q=self._q)[0].as_py()


__all__ = [
    "AbsMax",
    "AggregateFn",
    "AggregateFnV2",
    "Count",
    "Max",
    "Mean",
    "Min",
    "Quantile",
    "Std",
    "Sum",
    "VectorizedAggregateFnV2",
    "is_null",
]
