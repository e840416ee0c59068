"""Aggregations for ``Dataset.aggregate`` and ``GroupedData.aggregate``, as in ``ray.data.aggregate``."""

from shardflow.engine.api.aggregate import (
    AbsMax,
    AggregateFn,
    AggregateFnV2,
    ApproximateQuantile,
    Count,
    Max,
    Mean,
    Min,
    Quantile,
    Std,
    Sum,
    Unique,
)

__all__ = [
    "AbsMax",
    "AggregateFn",
    "AggregateFnV2",
    "ApproximateQuantile",
    "Count",
    "Max",
    "Mean",
    "Min",
    "Quantile",
    "Std",
    "Sum",
    "Unique",
]
