"""Aggregations for ``Dataset.aggregate`` and ``GroupedData.aggregate``, as in ``ray.data.aggregate``."""

from shardflow.engine.api.aggregate import (
    AbsMax,
    AggregateFn,
    AggregateFnV2,
    Count,
    Max,
    Mean,
    Min,
    Quantile,
    Std,
    Sum,
    VectorizedAggregateFnV2,
)
from shardflow.engine.api.aggregate_collections import AsList, CountDistinct, Unique, ValueCounter
from shardflow.engine.api.aggregate_profiles import (
    ApproximateQuantile,
    ApproximateTopK,
    MissingValuePercentage,
    ZeroPercentage,
)

__all__ = [
    "AbsMax",
    "AggregateFn",
    "AggregateFnV2",
    "ApproximateQuantile",
    "ApproximateTopK",
    "AsList",
    "Count",
    "CountDistinct",
    "Max",
    "Mean",
    "Min",
    "MissingValuePercentage",
    "Quantile",
    "Std",
    "Sum",
    "Unique",
    "ValueCounter",
    "VectorizedAggregateFnV2",
    "ZeroPercentage",
]
