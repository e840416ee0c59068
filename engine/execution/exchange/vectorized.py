"""The built-in aggregations computed over whole blocks with Arrow's hash aggregations.

Each built-in (Count, Sum, Min, Max, Mean, Std, AbsMax) maps to partial state columns per
group of a block, a combination of those states across blocks, and a final column. Rows are
grouped by a group-id column the caller computes (engine/execution/exchange/groups.py), so groups here
and in the generic path always agree. Subclasses of the built-ins that override their
methods take the generic path instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardflow.engine.api.aggregate import AbsMax, AggregateFn, Count, Max, Mean, Min, Std, Sum
from shardflow.sdk.block import Block

GID = "__group"


def _opts(ignore_nulls: bool) -> pc.ScalarAggregateOptions:
    return pc.ScalarAggregateOptions(skip_nulls=ignore_nulls, min_count=1)


def _count_opts(ignore_nulls: bool) -> pc.CountOptions:
    return pc.CountOptions(mode="only_valid" if ignore_nulls else "all")


class Vectorized:
    """How one built-in aggregation runs in bulk; ``prefix`` names its state columns."""

    def __init__(self, agg: AggregateFn, prefix: str):
        self.agg = agg
        self.prefix = prefix
        self.on: str | None = agg.get_target_column()  # type: ignore[attr-defined]
        self.ignore_nulls: bool = agg._ignore_nulls  # type: ignore[attr-defined]

    def state(self, k: int) -> str:
        return f"{self.prefix}_{k}"

    def values(self, block: Block) -> Any:
        """The aggregated column (a column of nulls only is read as float64 nulls)."""
        column = block.column(self.on)
        return pc.cast(column, pa.float64()) if pa.types.is_null(column.type) else column

    # The partial step is described as Arrow hash aggregations, so that the aggregations of
    # one groupby run in a single grouping pass over a block.

    @property
    def input_name(self) -> str:
        return f"{self.prefix}_in"

    def inputs(self, block: Block) -> dict[str, Any]:
        """The columns the partial step aggregates, under names of this aggregation."""
        return {self.input_name: self.values(block)}

    def specs(self) -> list[tuple]:
        """Arrow hash aggregations ``(input, function, options)`` of the partial step."""
        raise NotImplementedError

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        """The state columns from the output of the hash aggregations of ``specs``."""
        raise NotImplementedError

    def specs_for(self, column: Any) -> list[tuple]:
        """``specs()`` for the given input column (some kinds of column need none)."""
        return self.specs()

    def block_specs(self, block: Block) -> tuple:
        """``(inputs, specs)`` of the partial step over ``block``."""
        inputs = self.inputs(block)
        return inputs, self.specs_for(inputs[self.input_name])

    def partial(self, block: Block, gid: np.ndarray) -> dict[str, pa.Array]:
        """State columns, one row per group of ``block`` (groups numbered by ``gid``)."""
        inputs, specs = self.block_specs(block)
        table = pa.table({GID: pa.array(gid), **inputs})
        return self.states(table.group_by(GID, use_threads=False).aggregate(specs))

    def combine(self, states: Block, gid: np.ndarray, groups: int) -> dict[str, pa.Array]:
        """States of several blocks merged, one row per group."""
        raise NotImplementedError

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        raise NotImplementedError

    def nan_as_null(self, values: pa.Array) -> pa.Array:
        """Ray's rule: with ignore_nulls, a NaN result (a NaN among the values) is null."""
        if not self.ignore_nulls or not pa.types.is_floating(values.type):
            return values
        return pc.if_else(pc.fill_null(pc.is_nan(values), False), None, values)


def _hash_aggregate(columns: dict[str, Any], gid: np.ndarray, specs: list[tuple]) -> Block:
    if len(gid) and not gid.any():  # one group (a global aggregation): no Acero plan
        return one_group_aggregate(columns, specs)
    table = pa.table({GID: pa.array(gid), **columns})
    out = table.group_by(GID, use_threads=False).aggregate(specs)
    return out


