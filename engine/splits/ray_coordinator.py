"""streaming_split on the Ray backend: the coordinator runs in a Ray actor.

As Ray Data's SplitCoordinator, the actor executes the dataset (its tasks run on the cluster,
blocks stay in the object store) and hands out block references; split iterators hold the
actor's handle, so they can be passed to any Ray task or actor. Ray is imported only here.
"""

from __future__ import annotations

import copy
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.splits.coordinator import SplitCoordinator, portable_error, restore_error
from shardflow.engine.splits.transport import EpochSession
from shardflow.sdk.optional import require

_actor_class = None


class CoordinatorActor:
    """The body of the coordinator actor: a SplitCoordinator on the Ray backend."""

    def __init__(
        self,
        dataset: Any,
        n: int,
        equal: bool,
        timeout_s: float | None,
        context: DataContext,
        locality_hints: list[str] | None = None,
    ):
        context.backend = "ray"
        DataContext._set_current(context)
        self._coordinator = SplitCoordinator(dataset, n, equal, timeout_s, locality_hints)

    def call(self, method: str, *args: Any) -> tuple[str, Any]:
        """Run a coordinator method; errors are returned, to be raised as they were."""
        try:
            return "ok", getattr(self._coordinator, method)(*args)
        except BaseException as exc:
            return "error", portable_error(exc)

    def context(self) -> DataContext:
        return DataContext.get_current()


def create_ray_client(
    dataset: Any,
    n: int,
    equal: bool,
    timeout_s: float | None,
    locality_hints: list[str] | None = None,
) -> RayCoordinatorClient:
    """Start the coordinator actor next to the driver and return a client for it
    (``locality_hints``: one node id per split, see SplitCoordinator)."""
    ray = require("ray", "ray", "streaming_split on the Ray backend")
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    global _actor_class
    if _actor_class is None:
        _actor_class = ray.remote(num_cpus=0)(CoordinatorActor)
    context = copy.deepcopy(DataContext.get_current())
    actor = _actor_class.options(
        # Every split may wait in get() while another calls finish() or start_epoch().
        max_concurrency=2 * n + 4,
        scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id=ray.get_runtime_context().get_node_id(), soft=True
        ),
    ).remote(dataset, n, equal, timeout_s, context, locality_hints)
    return RayCoordinatorClient(actor)


class _RaySession(EpochSession):
    def __init__(self, client: RayCoordinatorClient, split: int):
        self._client = client
        self._split = split
        self._finished = False
        self.epoch = client._call("start_epoch", split)

    def get(self) -> tuple[Any, Any] | None:
        return self._client._call("get", self.epoch, self._split)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        try:
            self._client._call("finish", self.epoch, self._split)
        except ConnectionError:
            pass


class RayCoordinatorClient:
    """Calls the coordinator actor; picklable wherever Ray runs."""

    def __init__(self, actor: Any):
        self._actor = actor

    def open_epoch(self, split: int) -> EpochSession:
        return _RaySession(self, split)

    def stats(self) -> str:
        return self._call("stats")

    def schema(self) -> Any:
        return self._call("schema")

    def context(self) -> DataContext:
        ray = require("ray", "ray", "streaming_split on the Ray backend")

        return ray.get(self._actor.context.remote())

    def _call(self, method: str, *args: Any) -> Any:
        ray = require("ray", "ray", "streaming_split on the Ray backend")

        try:
            status, value = ray.get(self._actor.call.remote(method, *args))
        except ray.exceptions.RayActorError as exc:
            raise ConnectionError(
                f"The streaming_split coordinator actor died ({exc}); create new split "
                "iterators with Dataset.streaming_split()."
            ) from exc
        if status == "error":
            raise restore_error(value)
        return value
