"""DataContext: the settings one execution runs under, with Ray Data's names.

The settings users set in Ray Data work here too: ``execution_options`` (see
engine/api/execution_options.py), ``target_max_block_size``, ``target_min_block_size``,
``enable_progress_bars``, ``max_errored_blocks``, ``set_config``/``get_config``. A Ray Data
setting shardflow has no equivalent for is accepted with a warning, once per process, that it
has no effect; a name that is neither shardflow's nor Ray Data's raises AttributeError (a
misspelt setting would otherwise do nothing, silently).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from shardflow.engine.api.context_configs import (
    AutoscalingConfig,
    DeltaConfig,
    IcebergConfig,
    LanceConfig,
    ShuffleStrategy,
)
from shardflow.engine.api.execution_options import ExecutionOptions, warn_once

_ENV_DISABLE_BARS = "SHARDFLOW_DISABLE_PROGRESS_BARS"


def _default_memory_budget() -> int:
    return int(_physical_memory() * 0.25)


def _physical_memory() -> int:
    """The machine's RAM in bytes (sysconf where it exists: importing psutil costs ~7 ms)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        import psutil

        return int(psutil.virtual_memory().total)


# Ray Data 2.60's DataContext.retried_io_errors.
RAY_RETRIED_IO_ERRORS = (
    "AWS Error INTERNAL_FAILURE",
    "AWS Error NETWORK_CONNECTION",
    "AWS Error SLOW_DOWN",
    "AWS Error UNKNOWN (HTTP status 503)",
    "AWS Error SERVICE_UNAVAILABLE",
)


def _native_tensor_format() -> Any:
    from shardflow.sdk.tensor_types import FixedShapeTensorFormat

    return FixedShapeTensorFormat.ARROW_NATIVE


def _bars_enabled_by_env() -> bool:
    return os.environ.get(_ENV_DISABLE_BARS, "").strip().lower() not in ("1", "true", "yes")


@dataclass
class RetryPolicy:
    """How transient storage errors are retried.

    Args:
        max_attempts: Attempts per operation, including the first.
        initial_backoff_s: Wait before the first retry; doubles each time.
        max_backoff_s: Upper bound of one wait.
    """

    max_attempts: int = 5
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 10.0


