"""``Dataset.summary``: per-column statistics chosen by type, and ``DatasetSummary``.

The statistics follow Ray Data 2.60's ``Dataset.summary``: numeric and boolean columns get
count, mean, min, max, std (ddof 0), an approximate median, missing% and zero%; temporal
columns count, min, max and missing%; a column of nulls its count; every other column
(strings, binary, lists, structs, ...) count, missing% and its ten most frequent values.
All of them run as one aggregation (``groupby(None).aggregate``) over the dataset.

A statistic whose type is the column's own (min and max) is kept in a table typed like the
dataset; the others (counts, means, percentages) in a second table typed by the statistic,
since one Arrow column holds one type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.engine.api.aggregate import AggregateFnV2, Count, Max, Mean, Min, Std
from shardflow.engine.api.aggregate_profiles import (
    ApproximateQuantile,
    ApproximateTopK,
    MissingValuePercentage,
    ZeroPercentage,
)
from shardflow.sdk.datatype import DataType

STATISTIC_COLUMN = "statistic"

AggregatorFactory = Callable[[str], list[AggregateFnV2]]


@dataclass
class DatasetSummary:
    """The statistics ``Dataset.summary`` computed, as in Ray Data.

    Attributes:
        dataset_schema: The dataset's Arrow schema.
        columns: The columns summarized.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.from_items([{"x": 1}, {"x": 3}])
        >>> summary = ds.summary(columns=["x"])
        >>> float(summary.get_column_stats("x").set_index("statistic")["value"]["mean"])
        2.0
    """

    STATISTIC_COLUMN = STATISTIC_COLUMN

    _stats_matching_column_dtype: pa.Table
    _stats_mismatching_column_dtype: pa.Table
    dataset_schema: pa.Schema
    columns: list[str]

    def to_pandas(self) -> Any:
        """All statistics as one pandas DataFrame: a ``statistic`` column, sorted, then one
        column per summarized column (a statistic that does not apply is null).

        Returns:
            A ``pandas.DataFrame``.
        """
        import pandas as pd

        matching = _indexed(_frame(self._stats_matching_column_dtype))
        changing = _indexed(_frame(self._stats_mismatching_column_dtype))
        if matching.empty and changing.empty:
            return pd.DataFrame(columns=[STATISTIC_COLUMN])
        combined = matching.combine_first(changing)
        return combined.reset_index().sort_values(STATISTIC_COLUMN).reset_index(drop=True)

    def get_column_stats(self, column: str) -> Any:
        """The statistics of one column as a DataFrame of ``statistic`` and ``value``.

        Args:
            column: A summarized column.

        Returns:
            A ``pandas.DataFrame``, sorted by statistic.

        Raises:
            ValueError: when ``column`` was not summarized.
        """
        import pandas as pd

        pieces = []
        for table in (self._stats_matching_column_dtype, self._stats_mismatching_column_dtype):
            if column in table.schema.names:
                frame = _frame(table)[[STATISTIC_COLUMN, column]]
                pieces.append(frame.rename(columns={column: "value"}))
        if not pieces:
            raise ValueError(f"Column '{column}' not found in summary tables")
        stacked = pd.concat(pieces, ignore_index=True)
        values = stacked.groupby(STATISTIC_COLUMN, sort=False)["value"].apply(_first_present)
        return values.reset_index().sort_values(STATISTIC_COLUMN).reset_index(drop=True)


def _frame(table: pa.Table) -> Any:
    """``table`` as pandas with the conversion of the current DataContext; a column pandas
    cannot take (a tensor column of nulls) becomes nulls."""
    import pandas as pd

    from shardflow.engine.api.context import current_pandas_conversion
    from shardflow.sdk.pandas_batches import block_to_pandas

    conversion = current_pandas_conversion()
    try:
        return block_to_pandas(table, conversion)
    except (TypeError, ValueError, pa.ArrowInvalid):
        columns = {}
        for name in table.schema.names:
            try:
                columns[name] = table.column(name).to_pandas()
            except (TypeError, ValueError, pa.ArrowInvalid):
                columns[name] = pa.nulls(table.num_rows).to_pandas()
        return pd.DataFrame(columns)


def _indexed(frame: Any) -> Any:
    import pandas as pd

    if STATISTIC_COLUMN in frame.columns:
        return frame.set_index(STATISTIC_COLUMN)
    return pd.DataFrame()


def _first_present(values: Any) -> Any:
    present = values.dropna()
    return present.iloc[0] if len(present) else None


# -- which statistics for which type ------------------------------------------------------


def _numeric_stats(column: str) -> list[AggregateFnV2]:
    return [
        Count(on=column, ignore_nulls=False),
        Mean(on=column, ignore_nulls=True),
        Min(on=column, ignore_nulls=True),
        Max(on=column, ignore_nulls=True),
        Std(on=column, ignore_nulls=True, ddof=0),
        ApproximateQuantile(on=column, quantiles=[0.5]),
        MissingValuePercentage(on=column),
        ZeroPercentage(on=column, ignore_nulls=True),
    ]


def _temporal_stats(column: str) -> list[AggregateFnV2]:
    return [
        Count(on=column, ignore_nulls=False),
        Min(on=column, ignore_nulls=True),
        Max(on=column, ignore_nulls=True),
        MissingValuePercentage(on=column),
    ]


def _basic_stats(column: str) -> list[AggregateFnV2]:
    return [
        Count(on=column, ignore_nulls=False),
        MissingValuePercentage(on=column),
        ApproximateTopK(on=column, k=10),
    ]


def _default_mapping() -> dict[Any, AggregatorFactory]:
    mapping: dict[Any, AggregatorFactory] = {
        DataType.from_arrow(t): _numeric_stats
        for t in (
            pa.int8(),
            pa.int16(),
            pa.int32(),
            pa.int64(),
            pa.uint8(),
            pa.uint16(),
            pa.uint32(),
            pa.uint64(),
            pa.float32(),
            pa.float64(),
            pa.bool_(),
        )
    }
    mapping[DataType.from_arrow(pa.string())] = _basic_stats
    mapping[DataType.from_arrow(pa.binary())] = _basic_stats
    mapping["temporal"] = _temporal_stats
    return mapping


def _storage(arrow_type: pa.DataType) -> pa.DataType:
    return arrow_type.storage_type if isinstance(arrow_type, pa.ExtensionType) else arrow_type


def _is_tensor(arrow_type: pa.DataType) -> bool:
    from shardflow.sdk.tensor_types import (
        is_fixed_shape_tensor_type,
        is_variable_shape_tensor_type,
    )

    return bool(is_fixed_shape_tensor_type(arrow_type) or is_variable_shape_tensor_type(arrow_type))


def _in_category(arrow_type: pa.DataType, category: Any) -> bool:
    """Whether ``arrow_type`` is of the category named ``category`` (``"list"``,
    ``"large_list"``, ``"struct"``, ``"map"``, ``"tensor"``, ``"temporal"``: the values of
    Ray Data's ``TypeCategory``, which is a ``str`` enum)."""
    name = getattr(category, "value", category)
    storage = _storage(arrow_type)
    types = pa.types
    if name == "list":
        return bool(
            types.is_list(arrow_type)
            or types.is_large_list(arrow_type)
            or types.is_fixed_size_list(arrow_type)
            or types.is_list_view(arrow_type)
            or types.is_large_list_view(arrow_type)
        )
    if name == "large_list":
        return bool(types.is_large_list(arrow_type) or types.is_large_list_view(arrow_type))
    if name == "struct":
        return bool(types.is_struct(arrow_type))
    if name == "map":
        return bool(types.is_map(arrow_type))
    if name == "tensor":
        return _is_tensor(arrow_type)
    if name == "temporal":
        return bool(types.is_temporal(storage))
    return False


def _fallback_stats(column: str, arrow_type: pa.DataType) -> list[AggregateFnV2]:
    storage = _storage(arrow_type)
    if pa.types.is_null(arrow_type):
        return [Count(on=column, ignore_nulls=False)]
    if pa.types.is_integer(storage) or pa.types.is_floating(storage):
        return _numeric_stats(column)
    if pa.types.is_decimal(storage):
        return _numeric_stats(column)
    if pa.types.is_temporal(storage):
        return _temporal_stats(column)
    return _basic_stats(column)


def aggregators_for(
    schema: pa.Schema, columns: list[str], overrides: dict[Any, AggregatorFactory] | None
) -> list[AggregateFnV2]:
    """The aggregations summarizing ``columns`` of ``schema``: the user's mapping first
    (keys: a DataType for that exact type, or a category name), then the defaults."""
    mapping: dict[Any, AggregatorFactory] = dict(overrides or {})
    for key, factory in _default_mapping().items():
        mapping.setdefault(key, factory)
    aggs: list[AggregateFnV2] = []
    for name in columns:
        arrow_type = schema.field(name).type
        dtype = DataType.from_arrow(arrow_type)
        for key, factory in mapping.items():
            if isinstance(key, DataType):
                if key == dtype:
                    aggs.extend(factory(name))
                    break
            elif isinstance(key, str) and _in_category(arrow_type, key):
                aggs.extend(factory(name))
                break
        else:
            aggs.extend(_fallback_stats(name, arrow_type))
    return aggs


# -- from aggregation results to the two tables -------------------------------------------


def _is_list(arrow_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def _stat_entries(
    agg: AggregateFnV2, value: Any, result_type: pa.DataType
) -> dict[str, tuple[Any, pa.DataType]]:
    """``{statistic name: (value, type)}`` of one aggregation's result: a list result is
    one statistic per item, ``name[0]``, ``name[1]``, ..."""
    name = agg.get_agg_name()
    if isinstance(value, list):
        item_type = result_type.value_type if _is_list(result_type) else result_type
        return {f"{name}[{i}]": (item, item_type) for i, item in enumerate(value)}
    return {name: (value, result_type)}


_PROFILES = (MissingValuePercentage, ZeroPercentage, ApproximateQuantile, ApproximateTopK)


def _result_type(value: Any, result_type: pa.DataType, from_values: bool) -> pa.DataType:
    """The type of a statistic as Ray Data reports it. Ray Data builds the row of results
    from Python values when an aggregation gives a Python value (the profiles): then a
    statistic's type is inferred from its value (a float is a double, an integer an int64,
    None is null), except that dates, times and decimals keep their type."""
    if not from_values:
        return result_type
    if value is None:
        return pa.null()
    storage = _storage(result_type)
    if pa.types.is_temporal(storage) or pa.types.is_decimal(storage):
        return result_type
    try:
        return pa.array([value]).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
        return result_type


def split_statistics(
    row: dict[str, Any], result_schema: pa.Schema, schema: pa.Schema, aggs: list[AggregateFnV2]
) -> tuple[dict, dict, set[str]]:
    """The statistics of ``row`` (the aggregation's one row) split by whether their type is
    their column's: ``({stat: {column: (value, type)}}, the same for the others, columns)``."""
    from_values = any(isinstance(agg, _PROFILES) for agg in aggs)
    by_name = {agg.name: agg for agg in aggs}
    matching: dict[str, dict[str, tuple[Any, pa.DataType]]] = {}
    changing: dict[str, dict[str, tuple[Any, pa.DataType]]] = {}
    columns: set[str] = set()
    for key, value in row.items():
        agg = by_name.get(key)
        target = getattr(agg, "get_target_column", None)
        column = target() if target is not None else None
        if agg is None or not column:
            continue  # an aggregation of no one column (Count()) has no place in the tables
        column_type = schema.field(column).type
        result_type = _result_type(value, result_schema.field(key).type, from_values)
        for stat, (item, item_type) in _stat_entries(agg, value, result_type).items():
            target = matching if item_type == column_type else changing
            target.setdefault(stat, {})[column] = (item, item_type)
        columns.add(column)
    return matching, changing, columns


def statistics_table(
    stats: dict[str, dict[str, tuple[Any, pa.DataType]]],
    columns: set[str],
    schema: pa.Schema,
    keep_column_types: bool,
) -> pa.Table:
    """One row per statistic (sorted by name), one column per summarized column (sorted),
    typed like the dataset's column (``keep_column_types``) or like its first statistic."""
    if not stats:
        return pa.table({})
    names = sorted(stats)
    data: dict[str, pa.Array] = {STATISTIC_COLUMN: pa.array(names)}
    for column in sorted(columns):
        values = []
        first_type = None
        for stat in names:
            entry = stats[stat].get(column)
            values.append(None if entry is None else entry[0])
            if entry is not None and first_type is None:
                first_type = entry[1]
        if keep_column_types and column in schema.names:
            first_type = schema.field(column).type
        data[column] = _array(values, first_type)
    return pa.table(data)


def _array(values: list[Any], arrow_type: pa.DataType | None) -> pa.Array:
    if arrow_type is not None:
        try:
            return pa.array(values, type=arrow_type)
        except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            pass
    try:
        return pa.array(values)
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
        from shardflow.sdk.object_column import objects_to_arrow

        return objects_to_arrow(values)


class SummaryMixin:
    """The ``summary`` method of Dataset."""

    def summary(
        self,
        columns: list[str] | None = None,
        override_dtype_agg_mapping: dict[Any, AggregatorFactory] | None = None,
    ) -> DatasetSummary:
        """Statistics of the dataset's columns, chosen by each column's type.

        Numeric and boolean columns: count, mean, min, max, std (ddof 0), an approximate
        median (``approx_quantile[0]``), missing% and zero%. Temporal columns: count, min,
        max, missing%. String, binary and other columns: count, missing% and the ten most
        frequent values (``approx_topk[i]``, needs ``datasketches`` like the median). A
        column of nulls: its count. All run as one aggregation over the dataset.

        Args:
            columns: The columns to summarize; None (the default) for all.
            override_dtype_agg_mapping: ``{DataType or category: factory}``, where a factory
                takes a column name and returns the aggregations for it; a DataType key
                matches that exact type, a category (``"temporal"``, ``"list"``,
                ``"struct"``, ``"map"``, ``"tensor"``, ``"large_list"``) every type in it.
                Checked before the defaults.

        Returns:
            A :class:`DatasetSummary`; ``to_pandas()`` gives every statistic,
            ``get_column_stats(column)`` one column's.

        Raises:
            ValueError: when the dataset has no schema, a column is not in it, or no column
                can be summarized.

        Examples:
            >>> import shardflow as sf
            >>> from shardflow.aggregate import Count, Sum
            >>> from shardflow.datatype import DataType
            >>> ds = sf.from_items([{"x": 1}, {"x": 2}])
            >>> mapping = {DataType.int64(): lambda c: [Count(on=c), Sum(on=c)]}
            >>> ds.summary(override_dtype_agg_mapping=mapping).to_pandas()["x"].tolist()
            [2, 3]
        """
        if columns is not None and (
            isinstance(columns, str) or not all(isinstance(c, str) for c in columns)
        ):
            raise TypeError(f"summary: columns must be a list of column names, got {columns!r}.")
        if override_dtype_agg_mapping is not None and not isinstance(
            override_dtype_agg_mapping, dict
        ):
            raise TypeError(
                "summary: override_dtype_agg_mapping must be a dict of DataType (or "
                f"category) to factories, got {type(override_dtype_agg_mapping).__name__}."
            )
        schema = self._arrow_schema()  # type: ignore[attr-defined]
        if schema is None:
            raise ValueError("Dataset must have a schema to determine column types")
        chosen = list(schema.names) if columns is None else list(columns)
        missing = set(chosen) - set(schema.names)
        if missing:
            raise ValueError(f"Columns {missing} not found in dataset schema")
        aggs = aggregators_for(schema, chosen, override_dtype_agg_mapping)
        if not aggs:
            raise ValueError(
                "summary() requires at least one column with a supported type. "
                f"Columns provided: {columns if columns is not None else 'all'}. "
                "Check that the specified columns exist and have supported types "
                "(numeric, string, binary, or temporal)."
            )
        result = self.groupby(None).aggregate(*aggs)  # type: ignore[attr-defined]
        blocks = [b for b in result._iter_blocks() if b.num_columns]
        table = pa.concat_tables(blocks) if blocks else None
        if table is None or table.num_rows == 0:
            raise ValueError("summary: the aggregation returned no row.")
        row = table.slice(0, 1).to_pylist()[0]
        matching, changing, summarized = split_statistics(row, table.schema, schema, aggs)
        return DatasetSummary(
            _stats_matching_column_dtype=statistics_table(matching, summarized, schema, True),
            _stats_mismatching_column_dtype=statistics_table(changing, summarized, schema, False),
            dataset_schema=schema,
            columns=list(summarized),
        )
