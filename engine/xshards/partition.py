"""``XShards.partition``: local ndarrays (or nested lists, tuples and dicts of them) split
along their first dimension into shards of the same structure."""

from __future__ import annotations

from typing import Any

import numpy as np

from shardflow.engine.xshards.encoding import encode
from shardflow.engine.xshards.errors import XShardsTypeError, XShardsValueError
from shardflow.engine.xshards.execution import blocks_dataset, default_num_shards
from shardflow.sdk.block import BlockMetadata

_SUPPORTED = (
    "XShards.partition takes 1. an np.ndarray, 2. a tuple, list or dict of np.ndarray, or "
    "3. a nested structure of tuples, lists and dicts with np.ndarray leaves; got {what}."
)


def partition_data(data: Any, num_shards: int | None) -> Any:
    """Split ``data`` into ``num_shards`` shards (see ``XShards.partition``)."""
    from shardflow.engine.xshards.shards import XShards

    if num_shards is not None and (
        isinstance(num_shards, bool)
        or not isinstance(num_shards, (int, np.integer))
        or num_shards < 1
    ):
        raise XShardsValueError(f"num_shards must be a positive int or None, got {num_shards!r}.")
    if not isinstance(data, (np.ndarray, list, tuple, dict)):
        raise XShardsTypeError(_SUPPORTED.format(what=type(data).__name__))
    leaves: list[tuple[str, np.ndarray]] = []
    _collect_leaves(data, "data", leaves)
    if not leaves:
        raise XShardsValueError(
            "XShards.partition got no ndarray to split: the structure is empty."
        )
    length = _common_length(leaves)
    if num_shards is None:
        count = max(1, min(default_num_shards(), length))
    else:
        count = int(num_shards)
        if length < count:
            raise XShardsValueError(
                f"The length of data {length} is smaller than the total number of shards "
                f"{count}. Please adjust the num_shards option to be at most {length}."
            )
    # Copies: the shards must not change when the caller later changes its arrays.
    pieces = [[p.copy() for p in np.array_split(leaf, count)] for _, leaf in leaves]
    shards = [_rebuild(data, [p[i] for p in pieces], 0)[0] for i in range(count)]
    from shardflow.engine.xshards.spark.session import spark_session_or_none

    if spark_session_or_none() is not None:
        from shardflow.engine.xshards.spark.shards import from_shards

        return from_shards(shards, count, "Partition")
    blocks = [encode([shard]) for shard in shards]
    metas = [BlockMetadata.of(b) for b in blocks]
    return XShards(blocks_dataset(blocks, metas, "Partition"), count, _name="Partition")


def _collect_leaves(value: Any, path: str, out: list[tuple[str, np.ndarray]]) -> None:
    if isinstance(value, np.ndarray):
        out.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect_leaves(item, f"{path}[{key!r}]", out)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _collect_leaves(item, f"{path}[{index}]", out)
    else:
        raise XShardsTypeError(_SUPPORTED.format(what=f"a {type(value).__name__} at {path}"))


def _common_length(leaves: list[tuple[str, np.ndarray]]) -> int:
    first_path, first = leaves[0]
    for path, leaf in leaves:
        if leaf.ndim == 0:
            raise XShardsValueError(
                f"XShards.partition cannot split the 0-dimensional ndarray at {path}; every "
                "ndarray is split along its first dimension."
            )
    length = int(first.shape[0])
    for path, leaf in leaves[1:]:
        if int(leaf.shape[0]) != length:
            raise XShardsValueError(
                "The ndarrays in data must all have the same size in the first dimension (the "
                f"data is ragged): {first_path} has {length} and {path} has {leaf.shape[0]}."
            )
    return length


def _rebuild(template: Any, pieces: list[np.ndarray], used: int) -> tuple[Any, int]:
    """``template``'s structure with its leaves replaced, in order, by ``pieces``."""
    if isinstance(template, np.ndarray):
        return pieces[used], used + 1
    if isinstance(template, dict):
        out = {}
        for key, item in template.items():
            out[key], used = _rebuild(item, pieces, used)
        if type(template) is not dict:
            try:
                return type(template)(out), used
            except TypeError:
                pass
        return out, used
    items = []
    for item in template:
        value, used = _rebuild(item, pieces, used)
        items.append(value)
    if isinstance(template, tuple) and hasattr(template, "_fields"):
        return type(template)(*items), used
    return type(template)(items), used
