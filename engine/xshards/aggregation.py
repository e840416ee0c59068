"""``group_by``'s aggregations: Orca's ``agg`` argument read into (column, function) pairs,
the names Spark gives the result columns, and the same aggregations computed with pandas
(the engine backends run them per group; Spark runs its own).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shardflow.engine.xshards.errors import XShardsKeyError, XShardsValueError

# Orca's aggregate functions (pyspark.sql.functions names) and the name Spark prints for
# each in a result column, ``name(column)``.
SPARK_NAMES = {
    "max": "max",
    "min": "min",
    "count": "count",
    "sum": "sum",
    "avg": "avg",
    "mean": "avg",
    "stddev": "stddev",
    "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop",
    "variance": "variance",
    "var_samp": "var_samp",
    "var_pop": "var_pop",
    "skewness": "skewness",
    "kurtosis": "kurtosis",
    "first": "first",
    "last": "last",
    "collect_list": "collect_list",
    "collect_set": "collect_set",
    "approx_count_distinct": "approx_count_distinct",
    "sum_distinct": "sum(DISTINCT {})",
    "sumDistinct": "sum(DISTINCT {})",
    "count_distinct": "count(DISTINCT {})",
    "countDistinct": "count(DISTINCT {})",
}

AggSpec = list[tuple[str, str]]


def parse_agg(agg: Any, keys: list[str], columns: list[str]) -> AggSpec:
    """Orca's ``agg`` (a function name, a list of them, or a dict from column to one or a
    list of names) as (column, function) pairs, in Spark's order."""
    missing = [k for k in keys if k not in columns]
    if missing:
        raise XShardsKeyError(f"{missing} do not exist in this Table; its columns are {columns}.")
    others = [c for c in columns if c not in keys]
    if isinstance(agg, str):
        pairs = [(c, agg) for c in others]
    elif isinstance(agg, list) and all(isinstance(a, str) for a in agg):
        pairs = [(c, stat) for stat in agg for c in others]
    elif isinstance(agg, dict):
        pairs = []
        for column, stats in agg.items():
            if column not in columns:
                raise XShardsKeyError(
                    f"['{column}'] do not exist in this Table; its columns are {columns}."
                )
            stats = [stats] if isinstance(stats, str) else stats
            if not isinstance(stats, list) or not all(isinstance(s, str) for s in stats):
                raise XShardsValueError("value in agg should be str or a list of str")
            pairs += [(column, stat) for stat in stats]
    else:
        raise XShardsValueError(
            f"agg should be str, list of str, or dict; got {type(agg).__name__}."
        )
    unknown = sorted({stat for _, stat in pairs if stat not in SPARK_NAMES})
    if unknown:
        raise XShardsValueError(
            f"Unknown aggregate function(s) {unknown}; use one of {sorted(SPARK_NAMES)}."
        )
    return pairs


def result_name(column: str, stat: str) -> str:
    """The column Spark names for ``stat`` of ``column``."""
    name = SPARK_NAMES[stat]
    return name.format(column) if "{}" in name else f"{name}({column})"


class GroupAggregator:
    """Computes the aggregations of one group (a pandas DataFrame) as a one-row DataFrame of
    the keys and the results, with Spark's semantics (nulls skipped; sample statistics of
    one row are null; skewness and kurtosis are the population ones)."""

    def __init__(self, keys: list[str], pairs: AggSpec):
        self.keys, self.pairs = keys, pairs

    def __call__(self, group: Any) -> Any:
        import pandas as pd

        row: dict[str, Any] = {k: group[k].iloc[:1].reset_index(drop=True) for k in self.keys}
        for column, stat in self.pairs:
            value = aggregate_series(group[column], stat)
            row[result_name(column, stat)] = pd.Series([value])
        if not self.keys and not len(group):
            return pd.DataFrame({name: pd.Series([v[0]]) for name, v in row.items()})
        return pd.DataFrame(row)


def aggregate_series(values: Any, stat: str) -> Any:
    """One aggregate of a pandas Series, as Spark computes it."""
    present = values.dropna()
    n = len(present)
    if stat == "count":
        return np.int64(n)
    if stat in ("count_distinct", "countDistinct", "approx_count_distinct"):
        return np.int64(present.nunique())
    if stat == "collect_list":
        return present.tolist()
    if stat == "collect_set":
        return list(dict.fromkeys(present.tolist()))
    if n == 0:
        return None
    if stat == "sum":
        return present.sum()
    if stat in ("sum_distinct", "sumDistinct"):
        return present.drop_duplicates().sum()
    if stat == "max":
        return present.max()
    if stat == "min":
        return present.min()
    if stat in ("avg", "mean"):
        return float(present.mean())
    if stat == "first":
        return present.iloc[0]
    if stat == "last":
        return present.iloc[-1]
    data = present.to_numpy(dtype=np.float64)
    mean = data.mean()
    m2 = float(((data - mean) ** 2).sum())
    if stat in ("stddev", "stddev_samp", "variance", "var_samp"):
        if n < 2:
            return None
        var = m2 / (n - 1)
        return float(np.sqrt(var)) if stat.startswith("stddev") else var
    if stat in ("stddev_pop", "var_pop"):
        var = m2 / n
        return float(np.sqrt(var)) if stat == "stddev_pop" else var
    m2n = m2 / n
    if m2n == 0:
        return None
    if stat == "skewness":
        return float(((data - mean) ** 3).sum() / n / m2n**1.5)
    return float(((data - mean) ** 4).sum() / n / m2n**2 - 3.0)  # kurtosis
