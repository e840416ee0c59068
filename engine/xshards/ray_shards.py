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
    """Run ``xshards`` and keep each partition, as a list of shards, in Ray's object store:
    on the node where it was made (Ray backend), or put there by the driver, one partition
    at a time, when it was made by Spark."""
    from shardflow.engine.xshards.spark.shards import SparkBackedXShards

    if isinstance(xshards, SparkBackedXShards):
        return _spark_to_ray(xshards)
    _require_ray("to_ray()")
    refs, _ = xshards._partitions()
    decode_task = _remote_fn("decode", _decode_partition, num_returns=2)
    pairs = [decode_task.remote(ref.object_ref if isinstance(ref, RayRef) else ref) for ref in refs]
    return RayXShards([p[0] for p in pairs], [p[1] for p in pairs])


def _spark_to_ray(xshards: Any) -> RayXShards:
    ray = require("ray", "ray", "XShards.to_ray()")

    if not ray.is_initialized():
        raise RuntimeError(
            "to_ray() of XShards on Spark needs Ray: call init_orca_context(backend='spark', "
            "init_ray_on_spark=True) (or ray.init()) first."
        )
    from shardflow.engine.xshards.spark.errors import run_job

    partitions = run_job(lambda: list(xshards.rdd.glom().toLocalIterator()))
    node = _node()
    return RayXShards._of([ray.put(list(p)) for p in partitions], [node] * len(partitions))


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

        self._set(partition_refs, ray.get(list(node_refs)))

    @classmethod
    def _of(cls, partition_refs: list[Any], nodes: list[tuple]) -> RayXShards:
        """A RayXShards over refs whose nodes (ip, node id) are known."""
        shards = object.__new__(cls)
        shards._set(partition_refs, nodes)
        return shards

    def _set(self, partition_refs: list[Any], nodes: list[tuple]) -> None:
        self._refs = list(partition_refs)
        self.partition2ip = {i: ip for i, (ip, _) in enumerate(nodes)}
        self.partition2node_id = {i: node for i, (_, node) in enumerate(nodes)}

    @staticmethod
    def from_partition_refs(
        ip2part_id: dict[str, list[int]], part_id2ref: dict[int, Any], old_rdd: Any = None
    ) -> RayXShards:
        """A RayXShards from partition refs and the node IP that holds each (Orca's
        ``from_partition_refs``; ``old_rdd`` is accepted and unused).

        Args:
            ip2part_id: Node IP address to the partition indices it holds.
            part_id2ref: Partition index (``0 .. n-1``, each once) to its ObjectRef.

        Raises:
            ValueError: When the indices are not ``0 .. n-1`` or the two maps disagree.
        """
        part2ip = {part: ip for ip, parts in ip2part_id.items() for part in parts}
        if sorted(part2ip) != list(range(len(part_id2ref))) or set(part2ip) != set(part_id2ref):
            raise ValueError(
                "from_partition_refs needs every partition index 0 .. n-1 once in both "
                f"ip2part_id and part_id2ref; got {sorted(part2ip)} and {sorted(part_id2ref)}."
            )
        ids = _node_ids_by_ip()
        nodes = [(part2ip[i], ids.get(part2ip[i])) for i in range(len(part_id2ref))]
        return RayXShards._of([part_id2ref[i] for i in range(len(part_id2ref))], nodes)

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

    # -- actors (Orca's training and inference hooks) ---------------------------------

    def assign_partitions_to_actors(self, actors: list[Any]) -> tuple[list, list, list]:
        """Spread the partitions over ``actors``, each getting those on its own node first,
        as evenly as the count allows (Orca's algorithm: ``n // k`` each, one more for
        ``n % k`` of them).

        Args:
            actors: Ray actor handles, each with a ``get_node_ip`` method returning
                ``ray.util.get_node_ip_address()``.

        Returns:
            ``(assignments, actor_ips, assigned_actors)``: the partition indices of each
            actor, their IPs, and the actors; actors that got no partition (fewer partitions
            than actors) are left out of all three.
        """
        ray = require("ray", "ray", "RayXShards")

        _check_actors(actors)
        ips = ray.get([actor.get_node_ip.remote() for actor in actors])
        base, extra = divmod(self.num_partitions(), len(actors))
        assignments: list[list[int]] = [[] for _ in actors]

        def seat(index: int) -> bool:
            nonlocal extra
            held = len(assignments[index])
            if held < base or (held == base and extra > 0):
                extra -= held == base
                return True
            return False

        by_ip: dict[str, list[int]] = {}
        for index, ip in enumerate(ips):
            by_ip.setdefault(ip, []).append(index)
        unplaced = []
        for part in range(self.num_partitions()):
            local = next((i for i in by_ip.get(self.partition2ip[part], []) if seat(i)), None)
            if local is None:
                unplaced.append(part)
            else:
                assignments[local].append(part)
        for part in unplaced:
            target = next(i for i in range(len(actors)) if seat(i))
            assignments[target].append(part)
        kept = [i for i, parts in enumerate(assignments) if parts]
        if len(kept) == len(actors):
            return assignments, ips, list(actors)
        return [assignments[i] for i in kept], [ips[i] for i in kept], [actors[i] for i in kept]

    def transform_shards_with_actors(
        self, actors: list[Any], func: Callable[[Any, Any], Any]
    ) -> RayXShards:
        """Run ``func(actor, partition_ref)`` for each partition on the actor it was assigned
        to (see :meth:`assign_partitions_to_actors`); ``func`` returns the ObjectRef of the
        new partition (a list of shards), which stays on the actor's node.

        Returns:
            A RayXShards of the new partitions, in the same order.
        """
        if not callable(func):
            raise TypeError(f"func must be callable, got {type(func).__name__}.")
        assignments, ips, assigned = self.assign_partitions_to_actors(actors)
        new_refs: dict[int, Any] = {}
        ip2parts: dict[str, list[int]] = {}
        for actor, ip, parts in zip(assigned, ips, assignments):
            for part in parts:
                new_refs[part] = func(actor, self._refs[part])
                ip2parts.setdefault(ip, []).append(part)
        return RayXShards.from_partition_refs(ip2parts, new_refs)

    def reduce_partitions_for_actors(
        self, actors: list[Any], reduce_partitions_func: Callable, return_refs: bool = False
    ) -> list[Any]:
        """Run ``reduce_partitions_func(actor, partition_refs)`` once per actor over the
        partitions assigned to it; it returns one ObjectRef.

        Returns:
            One result per actor (ObjectRefs when ``return_refs``).

        Raises:
            RuntimeError: When there are fewer partitions than actors (repartition first).
        """
        ray = require("ray", "ray", "RayXShards")

        _check_actors(actors)
        if self.num_partitions() < len(actors):
            raise RuntimeError(
                f"Get number of partitions ({self.num_partitions()}) smaller than number of "
                f"actors ({len(actors)}): repartition to at least {len(actors)} partitions."
            )
        assignments, _, assigned = self.assign_partitions_to_actors(actors)
        refs = [
            reduce_partitions_func(actor, [self._refs[p] for p in parts])
            for actor, parts in zip(assigned, assignments)
        ]
        return refs if return_refs else ray.get(refs)

    def zip_reduce_shards_with_actors(
        self,
        xshards: RayXShards,
        actors: list[Any],
        reduce_partitions_func: Callable,
        return_refs: bool = False,
    ) -> list[Any]:
        """As :meth:`reduce_partitions_for_actors`, with the same partitions of ``xshards``:
        ``reduce_partitions_func(actor, my_refs, their_refs)``."""
        ray = require("ray", "ray", "RayXShards")

        if self.num_partitions() != xshards.num_partitions():
            raise RuntimeError("the rdds to be zipped must have the same number of partitions")
        if self.num_partitions() < len(actors):
            raise RuntimeError(
                f"Get number of partitions ({self.num_partitions()}) smaller than number of "
                f"actors ({len(actors)}): repartition to at least {len(actors)} partitions."
            )
        assignments, _, assigned = self.assign_partitions_to_actors(actors)
        refs = [
            reduce_partitions_func(
                actor, [self._refs[p] for p in parts], [xshards._refs[p] for p in parts]
            )
            for actor, parts in zip(assigned, assignments)
        ]
        return refs if return_refs else ray.get(refs)

    def to_spark_xshards(self) -> Any:
        """These partitions as an XShards on Spark (through the driver)."""
        from shardflow.engine.xshards.spark.shards import from_partitions

        return from_partitions(self.collect_partitions(), "FromRay")

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


def _check_actors(actors: Any) -> None:
    if not isinstance(actors, (list, tuple)) or not actors:
        raise ValueError(f"actors must be a non-empty list of Ray actor handles, got {actors!r}.")
    for actor in actors:
        if not hasattr(actor, "get_node_ip"):
            raise RuntimeError("each actor should have a get_node_ip method")


def _node_ids_by_ip() -> dict[str, Any]:
    ray = require("ray", "ray", "RayXShards")

    return {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n.get("Alive")}
