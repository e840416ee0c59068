"""Where a map-like stage runs: a pool of tasks or a pool of long-lived actors, and with what.

``map``, ``map_batches``, ``flat_map`` and ``filter`` take Ray Data 2.60's keywords
(``compute``, ``concurrency``, ``num_cpus``, ``num_gpus``, ``memory``, Ray's remote arguments).
:func:`resolve_map_options` validates them when the method is called, with Ray's rules and
exception types, and turns them into a :class:`MapOptions` that the logical plan keeps and the
planner reads.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Ray's remote arguments that name a resource or a placement; accepted by name, as Ray Data.
NAMED_REMOTE_ARGS = (
    "label_selector",
    "fallback_strategy",
    "max_calls",
    "resources",
    "accelerator_type",
    "runtime_env",
)

#: Retries of the inputs of a crashed actor when ``max_retries`` is not given. Ray Data
#: restarts actors without end; a bound lets a function that always crashes its worker fail.
DEFAULT_ACTOR_MAX_RETRIES = 3


class ComputeStrategy:
    """Base class of :class:`TaskPoolStrategy` and :class:`ActorPoolStrategy`."""


class TaskPoolStrategy(ComputeStrategy):
    """Run a stage as stateless tasks, at most ``size`` at a time (None: as many as slots allow).

    Args:
        size: The most tasks of this stage running at once; None leaves it to the scheduler.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range(8).map_batches(lambda b: b, compute=sf.TaskPoolStrategy(size=2))
        >>> ds.count()
        8
    """

    def __init__(self, size: int | None = None):
        if size is not None:
            _check_int("TaskPoolStrategy size", size)
            if size < 1:
                raise ValueError(f"TaskPoolStrategy size must be >= 1, got {size}.")
        self.size = size

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str):
            return other == "tasks" and self.size is None
        return isinstance(other, TaskPoolStrategy) and other.size == self.size

    def __hash__(self) -> int:
        return hash(("tasks", self.size))

    def __repr__(self) -> str:
        return f"TaskPoolStrategy(size={self.size})"


class ActorPoolStrategy(ComputeStrategy):
    """Run a callable class in a pool of actors: long-lived workers that each construct the
    class once and then process many batches.

    A fixed pool has ``size`` actors; an autoscaling one starts ``initial_size`` (default
    ``min_size``) actors, grows toward ``max_size`` while inputs wait for a free actor, and
    stops actors that stay idle down to ``min_size``.

    Args:
        size: A fixed pool of this many actors (excludes the three sizes below).
        min_size: The fewest actors (default 1).
        max_size: The most actors; None for no bound but the machine's (or cluster's) CPUs.
        initial_size: Actors started at first, between ``min_size`` and ``max_size``.
        max_tasks_in_flight_per_actor: Inputs queued at one actor at once (default 2 on
            the local backend, 4 on Ray, as Ray Data); more hides transfer time, fewer
            balances load better.
        max_concurrent_calls_per_actor: Accepted for compatibility with Ray Data; calls to
            one actor's function never overlap (async functions run several batches at once).
        enable_true_multi_threading: Accepted for compatibility with Ray Data (see above).

    Examples:
        >>> import shardflow as sf
        >>> class AddOne:
        ...     def __call__(self, batch):
        ...         return {"id": batch["id"] + 1}
        >>> sf.range(4).map_batches(AddOne, compute=sf.ActorPoolStrategy(size=1)).take_all()
        [{'id': 1}, {'id': 2}, {'id': 3}, {'id': 4}]
    """

    def __init__(
        self,
        *,
        size: int | None = None,
        min_size: int | None = None,
        max_size: int | None = None,
        initial_size: int | None = None,
        max_tasks_in_flight_per_actor: int | None = None,
        max_concurrent_calls_per_actor: int | None = None,
        enable_true_multi_threading: bool | None = None,
    ):
        for name, value in (
            ("size", size),
            ("min_size", min_size),
            ("max_size", max_size),
            ("initial_size", initial_size),
            ("max_tasks_in_flight_per_actor", max_tasks_in_flight_per_actor),
            ("max_concurrent_calls_per_actor", max_concurrent_calls_per_actor),
        ):
            if value is not None:
                _check_int(f"ActorPoolStrategy {name}", value)
        if size is not None:
            if size < 1:
                raise ValueError(f"ActorPoolStrategy size must be >= 1, got {size}.")
            if min_size is not None or max_size is not None or initial_size is not None:
                raise ValueError(
                    "ActorPoolStrategy takes either size, or min_size/max_size/initial_size, "
                    "not both."
                )
            min_size = max_size = initial_size = size
        if min_size is not None and min_size < 1:
            raise ValueError(f"ActorPoolStrategy min_size must be >= 1, got {min_size}.")
        if max_size is not None and max_size < 1:
            raise ValueError(f"ActorPoolStrategy max_size must be >= 1, got {max_size}.")
        if min_size is not None and max_size is not None and min_size > max_size:
            raise ValueError(
                f"ActorPoolStrategy min_size ({min_size}) must be <= max_size ({max_size})."
            )
        self.min_size = min_size or 1
        self.max_size: int | float = max_size if max_size is not None else math.inf
        if initial_size is not None:
            if initial_size < self.min_size or initial_size > self.max_size:
                raise ValueError(
                    f"ActorPoolStrategy initial_size ({initial_size}) must be between min_size "
                    f"({self.min_size}) and max_size ({self.max_size})."
                )
        self.initial_size = initial_size or self.min_size
        for name, value in (
            ("max_tasks_in_flight_per_actor", max_tasks_in_flight_per_actor),
            ("max_concurrent_calls_per_actor", max_concurrent_calls_per_actor),
        ):
            if value is not None and value < 1:
                raise ValueError(f"ActorPoolStrategy {name} must be >= 1, got {value}.")
        self.max_tasks_in_flight_per_actor = max_tasks_in_flight_per_actor
        self.max_concurrent_calls_per_actor = max_concurrent_calls_per_actor
        self.enable_true_multi_threading = bool(enable_true_multi_threading)

    def _key(self) -> tuple:
        return (self.min_size, self.max_size, self.initial_size, self.max_tasks_in_flight_per_actor)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ActorPoolStrategy) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(("actors",) + self._key())

    def __repr__(self) -> str:
        return (
            f"ActorPoolStrategy(min_size={self.min_size}, max_size={self.max_size}, "
            f"initial_size={self.initial_size}, "
            f"max_tasks_in_flight_per_actor={self.max_tasks_in_flight_per_actor})"
        )


@dataclass(frozen=True, eq=False)
class MapOptions:
    """Where and with what a map-like stage runs (plain data kept in the logical plan).

    Args:
        compute: A TaskPoolStrategy or an ActorPoolStrategy.
        num_cpus: CPUs per task or actor (None: 1, as Ray Data; 0 for GPU actors).
        num_gpus: GPUs per task or actor.
        memory: Heap memory per task or actor, in bytes (a scheduling hint on Ray).
        ray_remote_args: Further arguments of ``ray.remote`` (``max_retries``, ``resources``,
            ...); ``max_retries`` and ``retry_exceptions`` are the stage's retries on either
            backend.
        ray_remote_args_fn: Called before each task or actor starts on Ray; its arguments
            override ``ray_remote_args``.
    """

    compute: ComputeStrategy = field(default_factory=TaskPoolStrategy)
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: float | None = None
    ray_remote_args: dict[str, Any] = field(default_factory=dict)
    ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None

    @property
    def uses_actors(self) -> bool:
        return isinstance(self.compute, ActorPoolStrategy)

    @property
    def task_limit(self) -> int | None:
        """The most concurrent tasks of a task-pool stage, or None."""
        return self.compute.size if isinstance(self.compute, TaskPoolStrategy) else None

    @property
    def max_retries(self) -> int:
        """Retries of the inputs of a crashed worker (-1: without end)."""
        value = self.ray_remote_args.get("max_retries")
        if value is None:
            return DEFAULT_ACTOR_MAX_RETRIES if self.uses_actors else 0
        return int(value)

    def fuses_with(self, other: MapOptions) -> bool:
        """Whether two task-pool stages may share one task (same limit and same resources)."""
        return (
            not self.uses_actors
            and not other.uses_actors
            and self.task_limit == other.task_limit
            and self.resources() == other.resources()
            and self.ray_remote_args == other.ray_remote_args
            and self.ray_remote_args_fn is None
            and other.ray_remote_args_fn is None
        )

    def resources(self) -> tuple[float | None, float | None, float | None]:
        return (self.num_cpus, self.num_gpus, self.memory)

    def remote_args(self) -> dict[str, Any]:
        """Ray's remote arguments for one task or actor of this stage."""
        # Retries are the operator's: its task pool hands them to the backend (Ray tasks get
        # them as max_retries and a retry_exceptions of their own) or applies them itself.
        args = {
            k: v
            for k, v in self.ray_remote_args.items()
            if k not in ("max_retries", "retry_exceptions")
        }
        for name, value in (
            ("num_cpus", self.num_cpus),
            ("num_gpus", self.num_gpus),
            ("memory", self.memory),
        ):
            if value is not None:
                args[name] = value
        if self.ray_remote_args_fn is not None:
            extra = self.ray_remote_args_fn()
            if not isinstance(extra, Mapping):
                raise TypeError(
                    "ray_remote_args_fn must return a dict of Ray remote arguments, got "
                    f"{type(extra).__name__}."
                )
            args.update(extra)
        return args


