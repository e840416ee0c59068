"""Exchanges over groups of rows with equal keys: aggregate and map_groups.

Both partition by key range (sampled boundaries), so a group never spans two partitions and
the output comes out sorted by key. ``aggregate`` reduces each block to one row of partial
states per group before the exchange, so only those states move.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.api.aggregate import Count, Mean, Sum
from shardflow.engine.execution.errors import missing_column_message, wrap_user_exception
from shardflow.engine.execution.exchange.base import (
    ExchangeSpec,
    PlanContext,
    PrepareTransform,
    ReducePlan,
    Run,
)
from shardflow.engine.execution.exchange.dense_groups import (
    decode_dictionaries,
    dense_combine,
    dense_partial,
)
from shardflow.engine.execution.exchange.groups import (
    first_rows,
    group_ids,
    group_starts,
    iter_groups,
)
from shardflow.engine.execution.exchange.ranges import sample_keys, sort_block
from shardflow.engine.execution.exchange.sort import MergeRange, range_plans
from shardflow.engine.execution.exchange.vectorized import one_group_aggregate, vectorized
from shardflow.engine.plan.logical import SortKey, UDFCall
from shardflow.sdk.block import Block, block_to_batch, concat_blocks, to_block
from shardflow.sdk.datasink import TaskContext


def ascending(keys: Sequence[str]) -> SortKey:
    return SortKey(tuple(keys), (False,) * len(keys))


def output_names(aggs: Sequence[Any]) -> list[str]:
    """Output column names; a repeated name gets ``_2``, ``_3``, ... as in Ray Data."""
    seen: dict[str, int] = {}
    names = []
    for agg in aggs:
        count = seen.get(agg.name, 0) + 1
        seen[agg.name] = count
        names.append(agg.name if count == 1 else f"{agg.name}_{count}")
    return names


def check_aggregation_input(block: Block, keys: Sequence[str], aggs: Sequence[Any]) -> None:
    """ValueError naming the column (and aggregation) that cannot be used."""
    names = block.column_names
    if not names and block.num_rows == 0:
        return
    for key in keys:
        if key not in names:
            raise ValueError(
                f"You specified the column '{key}', but there's no such column in the dataset. "
                f"The dataset has columns: {names}"
            )
    for agg in aggs:
        for column in agg.target_columns():
            if column not in names:
                raise ValueError(missing_column_message(column, names))
            arrow_type = block.schema.field(column).type
            if agg.numeric_only() and not _is_numeric(arrow_type):
                raise ValueError(
                    f"{agg.name}: column '{column}' has type {arrow_type}, but "
                    f"{type(agg).__name__} needs a numeric column."
                )


def _is_numeric(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_decimal(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_null(arrow_type)
    )


class PartialAggregate(PrepareTransform):
    """Prepare: one row per group of the block (keys + partial states), sorted by key, then a
    sample of the keys."""

    def __init__(
        self, keys: tuple[str, ...], aggs: tuple[Any, ...], encoded_keys: tuple[str, ...] = ()
    ):
        self.keys, self.aggs = keys, aggs
        # Keys the read may deliver as Arrow dictionaries (grouped by their codes, or
        # decoded first): the output keys are always plain.
        self.encoded_keys = encoded_keys

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        check_aggregation_input(block, self.keys, self.aggs)
        block = self._needed_columns(block)
        bulks = [vectorized(agg, f"__s{i}") for i, agg in enumerate(self.aggs)]
        if all(b is not None for b in bulks) and block.num_rows:
            partial = self._hashed(block, bulks)
        else:
            partial = self._sorted(self._decoded(block), bulks)
        yield partial
        yield sample_keys(partial, ascending(self.keys)) if self.keys else pa.table({})

    def _decoded(self, block: Block) -> Block:
        """``block`` with its encoded keys as plain columns."""
        for name in self.encoded_keys:
            i = block.schema.get_field_index(name)
            if i >= 0 and pa.types.is_dictionary(block.schema.field(i).type):
                block = block.set_column(i, name, decode_dictionaries(block.column(i)))
        return block

    def _hashed(self, block: Block, bulks: list[Any]) -> Block:
        """Every aggregation is built in: one Arrow hash aggregation over the block, then the
        (small) result sorted by key."""
        if self.keys:
            dense = dense_partial(block, self.keys, self.aggs, bulks, self.encoded_keys)
            if dense is not None:
                return dense
        block = self._decoded(block)
        columns: dict[str, Any] = {k: block.column(k) for k in self.keys}
        specs: list[tuple] = []
        for bulk in bulks:
            inputs, bulk_specs = bulk.block_specs(block)
            columns.update(inputs)
            specs += bulk_specs
        if self.keys:
            grouped = pa.table(columns).group_by(list(self.keys), use_threads=False)
            grouped = grouped.aggregate(specs)
        else:
            grouped = one_group_aggregate(columns, specs)
        out: dict[str, Any] = {k: grouped.column(k) for k in self.keys}
        for bulk in bulks:
            out.update(bulk.states(grouped))
        partial = pa.table(out)
        return sort_block(partial, ascending(self.keys)) if self.keys else partial

    def _sorted(self, block: Block, bulks: list[Any]) -> Block:
        """Some aggregation is custom: sort by key and fold each group's rows in Python."""
        ordered = sort_block(block, ascending(self.keys)) if self.keys else block
        starts = group_starts(ordered, self.keys)
        gid = group_ids(starts)
        columns: dict[str, Any] = {}
        if self.keys:
            firsts = first_rows(ordered, self.keys, starts)
            columns.update({k: firsts.column(k) for k in self.keys})
        groups = len(starts) - 1
        for i, (agg, bulk) in enumerate(zip(self.aggs, bulks)):
            if bulk is not None:
                columns.update(
                    bulk.partial(ordered, gid) if groups else _empty_states(bulk, ordered)
                )
                continue
            states = []
            for g, rows in iter_groups(ordered, starts):
                key = _group_key(firsts, g) if self.keys else None
                states.append(pickle.dumps(agg._engine_accumulate(agg._engine_init(key), rows)))
            columns[f"__s{i}_0"] = pa.array(states, type=pa.binary())
        return pa.table(columns) if columns else pa.table({"__empty": pa.array([], pa.int8())})

    def _needed_columns(self, block: Block) -> Block:
        """Only the keys and the aggregated columns (unless a custom aggregation may read any)."""
        needed = list(self.keys)
        for agg in self.aggs:
            targets = agg.target_columns()
            if not targets and vectorized(agg, "") is None:
                return block  # a custom aggregation over whole rows
            needed += [c for c in targets if c not in needed]
        return block.select(needed) if block.num_columns else block