@dataclass
class DataContext:
    """Settings of the current process's executions, in the manner of Ray Data's DataContext.

    Get the current one with ``DataContext.get_current()`` and change its fields; the change
    applies to datasets executed afterwards.

    Args:
        memory_budget_bytes: Upper bound on bytes of blocks in flight (produced and not yet
            consumed) during an execution. Defaults to a quarter of the machine's RAM.
        target_max_block_size: Reads, transforms and exchanges cut blocks larger than this
            into zero-copy slices (Ray Data's default is 128 MiB).
        target_min_block_size: Fused transforms join consecutive smaller output blocks, and
            exchanges gather smaller input blocks before preparing them.
        preserve_order: Emit blocks in the order of their inputs (deterministic results).
        enable_progress_bars: Show progress: bars on a terminal (one for the dataset, one per
            operator), a logged report every ``progress_log_interval_s`` elsewhere. The
            environment variable ``SHARDFLOW_DISABLE_PROGRESS_BARS=1`` turns it all off.
        num_cpus: Worker slots of the local backend; defaults to the machine's cores.
        num_gpus: GPUs the local backend hands to actors and tasks that ask for them;
            defaults to the devices this process can see. Set it (``sf.init(num_gpus=n)``)
            to declare logical GPUs, so GPU scheduling works on a machine without one.
        actor_pool_idle_timeout_s: An autoscaling actor pool stops an actor that has been
            idle this long, down to the pool's minimum size.
        python_udfs_in_processes: Run pure-Python row functions (``map``, ``flat_map``,
            ``filter`` with a function) in worker processes on the local backend, so they use
            every core despite the GIL.
        backend: ``"local"`` or ``"ray"``; set by ``shardflow.init``.
        retry: Retry policy for transient storage errors.
        max_task_retries: How many times a task whose worker died (killed, out of memory) runs
            again before the execution fails; user exceptions are retried only when the
            operation asks (``map_batches(..., retry_exceptions=...)``). On Ray this is the
            tasks' ``max_retries``, which also bounds the reruns that rebuild blocks lost
            with a node (lineage reconstruction; 0 turns it off). Ray Data's tasks retry
            without end.
        max_errored_blocks: How many failed tasks an execution may skip (their blocks are
            dropped and counted in ``stats()``) instead of failing; ``-1`` for no limit.
        no_progress_timeout_s: Fail an execution in which no task produced or finished
            anything for this many seconds while the consumer waited, naming the stage and
            what it waits for; None (the default) waits as long as tasks run.
        streaming_split_timeout_s: Longest wait, in seconds, of a ``streaming_split``
            consumer for the others: for all splits to start an epoch, or (with
            ``equal=True``) for lagging splits to read their share. A TimeoutError then says
            which splits held it up. None waits without end.
        execution_options: Ray Data's ExecutionOptions; ``preserve_order`` is the setting
            above, and resource limits set ``num_cpus`` and ``memory_budget_bytes``.
        enable_operator_progress_bars: Ray Data's switch for per-operator bars: False leaves
            only the dataset's bar (``execution_options.verbose_progress=False`` leaves the
            dataset's and the exchanges').
        arrow_memory_pool: The Arrow memory pool executions make this process's default (and
            their worker processes'): ``"jemalloc"`` (the default), ``"mimalloc"`` (Arrow's
            own default on Linux), ``"system"``, or None to leave Arrow's choice alone. An
            ``ARROW_DEFAULT_MEMORY_POOL`` environment variable always wins. jemalloc returns
            freed pages and shares them between threads, which lowers the peak memory of
            streaming reads and writes (see engine/execution/arrow_memory.py). Arrow's C++ code that
            takes no pool from Python uses the pool chosen when pyarrow was imported:
            jemalloc when ``import shardflow`` came first (see shardflow/_arrow_pool.py).
        enable_arrow_backed_pandas_conversion: pandas batches, ``to_pandas`` and the groups
            of ``map_groups`` give Arrow's standard types as ``pd.ArrowDtype`` columns
            (True, Ray Data 2.60's default), or as NumPy dtypes (False: nulls of integer
            columns become NaN in float64, timestamps keep their unit). Arrow-backed
            columns lack some NumPy operations (``%``), in Ray Data too.
        enable_tensor_extension_casting: pandas batches give tensor columns as object
            columns of NumPy arrays (True, the default), or as ``TensorArray`` columns
            (False; shardflow.extensions), as Ray Data does.
        pandas_block_ignore_metadata: Ignore pandas metadata stored with the data when
            blocks become DataFrames.
        arrow_fixed_shape_tensor_format: Ray Data's choice of tensor type. shardflow always
            stores tensors as Arrow's canonical types, Ray Data's
            ``FixedShapeTensorFormat.ARROW_NATIVE`` (the default here); V1 and V2, Ray Data's
            own types, are accepted with a warning that nothing changes.
        retried_io_errors: Fragments of error messages: a read or write of a file, or a
            listing, that fails with an error whose message holds one of them is retried
            like the transient errors shardflow recognises anyway (throttling, 5xx,
            dropped connections). Ray Data's default list (AWS errors) to begin with.
        shuffle_strategy: Ray Data's choice of shuffle algorithm (a ``ShuffleStrategy``);
            shardflow's exchanges give the same rows whichever is set.
        autoscaling_config: Ray Data's actor-pool autoscaling thresholds.
        iceberg_config, lance_config, delta_config: Retry settings of those connectors.
        progress_log_interval_s: When stderr is not a terminal, seconds between two progress
            reports logged on the ``shardflow.progress`` logger (an execution shorter than
            this logs nothing).
        log_internal_stack_trace: Show shardflow's own frames in the tracebacks of errors
            raised in tasks (by default they show the user's code only), for debugging
            shardflow itself. The environment variable
            ``SHARDFLOW_LOG_INTERNAL_STACK_TRACE=1`` does the same. Ray Data's name; Ray
            Data writes these frames to its log file instead.
        enable_stats_summary_collection: Keep the statistics of every finished execution
            for ``shardflow.list_stats_summaries()`` (off by default, as in Ray Data).

    Examples:
        >>> import shardflow as sf
        >>> ctx = sf.DataContext.get_current()
        >>> ctx.memory_budget_bytes = 512 * 1024 * 1024
    """

    memory_budget_bytes: int = field(default_factory=_default_memory_budget)
    target_max_block_size: int = 64 * 1024 * 1024
    target_min_block_size: int = 1024 * 1024
    preserve_order: bool = True
    enable_progress_bars: bool = field(default_factory=_bars_enabled_by_env)
    num_cpus: int | None = None
    num_gpus: int | None = None
    actor_pool_idle_timeout_s: float = 1.0
    python_udfs_in_processes: bool = True
    backend: str = "local"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_task_retries: int = 3
    max_errored_blocks: int = 0
    no_progress_timeout_s: float | None = None
    streaming_split_timeout_s: float | None = 1800.0
    execution_options: ExecutionOptions = field(
        default_factory=lambda: ExecutionOptions(preserve_order=True)
    )
    enable_operator_progress_bars: bool = True
    arrow_memory_pool: str | None = "jemalloc"
    enable_arrow_backed_pandas_conversion: bool = True
    enable_tensor_extension_casting: bool = True
    pandas_block_ignore_metadata: bool = False
    arrow_fixed_shape_tensor_format: Any = field(default_factory=_native_tensor_format)
    retried_io_errors: list[str] = field(default_factory=lambda: list(RAY_RETRIED_IO_ERRORS))
    shuffle_strategy: ShuffleStrategy = ShuffleStrategy.SHUFFLE_V2
    autoscaling_config: AutoscalingConfig = field(default_factory=AutoscalingConfig)
    iceberg_config: IcebergConfig = field(default_factory=IcebergConfig)
    lance_config: LanceConfig = field(default_factory=LanceConfig)
    delta_config: DeltaConfig = field(default_factory=DeltaConfig)
    log_internal_stack_trace: bool = False
    progress_log_interval_s: float = 5.0
    enable_stats_summary_collection: bool = False
    _kv_configs: dict[str, Any] = field(default_factory=dict, repr=False)

    _current: DataContext | None = None
    _lock = threading.Lock()

    def __post_init__(self) -> None:
        self.execution_options._bind(self, push=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name in _FIELDS:
            if name == "execution_options":
                if not isinstance(value, ExecutionOptions):
                    raise TypeError(
                        f"DataContext.execution_options must be an ExecutionOptions, got "
                        f"{type(value).__name__}."
                    )
                object.__setattr__(self, name, value)
                value._bind(self, push="execution_options" in self.__dict__ and _initialised(self))
                return
            if name == "arrow_fixed_shape_tensor_format":
                _check_tensor_format(value)
            object.__setattr__(self, name, value)
            return
        if name in RAY_ALIASES:
            setattr(self, RAY_ALIASES[name], value)
            return
        if name in RAY_ONLY_SETTINGS:
            honoured = RAY_ONLY_SETTINGS[name]
            if honoured is _NEVER or value not in honoured:
                warn_once(
                    f"DataContext.{name}",
                    f"DataContext.{name} is a Ray Data setting that shardflow does not apply; "
                    "setting it has no effect.",
                )
            object.__setattr__(self, name, value)
            return
        close = difflib.get_close_matches(name, list(_FIELDS) + list(RAY_ALIASES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"DataContext has no setting {name!r}.{hint}")

    def __getattr__(self, name: str) -> Any:  # only for names not set on the instance
        if name in RAY_ALIASES:
            return getattr(self, RAY_ALIASES[name])
        if name in RAY_ONLY_SETTINGS:
            raise AttributeError(
                f"DataContext.{name} is a Ray Data setting that shardflow does not have."
            )
        raise AttributeError(f"DataContext has no setting {name!r}.")

    # -- Ray Data's methods -----------------------------------------------------------------

    def get_config(self, key: str, default: Any = None) -> Any:
        """The value of a key-value setting (``set_config``), or ``default``."""
        return self._kv_configs.get(key, default)

    def set_config(self, key: str, value: Any) -> None:
        """Set a key-value setting, for connectors and user code to read back."""
        self._kv_configs[key] = value

    def remove_config(self, key: str) -> None:
        """Remove a key-value setting (nothing happens when it is not set)."""
        self._kv_configs.pop(key, None)

    def pandas_conversion(self) -> Any:
        """The settings that say how blocks become pandas DataFrames, for the tasks of an
        execution (a shardflow.sdk.pandas_batches.PandasConversion)."""
        from shardflow.sdk.pandas_batches import PandasConversion

        return PandasConversion(
            arrow_backed=bool(self.enable_arrow_backed_pandas_conversion),
            tensors_as_ndarrays=bool(self.enable_tensor_extension_casting),
            ignore_metadata=bool(self.pandas_block_ignore_metadata),
        )

    def copy(self) -> DataContext:
        """A deep copy of this context."""
        return copy.deepcopy(self)

    @staticmethod
    @contextlib.contextmanager
    def current(context: DataContext) -> Iterator[None]:
        """Make ``context`` the current one inside a ``with`` block."""
        with DataContext._lock:
            previous = DataContext._current
            DataContext._current = context
        try:
            yield
        finally:
            with DataContext._lock:
                DataContext._current = previous

    @staticmethod
    def get_current() -> DataContext:
        """The process-wide context, created on first use."""
        with DataContext._lock:
            if DataContext._current is None:
                DataContext._current = DataContext()
            return DataContext._current

    @staticmethod
    def _set_current(context: DataContext) -> None:
        with DataContext._lock:
            DataContext._current = context

    def effective_num_cpus(self) -> int:
        """Worker slots of the local backend."""
        if self.num_cpus is not None:
            if self.num_cpus < 1:
                raise ValueError(f"DataContext.num_cpus must be >= 1, got {self.num_cpus}.")
            return self.num_cpus
        return max(
            1,
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1,
        )

    def progress_bars_enabled(self) -> bool:
        """Whether executions show progress (``enable_progress_bars``, unless the environment
        turns it off)."""
        return self.enable_progress_bars and _bars_enabled_by_env()

    def validate(self) -> None:
        if not isinstance(self.memory_budget_bytes, int) or self.memory_budget_bytes <= 0:
            raise ValueError(
                f"DataContext.memory_budget_bytes must be a positive int, got {self.memory_budget_bytes!r}."
            )
        for name, low in (("max_task_retries", 0), ("max_errored_blocks", -1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"DataContext.{name} must be an int >= {low}, got {value!r}.")
        for name in ("target_max_block_size", "target_min_block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"DataContext.{name} must be a positive int, got {value!r}.")
        # A target_min_block_size above target_max_block_size is allowed, as in Ray Data:
        # blocks are joined up to the minimum, then cut to the maximum, so the maximum wins.
        if self.num_gpus is not None and (
            isinstance(self.num_gpus, bool)
            or not isinstance(self.num_gpus, int)
            or self.num_gpus < 0
        ):
            raise ValueError(f"DataContext.num_gpus must be an int >= 0, got {self.num_gpus!r}.")
        if (
            not isinstance(self.actor_pool_idle_timeout_s, (int, float))
            or self.actor_pool_idle_timeout_s < 0
        ):
            raise ValueError(
                "DataContext.actor_pool_idle_timeout_s must be a number >= 0, got "
                f"{self.actor_pool_idle_timeout_s!r}."
            )
        if (
            isinstance(self.progress_log_interval_s, bool)
            or not isinstance(self.progress_log_interval_s, (int, float))
            or self.progress_log_interval_s <= 0
        ):
            raise ValueError(
                "DataContext.progress_log_interval_s must be a number of seconds > 0, got "
                f"{self.progress_log_interval_s!r}."
            )
        if self.arrow_memory_pool not in (None, "jemalloc", "mimalloc", "system"):
            raise ValueError(
                "DataContext.arrow_memory_pool must be 'jemalloc', 'mimalloc', 'system' or "
                f"None, got {self.arrow_memory_pool!r}."
            )
        if self.backend not in ("local", "ray"):
            raise ValueError(f"DataContext.backend must be 'local' or 'ray', got {self.backend!r}.")


def _check_tensor_format(value: Any) -> None:
    from shardflow.sdk.tensor_types import FixedShapeTensorFormat

    if not isinstance(value, FixedShapeTensorFormat):
        raise TypeError(
            "DataContext.arrow_fixed_shape_tensor_format must be a FixedShapeTensorFormat "
            f"(shardflow.extensions), got {value!r}."
        )
    if value is not FixedShapeTensorFormat.ARROW_NATIVE:
        warn_once(
            "DataContext.arrow_fixed_shape_tensor_format",
            f"DataContext.arrow_fixed_shape_tensor_format = {value}: shardflow always stores "
            "tensors as Arrow's canonical types (FixedShapeTensorFormat.ARROW_NATIVE); setting "
            "it has no effect.",
        )


def _initialised(context: DataContext) -> bool:
    return "_kv_configs" in context.__dict__


_FIELDS = {f.name for f in fields(DataContext)}

# Ray Data's names for shardflow settings.
RAY_ALIASES = {
    "execution_no_progress_timeout_s": "no_progress_timeout_s",
    "log_internal_stack_trace_to_stdout": "log_internal_stack_trace",  # its older name
}

_NEVER = frozenset()

# Ray Data 2.60's other DataContext settings, with the values that describe what shardflow
# does anyway (set to one of those, a setting is taken silently); any other value warns once.
RAY_ONLY_SETTINGS: dict[str, Any] = {
    "print_on_execution_start": (False,),
    "raise_original_map_exception": (
        True,
        False,
    ),  # errors are both: see engine/execution/errors.py
    "use_ray_tqdm": (True, False),
    "enable_rich_progress_bars": (False,),
    "enable_progress_bar_name_truncation": (True, False),
    "enable_auto_log_stats": (False,),
    "verbose_stats_logs": (False,),
    "use_push_based_shuffle": (False,),
    "use_polars": (False,),
    "use_polars_sort": (False,),
    "enable_pandas_block": _NEVER,
    "streaming_read_buffer_size": _NEVER,
    "actor_prefetcher_enabled": _NEVER,
    "pipeline_push_based_shuffle_reduce_tasks": _NEVER,
    "default_hash_shuffle_parallelism": _NEVER,
    "shuffle_compression": _NEVER,
    "hash_shuffle_reduce_batch_size": _NEVER,
    "hash_shuffle_reduce_get_timeout_s": _NEVER,
    "shuffle_input_batch_bytes": _NEVER,
    "max_hash_shuffle_aggregators": _NEVER,
    "min_hash_shuffle_aggregator_wait_time_in_s": _NEVER,
    "hash_shuffle_aggregator_health_warning_interval_s": _NEVER,
    "max_hash_shuffle_finalization_batch_size": _NEVER,
    "join_operator_actor_num_cpus_override": _NEVER,
    "hash_shuffle_operator_actor_num_cpus_override": _NEVER,
    "hash_aggregate_operator_actor_num_cpus_override": _NEVER,
    "use_disk_based_hash_shuffle": _NEVER,
    "gpu_shuffle_num_actors": _NEVER,
    "gpu_shuffle_rmm_pool_size": _NEVER,
    "gpu_shuffle_spill_memory_limit": _NEVER,
    "gpu_shuffle_setup_timeout_s": _NEVER,
    "scheduling_strategy": _NEVER,
    "scheduling_strategy_large_args": _NEVER,
    "large_args_threshold": _NEVER,
    "use_legacy_dataset_ids": _NEVER,
    "decoding_size_estimation": _NEVER,
    "min_parallelism": _NEVER,
    "read_op_min_num_blocks": _NEVER,
    "use_datasource_v2": _NEVER,
    "use_arrow_tensor_v2": (True,),  # deprecated in Ray Data; V2 holds tensors of any size
    "enable_fallback_to_arrow_object_ext_type": _NEVER,
    "accurate_map_phase_timing": _NEVER,
    "per_stage_map_timing": _NEVER,
    "trace_allocations": _NEVER,
    "enable_get_object_locations_for_metrics": _NEVER,
    "write_file_retry_on_errors": _NEVER,
    "warn_on_driver_memory_usage_bytes": _NEVER,
    "actor_task_retry_on_errors": _NEVER,
    "actor_init_retry_on_errors": _NEVER,
    "actor_init_max_retries": _NEVER,
    "max_consecutive_actor_init_deaths": _NEVER,
    "retried_map_errors": _NEVER,
    "max_map_retries": _NEVER,
    "op_resource_reservation_enabled": _NEVER,
    "op_resource_reservation_ratio": _NEVER,
    "output_backpressure_guard_release_interval_s": _NEVER,
    "s3_try_create_dir": _NEVER,
    "wait_for_min_actors_s": _NEVER,
    "max_tasks_in_flight_per_actor": _NEVER,
    "enable_per_node_metrics": _NEVER,
    "override_object_store_memory_limit_fraction": _NEVER,
    "memory_usage_poll_interval_s": _NEVER,
    "dataset_logger_id": _NEVER,
    "issue_detectors_config": _NEVER,
    "isolate_read_workers": _NEVER,
    "downstream_capacity_backpressure_ratio": _NEVER,
    "enable_dynamic_output_queue_size_backpressure": _NEVER,
    "enable_lineage_reconstruction_resource_accounting": _NEVER,
    "enforce_schemas": _NEVER,
    "batch_to_block_arrow_format": _NEVER,
    "custom_execution_callback_classes": _NEVER,
    "default_map_logical_memory_enabled": _NEVER,
    "object_store_reservation_overshoot_ratio": _NEVER,
    "object_store_memory_pressure_fraction": _NEVER,
    "checkpoint_config": _NEVER,
    "target_shuffle_max_block_size": _NEVER,
}


def current_pandas_conversion() -> Any:
    """``DataContext.get_current().pandas_conversion()``: what a stage or an iterator made
    now captures, so that its tasks convert batches with the settings of this moment."""
    return DataContext.get_current().pandas_conversion()


DatasetContext = DataContext
"""Ray Data's older name of :class:`DataContext`."""