DEFAULT_MAP_OPTIONS = MapOptions()


def _check_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}.")


def _check_amount(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}.")


def is_callable_class(fn: Any) -> bool:
    """Whether ``fn`` is a class (constructed once per actor) rather than a function."""
    return isinstance(fn, type)


def compute_strategy(
    fn: Any,
    fn_constructor_args: Any = None,
    compute: Any = None,
    concurrency: Any = None,
) -> ComputeStrategy:
    """The compute strategy of a stage, with Ray Data 2.60's rules.

    A class runs in an actor pool (by default one that scales from 1 actor up), a function in
    tasks. ``concurrency=n`` is a fixed pool of n actors for a class and at most n tasks for
    a function; ``(min, max)`` and ``(min, max, initial)`` are autoscaling actor pools.
    ``compute`` wins over ``concurrency`` when both are given.
    """
    is_class = is_callable_class(fn)
    if not is_class and fn_constructor_args is not None:
        raise ValueError(
            "``fn_constructor_args`` can only be specified if providing a callable class "
            f"instance for ``fn``, but got: the function {_describe(fn)}."
        )
    if compute is not None:
        if compute == "tasks":
            compute = TaskPoolStrategy()
        elif compute == "actors":
            compute = ActorPoolStrategy()
        if not isinstance(compute, (TaskPoolStrategy, ActorPoolStrategy)):
            raise ValueError(
                "compute must be a TaskPoolStrategy or an ActorPoolStrategy (or 'tasks' / "
                f"'actors'), got {compute!r}."
            )
        if is_class and isinstance(compute, TaskPoolStrategy):
            raise ValueError(
                f"The callable class {_describe(fn)} cannot run with {compute!r}: classes run "
                "in actor pools. Pass compute=ActorPoolStrategy(...) or leave compute unset."
            )
        if not is_class and isinstance(compute, ActorPoolStrategy):
            raise ValueError(
                f"The function {_describe(fn)} cannot run with {compute!r}: actor pools run "
                "callable classes. Pass compute=TaskPoolStrategy(...) or leave compute unset."
            )
        return compute
    if concurrency is None:
        return ActorPoolStrategy(min_size=1) if is_class else TaskPoolStrategy()
    if isinstance(concurrency, tuple):
        if len(concurrency) not in (2, 3) or not all(
            isinstance(c, int) and not isinstance(c, bool) for c in concurrency
        ):
            raise ValueError(
                "concurrency must be an int, or a tuple of two or three ints (min, max) or "
                f"(min, max, initial); got {concurrency!r}."
            )
        if not is_class:
            raise ValueError(
                f"concurrency={concurrency!r} (a tuple) is for callable classes, but fn is the "
                f"function {_describe(fn)}; use concurrency=n to cap its parallel tasks."
            )
        initial = concurrency[2] if len(concurrency) == 3 else None
        return ActorPoolStrategy(
            min_size=concurrency[0], max_size=concurrency[1], initial_size=initial
        )
    if isinstance(concurrency, int) and not isinstance(concurrency, bool):
        if concurrency < 1:
            raise ValueError(
                f"concurrency must be >= 1 (the most tasks or actors of this stage at once), "
                f"got {concurrency}."
            )
        if is_class:
            return ActorPoolStrategy(size=concurrency)
        return TaskPoolStrategy(size=concurrency)
    raise ValueError(
        "concurrency must be an int, or a tuple of two or three ints (min, max) or "
        f"(min, max, initial); got {concurrency!r}."
    )


