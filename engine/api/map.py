"""The transforming half of Dataset that runs user functions: map, map_batches, flat_map, filter.

Each takes Ray Data 2.60's arguments for where the function runs: a function runs in tasks
(``concurrency=n`` caps them), a callable class in a pool of actors that each construct it
once (``concurrency=n``, ``(min, max)`` or ``(min, max, initial)``, or ``compute=``), with
``num_cpus``, ``num_gpus`` and ``memory`` per task or actor. The arguments are validated
here, when the method is called (engine/api/compute.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardflow.engine.api.compute import ComputeStrategy, MapOptions, resolve_map_options
from shardflow.engine.iteration.batches import validate_batch_size
from shardflow.engine.plan.logical import (
    FilterExpr,
    FilterRows,
    FlatMap,
    MapBatches,
    MapRows,
    UDFCall,
)
from shardflow.sdk.block import validate_batch_format
from shardflow.sdk.expressions import Expr

DEFAULT_BATCH_SIZE = 1024

Concurrency = int | tuple[int, int] | tuple[int, int, int] | None


def _udf(fn: Any, fn_args: Any, fn_kwargs: Any, ctor_args: Any, ctor_kwargs: Any) -> UDFCall:
    for name, value, kinds in (
        ("fn_args", fn_args, (list, tuple)),
        ("fn_constructor_args", ctor_args, (list, tuple)),
        ("fn_kwargs", fn_kwargs, (dict,)),
        ("fn_constructor_kwargs", ctor_kwargs, (dict,)),
    ):
        if value is not None and not isinstance(value, kinds):
            wanted = "a dict" if dict in kinds else "a list or tuple"
            raise TypeError(f"{name} must be {wanted}, got {type(value).__name__}: {value!r}.")
    return UDFCall(
        fn,
        tuple(fn_args or ()),
        dict(fn_kwargs or {}),
        tuple(ctor_args or ()),
        dict(ctor_kwargs or {}),
    )


def _check_fn(fn: Any, method: str) -> None:
    if not callable(fn):
        raise TypeError(
            f"{method} needs a function (or a callable class); got {type(fn).__name__}."
        )


def _options(fn: Any, method: str, args: dict[str, Any]) -> MapOptions:
    named = {k: args.pop(k) for k in list(args) if k in _NAMED}
    return resolve_map_options(fn, method=method, named_remote_args=named, **args)


_NAMED = (
    "label_selector",
    "fallback_strategy",
    "max_calls",
    "resources",
    "accelerator_type",
    "runtime_env",
)


class MapMixin:
    """Dataset methods that apply user functions. Mixed into Dataset."""

    def map(
        self,
        fn: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        compute: ComputeStrategy | None = None,
        fn_args: tuple[Any, ...] | None = None,
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: tuple[Any, ...] | None = None,
        fn_constructor_kwargs: dict[str, Any] | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        concurrency: Concurrency = None,
        label_selector: dict[str, str] | None = None,
        fallback_strategy: list[dict[str, Any]] | None = None,
        max_calls: int | None = None,
        resources: dict[str, float] | None = None,
        accelerator_type: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
        **ray_remote_args: Any,
    ) -> Any:
        """Apply ``fn`` to each row (a dict), producing one row (a dict) per input row.

        On the local backend row functions run in worker processes, so pure-Python code
        uses every core; prefer ``map_batches`` for vectorized work. ``fn`` may be an
        ``async def`` function (16 rows at a time). Where and with what ``fn`` runs is set
        as in :meth:`map_batches`.

        Args:
            fn: Function, or callable class (constructed once per actor), from row to row.
            compute: ``TaskPoolStrategy`` or ``ActorPoolStrategy`` (see ``map_batches``).
            fn_args: Extra positional arguments for ``fn``.
            fn_kwargs: Extra keyword arguments for ``fn``.
            fn_constructor_args: Constructor arguments when ``fn`` is a class.
            fn_constructor_kwargs: Constructor keyword arguments when ``fn`` is a class.
            num_cpus: CPUs per task or actor.
            num_gpus: GPUs per task or actor.
            memory: Heap memory per task or actor, in bytes.
            concurrency: Deprecated in Ray Data in favour of ``compute``; see ``map_batches``.
            label_selector: Ray only: node labels the workers need.
            fallback_strategy: Ray only: alternative label requirements.
            max_calls: Ray only: calls a task worker handles before exiting.
            resources: Ray only: custom resources per worker.
            accelerator_type: Ray only: the accelerator type the workers need.
            runtime_env: Ray only: the runtime environment of the workers.
            ray_remote_args_fn: Ray only: returns remote arguments for each worker.
            ray_remote_args: Further ``ray.remote`` arguments. ``max_retries`` (default
                ``DataContext.max_task_retries``; -1 without end) bounds how often a failed
                task runs again, on either backend: after its worker died, or after an
                exception ``retry_exceptions`` allows. On Ray the same count also bounds
                the reruns that rebuild blocks lost with a node.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).map(lambda row: {"sq": row["id"] ** 2}).take_all()
            [{'sq': 0}, {'sq': 1}, {'sq': 4}]
        """
        _check_fn(fn, "map")
        args = dict(locals())
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        return self._with(MapRows(udf, _options(fn, "map", _option_args(args))))

    def map_batches(
        self,
        fn: Callable[[Any], Any],
        *,
        batch_size: int | None | str = None,
        compute: ComputeStrategy | None = None,
        batch_format: str | None = "default",
        zero_copy_batch: bool = True,
        fn_args: tuple[Any, ...] | None = None,
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: tuple[Any, ...] | None = None,
        fn_constructor_kwargs: dict[str, Any] | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        concurrency: Concurrency = None,
        udf_modifying_row_count: bool = True,
        label_selector: dict[str, str] | None = None,
        fallback_strategy: list[dict[str, Any]] | None = None,
        max_calls: int | None = None,
        resources: dict[str, float] | None = None,
        accelerator_type: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
        **ray_remote_args: Any,
    ) -> Any:
        """Apply ``fn`` to batches of rows.

        A function runs in stateless tasks. A callable class runs in a pool of actors:
        long-lived workers (processes on the local backend, Ray actors on Ray) that each
        construct the class once, then call it on many batches, so a model is loaded once
        per worker. ``async def __call__`` and async generators run several batches at once
        on an event loop, results in order. A GPU stage (``num_gpus``) sees only its own
        devices through ``CUDA_VISIBLE_DEVICES``.

        Args:
            fn: Function, or callable class, taking a batch and returning a batch (or a
                generator of batches).
            batch_size: Rows per batch; None (the default) passes whole blocks; ``"auto"``
                picks a size from the row width (about 8 MiB per batch). Needed with GPUs.
            compute: ``TaskPoolStrategy(size=n)``: at most n tasks at once (functions);
                ``ActorPoolStrategy(size=n)`` or ``(min_size=, max_size=, initial_size=)``:
                a fixed or autoscaling actor pool (classes). By default a function runs in
                tasks and a class in a pool of 1 actor up to one per CPU, as in Ray Data.
            batch_format: ``"numpy"`` (dict of arrays; also ``"default"``), ``"pandas"`` or
                ``"pyarrow"``.
            zero_copy_batch: Give ``fn`` read-only views of the block's memory where the
                conversion allows (the default, as in Ray Data); False gives writable copies.
            fn_args: Extra positional arguments for ``fn``.
            fn_kwargs: Extra keyword arguments for ``fn``.
            fn_constructor_args: Constructor arguments when ``fn`` is a class.
            fn_constructor_kwargs: Constructor keyword arguments when ``fn`` is a class.
            num_cpus: CPUs per task or actor (default 1; sets the threads of common
                libraries in local actors).
            num_gpus: GPUs per task or actor; fractions share a device. Declare devices
                with ``sf.init(num_gpus=n)`` on a machine without them.
            memory: Heap memory per task or actor in bytes (a scheduling hint on Ray).
            concurrency: ``n``: n actors (class) or at most n tasks (function);
                ``(min, max)`` / ``(min, max, initial)``: an autoscaling actor pool.
                Deprecated in Ray Data in favour of ``compute``, still accepted.
            udf_modifying_row_count: Accepted for compatibility (a hint in Ray Data).
            label_selector: Ray only: node labels the workers need.
            fallback_strategy: Ray only: alternative label requirements.
            max_calls: Ray only: calls a task worker handles before exiting.
            resources: Ray only: custom resources per worker.
            accelerator_type: Ray only: the accelerator type the workers need.
            runtime_env: Ray only: the runtime environment of the workers.
            ray_remote_args_fn: Ray only: returns remote arguments for each worker; they
                override ``ray_remote_args``.
            ray_remote_args: Further ``ray.remote`` arguments. ``max_retries`` bounds how
                often a failed task runs again, on either backend: after its worker died,
                or after an exception ``retry_exceptions`` allows (default
                ``DataContext.max_task_retries`` for tasks, 3 for actors; -1 without end).
                On Ray the same count also bounds the reruns of a task that rebuild its
                blocks lost with a node; actors' blocks are not rebuilt.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(4).map_batches(lambda b: {"x": b["id"] + 1}, batch_size=2)
            >>> ds.take_all()
            [{'x': 1}, {'x': 2}, {'x': 3}, {'x': 4}]
            >>> class Scale:
            ...     def __init__(self, factor):
            ...         self.factor = factor  # built once per actor (load a model here)
            ...     def __call__(self, batch):
            ...         return {"x": batch["id"] * self.factor}
            >>> ds = sf.range(4).map_batches(Scale, fn_constructor_args=(10,), concurrency=1)
            >>> ds.take_all()
            [{'x': 0}, {'x': 10}, {'x': 20}, {'x': 30}]
        """
        _check_fn(fn, "map_batches")
        if batch_size == "default":
            batch_size = DEFAULT_BATCH_SIZE
        if num_gpus is not None and num_gpus > 0 and (batch_size is None or batch_size == "auto"):
            raise ValueError(
                "map_batches needs an explicit batch_size when num_gpus is set: the best size "
                "depends on the model and the device's memory; pass e.g. batch_size=64."
            )
        if batch_size != "auto":
            batch_size = validate_batch_size(batch_size)
        batch_format = validate_batch_format(batch_format)
        args = dict(locals())
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        options = _options(fn, "map_batches", _option_args(args))
        return self._with(MapBatches(udf, batch_size, batch_format, zero_copy_batch, options))

    def flat_map(
        self,
        fn: Callable[[dict[str, Any]], list[dict[str, Any]]],
        *,
        compute: ComputeStrategy | None = None,
        fn_args: tuple[Any, ...] | None = None,
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: tuple[Any, ...] | None = None,
        fn_constructor_kwargs: dict[str, Any] | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        concurrency: Concurrency = None,
        label_selector: dict[str, str] | None = None,
        fallback_strategy: list[dict[str, Any]] | None = None,
        max_calls: int | None = None,
        resources: dict[str, float] | None = None,
        accelerator_type: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
        **ray_remote_args: Any,
    ) -> Any:
        """Apply ``fn`` to each row, producing any number of rows (a list of dicts).

        Takes the same arguments as :meth:`map`.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(2).flat_map(lambda r: [r, r]).take_all()
            [{'id': 0}, {'id': 0}, {'id': 1}, {'id': 1}]
        """
        _check_fn(fn, "flat_map")
        args = dict(locals())
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        return self._with(FlatMap(udf, _options(fn, "flat_map", _option_args(args))))

    def filter(
        self,
        fn: Callable[[dict[str, Any]], bool] | Expr | None = None,
        expr: Expr | str | None = None,
        *,
        compute: ComputeStrategy | None = None,
        fn_args: tuple[Any, ...] | None = None,
        fn_kwargs: dict[str, Any] | None = None,
        fn_constructor_args: tuple[Any, ...] | None = None,
        fn_constructor_kwargs: dict[str, Any] | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory: float | None = None,
        concurrency: Concurrency = None,
        label_selector: dict[str, str] | None = None,
        fallback_strategy: list[dict[str, Any]] | None = None,
        max_calls: int | None = None,
        resources: dict[str, float] | None = None,
        accelerator_type: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        ray_remote_args_fn: Callable[[], dict[str, Any]] | None = None,
        **ray_remote_args: Any,
    ) -> Any:
        """Keep the rows for which ``fn`` returns True, or where ``expr`` holds.

        An expression (``sf.col("x") > 0``, or the string ``"x > 0"``) is evaluated by Arrow
        in bulk and can be pushed into readers that support it; a function is called once per
        row. A function takes the same arguments as in :meth:`map`.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(5).filter(lambda r: r["id"] % 2 == 0).take_all()
            [{'id': 0}, {'id': 2}, {'id': 4}]
            >>> sf.range(5).filter(expr=sf.col("id") > 2).count()
            2
        """
        if isinstance(fn, Expr):  # shardflow also takes an expression in fn's place
            fn, expr = None, fn
        if (fn is None) == (expr is None):
            raise ValueError(
                "filter needs exactly one of fn (a function) or expr (an expression such as "
                "sf.col('x') > 0, or a string such as 'x > 0')."
            )
        if fn is not None and not callable(fn):
            raise ValueError(
                f"fn must be a function (or a callable class), but got {type(fn).__name__} "
                "instead; pass an expression string as expr=, e.g. filter(expr='x > 0')."
            )
        if isinstance(expr, str):
            from shardflow.sdk.expressions import parse_expr

            expr = parse_expr(expr)
        if expr is not None:
            if not isinstance(expr, Expr):
                raise TypeError(
                    f"expr must be an expression built with sf.col(...); got {type(expr).__name__}."
                )
            return self._with(FilterExpr(expr))
        _check_fn(fn, "filter")
        args = dict(locals())
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        return self._with(FilterRows(udf, _options(fn, "filter", _option_args(args))))


_OPTION_ARGS = (
    "compute",
    "concurrency",
    "fn_constructor_args",
    "num_cpus",
    "num_gpus",
    "memory",
    "ray_remote_args_fn",
    "ray_remote_args",
) + _NAMED


def _option_args(local_vars: dict[str, Any]) -> dict[str, Any]:
    """The compute and resource arguments among a method's local variables."""
    return {name: local_vars[name] for name in _OPTION_ARGS}