def _empty_states(bulk: Any, block: Block) -> dict[str, pa.Array]:
    return bulk.partial(block.slice(0, 0), np.zeros(0, dtype=np.int64)) if block.num_columns else {}


def _group_key(firsts: Block, g: int) -> Any:
    values = tuple(firsts.column(k)[g].as_py() for k in firsts.column_names)
    return values[0] if len(values) == 1 else values


class CombineAggregate(MergeRange):
    """Reduce: merge the partial states of each group in a key range and finalize them."""

    def __init__(
        self, keys: tuple[str, ...], aggs: tuple[Any, ...], lo: tuple | None, hi: tuple | None
    ):
        super().__init__(ascending(keys) if keys else SortKey((), ()), lo, hi)
        self.keys, self.aggs = keys, aggs

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        if self.keys:
            pieces = [p for p in self.pieces(inputs) if p.num_rows]
        else:
            from shardflow.engine.execution.refs import resolve

            pieces = [p for p in (resolve(i) for i in inputs) if p.num_rows]
        partial = concat_blocks(pieces) if pieces else None
        names = output_names(self.aggs)
        if partial is None or partial.num_rows == 0:
            if self.keys:
                return
            # A global aggregation of no rows still answers: each aggregation's empty value.
            values = [agg._engine_finalize(agg._engine_init(None)) for agg in self.aggs]
            yield pa.table({n: pa.array([v]) for n, v in zip(names, values)})
            return
        if self.keys:
            dense = self._dense(partial, names)
            if dense is not None:
                yield dense
                return
            partial = sort_block(partial, ascending(self.keys))
        starts = group_starts(partial, self.keys)
        gid = group_ids(starts)
        groups = len(starts) - 1
        out: dict[str, Any] = {}
        if self.keys:
            firsts = first_rows(partial, self.keys, starts)
            out.update({k: firsts.column(k) for k in self.keys})
        for i, (agg, name) in enumerate(zip(self.aggs, names)):
            bulk = vectorized(agg, f"__s{i}")
            if bulk is not None:
                out[name] = bulk.finalize(bulk.combine(partial, gid, groups))
                continue
            states = partial.column(f"__s{i}_0").to_pylist()
            values = []
            for g in range(groups):
                acc = pickle.loads(states[starts[g]])
                for k in range(starts[g] + 1, starts[g + 1]):
                    acc = agg._engine_merge(acc, pickle.loads(states[k]))
                values.append(agg._engine_finalize(acc))
            out[name] = _column_of(values)
        yield pa.table(out)

    def _dense(self, partial: Block, names: list[str]) -> Block | None:
        """Count, Sum and Mean states merged over dense key codes (dense_groups.py), or None
        when an aggregation or the keys do not suit."""
        bulks: list[Any] = []
        kinds: dict[str, str] = {}
        for i, agg in enumerate(self.aggs):
            bulk = vectorized(agg, f"__s{i}")
            layout = _ADDITIVE_STATES.get(type(agg)) if bulk is not None else None
            if bulk is None or layout is None:
                return None
            bulks.append((bulk, layout))
            kinds.update({bulk.state(k): kind for k, kind in enumerate(layout)})
        table = dense_combine(partial, self.keys, kinds)
        if table is None:
            return None
        out: dict[str, Any] = {k: table.column(k) for k in self.keys}
        for (bulk, layout), name in zip(bulks, names):
            out[name] = bulk.finalize(
                {bulk.state(k): table.column(bulk.state(k)) for k in range(len(layout))}
            )
        return pa.table(out)