def one_group_aggregate(columns: dict[str, Any], specs: list[tuple]) -> Block:
    """``pa.table(columns).group_by([]).aggregate(specs)``: every row one group, computed with
    Arrow's scalar aggregate kernels directly. The first Acero plan of a process imports
    pyarrow.acero and pandas (~0.2 s of CPU, in the driver while the workers run: B3's
    ``sum`` paid it), which a global aggregation (sum, count, mean ... over a dataset) need
    not pay. Columns are named as Acero names them, ``{column}_{function}``."""
    out = {}
    for spec in specs:
        column, function = spec[0], spec[1]
        options = spec[2] if len(spec) > 2 else None
        result = pc.call_function(function, [columns[column]], options)
        out[f"{column}_{function}"] = pa.repeat(result, 1)
    # One group is one row even without aggregations to compute (min or max of a column of
    # Arrow's null type): its states are then nulls, not "no group".
    return pa.table(out) if out else pa.table({"": [None]}).select([])


class _Fold(Vectorized):
    """Aggregations whose state is one column folded with the same function (sum, min, max)."""

    function = "sum"

    def _input(self, block: Block) -> Any:
        return self.values(block)

    def inputs(self, block: Block) -> dict[str, Any]:
        return {self.input_name: self._input(block)}

    def specs(self) -> list[tuple]:
        return [(self.input_name, self.function, _opts(self.ignore_nulls))]

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        return {self.state(0): grouped.column(f"{self.input_name}_{self.function}")}

    def combine(self, states: Block, gid: np.ndarray, groups: int) -> dict[str, pa.Array]:
        specs = [("v", self.function, _opts(self.ignore_nulls))]
        out = _hash_aggregate({"v": states.column(self.state(0))}, gid, specs)
        return {self.state(0): out.column(f"v_{self.function}")}

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        return combined[self.state(0)]


class _Sum(_Fold):
    function = "sum"

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        return self.nan_as_null(combined[self.state(0)])


class _MinMax(_Fold):
    """Min and max keep the column's type; a block whose column holds only nulls (Arrow's null
    type) has null states of that type, which later blocks' states absorb."""

    def _input(self, block: Block) -> Any:
        return block.column(self.on)

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        name = f"{self.input_name}_{self.function}"
        if name not in grouped.column_names:
            return {self.state(0): pa.nulls(grouped.num_rows)}
        return {self.state(0): grouped.column(name)}

    def specs_for(self, column: Any) -> list[tuple]:
        return [] if pa.types.is_null(column.type) else self.specs()


class _Min(_MinMax):
    function = "min"


class _Max(_MinMax):
    function = "max"


class _AbsMax(_Fold):
    function = "max"

    def _input(self, block: Block) -> Any:
        return pc.abs(self.values(block))


class _Count(Vectorized):
    def inputs(self, block: Block) -> dict[str, Any]:
        if self.on is None:  # every row counts: any column of the right length will do
            return {self.input_name: pa.nulls(block.num_rows, pa.int8())}
        return {self.input_name: self.values(block)}

    def specs(self) -> list[tuple]:
        mode = "only_valid" if self.on is not None and self.ignore_nulls else "all"
        return [(self.input_name, "count", pc.CountOptions(mode=mode))]

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        return {self.state(0): grouped.column(f"{self.input_name}_count")}

    def combine(self, states: Block, gid: np.ndarray, groups: int) -> dict[str, pa.Array]:
        values = states.column(self.state(0)).to_numpy()
        return {
            self.state(0): pa.array(
                np.bincount(gid, weights=values, minlength=groups).astype(np.int64)
            )
        }

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        return combined[self.state(0)]


class _Mean(Vectorized):
    def specs(self) -> list[tuple]:
        name = self.input_name
        return [
            (name, "sum", _opts(self.ignore_nulls)),
            (name, "count", _count_opts(self.ignore_nulls)),
        ]

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        name = self.input_name
        return {
            self.state(0): grouped.column(f"{name}_sum"),
            self.state(1): grouped.column(f"{name}_count"),
        }

    def combine(self, states: Block, gid: np.ndarray, groups: int) -> dict[str, pa.Array]:
        specs = [("s", "sum", _opts(self.ignore_nulls)), ("n", "sum")]
        out = _hash_aggregate(
            {"s": states.column(self.state(0)), "n": states.column(self.state(1))}, gid, specs
        )
        return {self.state(0): out.column("s_sum"), self.state(1): out.column("n_sum")}

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        total = pc.cast(combined[self.state(0)], pa.float64())
        count = pc.cast(combined[self.state(1)], pa.float64())
        return self.nan_as_null(pc.divide(total, count))


