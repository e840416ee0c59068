"""Planning the operations that are not one-to-one: unions, zips, joins and exchanges."""

from __future__ import annotations

from typing import Any

from shardflow.engine.execution.exchange.grouping import AggregateSpec, MapGroupsSpec
from shardflow.engine.execution.exchange.join import JoinSpec
from shardflow.engine.execution.exchange.shuffle import (
    RandomizeBlockOrderSpec,
    RandomShuffleSpec,
    RepartitionSpec,
)
from shardflow.engine.execution.exchange.sort import KeyedRepartitionSpec, SortSpec
from shardflow.engine.execution.exchange.top_k import TopKSpec
from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.exchange import ExchangeOperator
from shardflow.engine.execution.operators.mix import MixOperator
from shardflow.engine.execution.operators.rebatch import RebatchOperator
from shardflow.engine.execution.operators.union import UnionOperator
from shardflow.engine.execution.operators.zip import ZipOperator
from shardflow.engine.plan.logical import (
    Aggregate,
    Join,
    MapGroups,
    Mix,
    RandomizeBlockOrder,
    RandomShuffle,
    Repartition,
    Sort,
    SortKey,
    TopK,
    Union,
    Zip,
)
from shardflow.sdk.random_seeds import seed_for_execution


def plan_special(planner: Any, op: Any, last: PhysicalOperator) -> PhysicalOperator:
    """The operator for ``op`` fed by ``last`` (and by the plans ``op`` holds)."""
    if isinstance(op, Union):
        others = [planner.chain(p) for p in op.others]
        return planner.add(UnionOperator(op.name, [last] + others))
    if isinstance(op, Mix):
        others = [planner.chain(p) for p in op.others]
        return planner.add(
            MixOperator(op.name, [last] + others, list(op.weights), op.stop_on_shortest)
        )
    if isinstance(op, Zip):
        others = [planner.chain(p) for p in op.others]
        return planner.add(ZipOperator(op.name, [last] + others))
    if isinstance(op, Join):
        right = planner.chain(op.right)
        spec = JoinSpec(
            op.join_type, op.on, op.right_on, op.left_suffix, op.right_suffix, op.num_partitions
        )
        return planner.add(
            ExchangeOperator(op.name, [last, right], spec, _run_bytes(planner.context))
        )
    if isinstance(op, Repartition) and op.num_blocks is None:
        return planner.add(RebatchOperator(op.name, last, op.target_num_rows_per_block))
    spec = _exchange_spec(op)
    run_bytes = _run_bytes(planner.context) if spec.gathers_inputs else 0
    memory_run_bytes = planner.context.target_min_block_size if spec.gathers_inputs else 0
    return planner.add(ExchangeOperator(op.name, [last], spec, run_bytes, memory_run_bytes))


def _run_bytes(context: Any) -> int:
    """Prepare tasks gather input blocks into runs of about one partition's size."""
    partition = min(context.target_max_block_size, context.memory_budget_bytes // 8)
    return max(context.target_min_block_size, partition)


def _exchange_spec(op: Any) -> Any:
    if isinstance(op, RandomShuffle):
        return RandomShuffleSpec(seed_for_execution(op.seed), op.num_blocks)
    if isinstance(op, RandomizeBlockOrder):
        return RandomizeBlockOrderSpec(seed_for_execution(op.seed))
    if isinstance(op, Sort):
        return SortSpec(op.key, op.boundaries)
    if isinstance(op, TopK):
        return TopKSpec(op.key, op.limit, op.boundaries, op.bound)
    if isinstance(op, Aggregate):
        return AggregateSpec(op.keys, op.aggs, op.num_partitions, op.encoded_keys)
    if isinstance(op, MapGroups):
        from shardflow.engine.api.context import current_pandas_conversion

        return MapGroupsSpec(
            op.keys,
            op.udf,
            op.batch_format,
            op.name,
            op.num_partitions,
            current_pandas_conversion(),
        )
    if isinstance(op, Repartition):
        if op.keys:
            return KeyedRepartitionSpec(
                SortKey(op.keys, (False,) * len(op.keys)), op.num_blocks, op.sort
            )
        return RepartitionSpec(op.num_blocks, op.shuffle)
    raise TypeError(f"Unknown operation {op!r}.")