_ADDITIVE_STATES: dict[type, tuple[str, ...]] = {
    Count: ("count",),
    Sum: ("sum",),
    Mean: ("sum", "count"),
}


def _column_of(values: list[Any]) -> pa.Array:
    # An aggregation whose results are Arrow scalars chooses the column's type (Unique of a
    # list column gives large lists, as Ray Data).
    typed = next((v.type for v in values if isinstance(v, pa.Scalar)), None)
    if typed is not None:
        return pa.array([v.as_py() if isinstance(v, pa.Scalar) else v for v in values], typed)
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return to_block({"v": values}).column(0)


class AggregateSpec(ExchangeSpec):
    """groupby(keys).aggregate(*aggs), or Dataset.aggregate(*aggs) with no keys."""

    name = "Aggregate"
    gathers_inputs = False

    def __init__(
        self,
        keys: tuple[str, ...],
        aggs: tuple[Any, ...],
        num_partitions: int | None,
        encoded_keys: tuple[str, ...] = (),
    ):
        self.keys, self.aggs, self.num_partitions = keys, aggs, num_partitions
        self.encoded_keys = encoded_keys

    def prepare(self, input_index: int) -> Any:
        return PartialAggregate(self.keys, self.aggs, self.encoded_keys)

    def has_side(self, input_index: int) -> bool:
        return True

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        refs = [r.bundle.ref for r in runs]
        if not self.keys:
            return [ReducePlan(refs, CombineAggregate(self.keys, self.aggs, None, None))]
        if not runs:
            return []
        parts = ctx.num_partitions(self.num_partitions, runs, 1)
        return range_plans(
            runs,
            ascending(self.keys),
            parts,
            None,
            lambda lo, hi: CombineAggregate(self.keys, self.aggs, lo, hi),
        )