def resolve_map_options(
    fn: Any,
    *,
    method: str,
    compute: Any = None,
    concurrency: Any = None,
    fn_constructor_args: Any = None,
    num_cpus: Any = None,
    num_gpus: Any = None,
    memory: Any = None,
    ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    named_remote_args: dict[str, Any] | None = None,
) -> MapOptions:
    """Validate a map-like method's compute and resource arguments (raises ValueError)."""
    strategy = compute_strategy(fn, fn_constructor_args, compute, concurrency)
    remote = dict(ray_remote_args or {})
    amounts = {"num_cpus": num_cpus, "num_gpus": num_gpus, "memory": memory}
    for name in amounts:
        value = remote.pop(name, None)  # the named argument wins, as in Ray Data
        if amounts[name] is None:
            amounts[name] = value
        _check_amount(f"{method}: {name}", amounts[name])
    num_cpus, num_gpus, memory = amounts["num_cpus"], amounts["num_gpus"], amounts["memory"]
    if num_gpus is not None and num_gpus > 1 and num_gpus != int(num_gpus):
        raise ValueError(
            f"{method}: num_gpus above 1 must be a whole number of GPUs, got {num_gpus}."
        )
    if ray_remote_args_fn is not None and not callable(ray_remote_args_fn):
        raise ValueError(
            f"{method}: ray_remote_args_fn must be a function returning a dict, got "
            f"{type(ray_remote_args_fn).__name__}."
        )
    remote.update({k: v for k, v in (named_remote_args or {}).items() if v is not None})
    retries = remote.get("max_retries")
    bad = isinstance(retries, bool) or not isinstance(retries, int) or retries < -1
    if retries is not None and bad:
        raise ValueError(f"{method}: max_retries must be an int >= -1, got {retries!r}.")
    return MapOptions(strategy, num_cpus, num_gpus, memory, remote, ray_remote_args_fn)


def _describe(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