class _Std(Vectorized):
    """State: count, mean and M2 (sum of squared deviations) per group; merged with Chan's
    formula, which stays accurate when the mean is large against the spread."""

    def inputs(self, block: Block) -> dict[str, Any]:
        values = self.values(block)
        if pa.types.is_decimal(values.type):  # variance has no decimal kernel
            values = pc.cast(values, pa.float64())
        return {self.input_name: values}

    def specs(self) -> list[tuple]:
        skip, name = self.ignore_nulls, self.input_name
        return [
            (name, "count", _count_opts(skip)),
            (name, "mean", _opts(skip)),
            (name, "variance", pc.VarianceOptions(ddof=0, skip_nulls=skip, min_count=1)),
        ]

    def states(self, grouped: Block) -> dict[str, pa.Array]:
        name = self.input_name
        count = grouped.column(f"{name}_count")
        m2 = pc.multiply(grouped.column(f"{name}_variance"), pc.cast(count, pa.float64()))
        return {
            self.state(0): count,
            self.state(1): grouped.column(f"{name}_mean"),
            self.state(2): m2,
        }

    def combine(self, states: Block, gid: np.ndarray, groups: int) -> dict[str, pa.Array]:
        n_col, mean_col, m2_col = (states.column(self.state(k)) for k in range(3))
        null = pc.or_(pc.is_null(mean_col), pc.is_null(m2_col)).to_numpy(zero_copy_only=False)
        n = n_col.to_numpy(zero_copy_only=False).astype(np.float64)
        mean = pc.fill_null(mean_col, 0.0).to_numpy(zero_copy_only=False)
        m2 = pc.fill_null(m2_col, 0.0).to_numpy(zero_copy_only=False)
        n = np.where(null, 0.0, n)
        total = np.bincount(gid, weights=n, minlength=groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            group_mean = np.bincount(gid, weights=n * mean, minlength=groups) / total
        spread = n * (mean - np.nan_to_num(group_mean[gid])) ** 2
        group_m2 = np.bincount(gid, weights=m2, minlength=groups) + np.bincount(
            gid, weights=spread, minlength=groups
        )
        if self.ignore_nulls:
            invalid = total == 0  # no value at all: the result is null
        else:
            invalid = np.bincount(gid, weights=null.astype(np.float64), minlength=groups) > 0
        mask = pa.array(invalid)
        return {
            self.state(0): pa.array(total.astype(np.int64)),
            self.state(1): pc.if_else(mask, None, pa.array(group_mean)),
            self.state(2): pc.if_else(mask, None, pa.array(group_m2)),
        }

    def finalize(self, combined: dict[str, pa.Array]) -> pa.Array:
        n = combined[self.state(0)].to_numpy(zero_copy_only=False).astype(np.float64)
        m2_col = combined[self.state(2)]
        m2 = pc.fill_null(m2_col, 0.0).to_numpy(zero_copy_only=False)
        ddof = self.agg._ddof  # type: ignore[attr-defined]
        with np.errstate(invalid="ignore", divide="ignore"):
            std = np.where(n - ddof > 0, np.sqrt(np.maximum(m2, 0.0) / (n - ddof)), np.nan)
        nan_input = pc.fill_null(pc.is_nan(pc.cast(m2_col, pa.float64())), False)
        std_col = pc.if_else(pc.is_null(m2_col), None, pa.array(std))
        return pc.if_else(nan_input, None if self.ignore_nulls else float("nan"), std_col)


_VECTORIZED = {
    Count: _Count,
    Sum: _Sum,
    Min: _Min,
    Max: _Max,
    Mean: _Mean,
    Std: _Std,
    AbsMax: _AbsMax,
}


def vectorized(agg: AggregateFn, prefix: str) -> Vectorized | None:
    """The bulk form of a built-in aggregation, or None (custom aggregations)."""
    impl = _VECTORIZED.get(type(agg))
    return None if impl is None else impl(agg, prefix)