class SortByKey(PrepareTransform):
    """Prepare for map_groups: the block sorted by key, then a sample of the keys."""

    def __init__(self, keys: tuple[str, ...]):
        self.keys = keys

    def prepare(self, block: Block, index: int) -> Iterator[Block]:
        check_aggregation_input(block, self.keys, ())
        ordered = sort_block(block, ascending(self.keys)) if self.keys else block
        yield ordered
        yield sample_keys(ordered, ascending(self.keys)) if self.keys else pa.table({})


class ApplyToGroups(MergeRange):
    """Reduce for map_groups: call the user function once per group of a key range."""

    def __init__(
        self,
        keys: tuple[str, ...],
        udf: UDFCall,
        batch_format: str,
        name: str,
        lo: tuple | None,
        hi: tuple | None,
        pandas: Any = None,
    ):
        super().__init__(ascending(keys) if keys else SortKey((), ()), lo, hi)
        self.keys, self.udf, self.batch_format, self.name = keys, udf, batch_format, name
        self.pandas = pandas

    def __call__(self, inputs: list[Any], ctx: TaskContext) -> Iterator[Block]:
        from shardflow.engine.execution.refs import resolve

        if self.keys:
            block = sort_block(concat_blocks(self.pieces(inputs)), ascending(self.keys))
        else:
            block = concat_blocks([resolve(i) for i in inputs])
        if block.num_rows == 0:
            return
        fn = self.udf.fn
        if isinstance(fn, type):
            fn = fn(*self.udf.fn_constructor_args, **self.udf.fn_constructor_kwargs)
        outputs = []
        for _, rows in iter_groups(block, group_starts(block, self.keys)):
            batch = block_to_batch(rows, self.batch_format, self.pandas)
            try:
                result = fn(batch, *self.udf.fn_args, **self.udf.fn_kwargs)
                results = result if _is_generator(result) else [result]
                for item in results:
                    outputs.append(to_block(item))
            except Exception as exc:
                raise wrap_user_exception(self.name, exc) from exc
        if outputs:
            yield concat_blocks(outputs)


def _is_generator(value: Any) -> bool:
    import inspect

    return inspect.isgenerator(value)


class MapGroupsSpec(ExchangeSpec):
    """groupby(keys).map_groups(fn): ``fn`` sees all rows of one group as one batch."""

    name = "MapGroups"

    def __init__(
        self,
        keys: tuple[str, ...],
        udf: UDFCall,
        batch_format: str,
        name: str,
        num_partitions: int | None,
        pandas: Any = None,
    ):
        self.keys, self.udf, self.batch_format, self.op_name = keys, udf, batch_format, name
        self.num_partitions = num_partitions
        self.pandas = pandas  # how groups become DataFrames (captured when planned)

    def prepare(self, input_index: int) -> Any:
        return SortByKey(self.keys)

    def has_side(self, input_index: int) -> bool:
        return True

    def plan(self, runs: list[Run], ctx: PlanContext) -> list[ReducePlan]:
        if not runs:
            return []

        def make(lo: Any, hi: Any) -> ApplyToGroups:
            return ApplyToGroups(
                self.keys, self.udf, self.batch_format, self.op_name, lo, hi, self.pandas
            )

        if not self.keys:
            return [ReducePlan([r.bundle.ref for r in runs], make(None, None))]
        parts = ctx.num_partitions(self.num_partitions, runs, len(runs))
        return range_plans(runs, ascending(self.keys), parts, None, make)
