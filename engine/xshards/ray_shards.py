"""``XShards.to_ray()`` and RayXShards: partitions held in Ray's object store, with the node
that holds each, for training or inference code written against Ray (Orca's RayXShards).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardflow.engine.execution.refs import RayRef
from shardflow.engine.xshards.encoding import decode, encode
from shardflow.sdk.optional import require

_remote: dict[str, Any] = {}


def _node() -> tuple:
    ray = require("ray", "ray", "XShards.to_ray()")

    return ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id()


def _decode_partition(block: Any) -> tuple:
    from shardflow.engine.execution.refs import resolve

    return decode(resolve(block)), _node()


def _transform_partition(partition: list[Any], func: Callable, args: tuple) -> tuple:
    return [func(element, *args) for element in partition], _node()


def _encode_partition(partition: list[Any]) -> Any:
    return encode(list(partition))


def _remote_fn(name: str, fn: Callable, **options: Any) -> Any:
    ray = require("ray", "ray", "XShards.to_ray()")

    if name not in _remote:
        _remote[name] = ray.remote(**options)(fn) if options else ray.remote(fn)
    return _remote[name]


def _require_ray(what: str) -> None:
    from shardflow.engine.api.context import DataContext

    if DataContext.get_current().backend != "ray":
        raise RuntimeError(
            f"{what} needs the Ray backend: call shardflow.init(backend='ray') first."
        )


def to_ray(xshards: Any) -> RayXShards:
    """Run ``xshards`` on Ray and keep each partition, as a list of shards, in the object
    store on the node where it was made."""
    _require_ray("to_ray()")
    refs, _ = xshards._partitions()
    decode_task = _remote_fn("decode", _decode_partition, num_returns=2)
    pairs = [decode_task.remote(ref.object_ref if isinstance(ref, RayRef) else ref) for ref in refs]
    return RayXShards([p[0] for p in pairs], [p[1] for p in pairs])


class RayXShards:
    """Partitions in Ray's object store: one reference per partition to the list of its
    shards, and the node that holds it.

    Attributes:
        partition2ip: Partition index to the IP address of the node holding it.
        partition2node_id: Partition index to the Ray node id holding it.

    Examples:
        >>> import numpy as np
        >>> import shardflow as sf
        >>> from shardflow.xshards import XShards
        >>> sf.init(backend="ray")  # doctest: +SKIP
        >>> ray_shards = XShards.partition(np.arange(4), 2).to_ray()  # doctest: +SKIP
        >>> ray.get(ray_shards.get_partition_refs()[0])  # doctest: +SKIP
        [array([0, 1])]
    """

    def __init__(self, partition_refs: list[Any], node_refs: list[Any]):
        ray = require("ray", "ray", "XShards.to_ray()")

        self._refs = list(partition_refs)
        nodes = ray.get(list(node_refs))
        self.partition2ip = {i: ip for i, (ip, _) in enumerate(nodes)}
        self.partition2node_id = {i: node for i, (_, node) in enumerate(nodes)}

    def num_partitions(self) -> int:
        """The number of partitions."""
        return len(self._refs)

    def get_partition_refs(self) -> list[Any]:
        """One ObjectRef per partition; each holds the list of that partition's shards."""
        return list(self._refs)

    def get_refs(self) -> list[Any]:
        """The partitions' ObjectRefs (one per partition, as ``get_partition_refs``)."""
        return list(self._refs)

    def collect_partitions(self) -> list[list[Any]]:
        """Every partition's list of shards."""
        ray = require("ray", "ray", "XShards.to_ray()")

        return ray.get(self._refs)

    def collect(self) -> list[Any]:
        """All shards, in partition order."""
        return [shard for partition in self.collect_partitions() for shard in partition]

    def transform_shard(self, func: Callable[..., Any], *args: Any) -> RayXShards:
        """Apply ``func(shard, *args)`` to every shard in Ray tasks, next to the data."""
        if not callable(func):
            raise TypeError(f"transform_shard needs a function, got {type(func).__name__}.")
        task = _remote_fn("transform", _transform_partition, num_returns=2)
        pairs = [task.remote(ref, func, args) for ref in self._refs]
        return RayXShards([p[0] for p in pairs], [p[1] for p in pairs])

    def to_xshards(self) -> Any:
        """These partitions as an XShards on the engine (Ray backend), lazily usable again."""
        from shardflow.engine.xshards.execution import blocks_dataset
        from shardflow.engine.xshards.shards import XShards
        from shardflow.sdk.block import BlockMetadata

        _require_ray("RayXShards.to_xshards()")
        task = _remote_fn("encode", _encode_partition)
        blocks = [RayRef(task.remote(ref)) for ref in self._refs]
        metas = [BlockMetadata(None, None) for _ in blocks]
        return XShards(blocks_dataset(blocks, metas, "FromRay"), len(blocks), _name="FromRay")

    def __repr__(self) -> str:
        return f"RayXShards(num_partitions={self.num_partitions()})"
