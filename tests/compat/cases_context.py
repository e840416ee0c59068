"""Differential cases: the DataContext settings users set."""

from __future__ import annotations

import contextlib

from harness import case


@contextlib.contextmanager
def _restored(context, *names):
    """Put the named settings back afterwards: the context is the process's own."""
    saved = {n: getattr(context, n) for n in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(context, name, value)


@case(
    "DataContext.set_config",
    "DataContext.get_config",
    "DataContext.remove_config",
    "DataContext.copy",
    "DataContext.get_current",
)
def key_value_settings(m, tmp):
    """set_config/get_config/remove_config, copy, the current context"""
    context = m.DataContext.get_current()
    context.set_config("compat.key", {"a": 1})
    got = context.get_config("compat.key")
    copied = context.copy()
    context.remove_config("compat.key")
    return [
        got,
        context.get_config("compat.key"),
        context.get_config("compat.missing", 5),
        copied.get_config("compat.key"),
        copied is context,
        type(copied).__name__,
        m.DataContext.get_current() is context,
    ]


@case(
    "ExecutionOptions",
    "ExecutionResources",
    "DataContext.execution_options",
    note="ExecutionOptions and ExecutionResources objects",
)
def execution_options_objects(m, tmp):
    """constructors, defaults, reprs, copy and equality of the option objects"""
    limits = m.ExecutionResources.for_limits(cpu=2, object_store_memory=3 * 1024**3)
    options = m.ExecutionOptions(resource_limits=limits, preserve_order=True)
    return [
        repr(m.ExecutionResources(cpu=2)),
        repr(limits),
        repr(limits.copy(cpu=1)),
        limits == m.ExecutionResources.for_limits(cpu=2, object_store_memory=3 * 1024**3),
        [limits.cpu, limits.gpu, limits.object_store_memory, limits.memory],
        m.ExecutionOptions().preserve_order,
        options.preserve_order,
        repr(options.resource_limits),
        options.verbose_progress,
        options.actor_locality_enabled,
        options.is_resource_limits_default(),
        m.ExecutionOptions().is_resource_limits_default(),
        repr(m.ExecutionOptions(preserve_order=True)),
    ]


@case("DataContext.execution_options", note="preserve_order and resource limits in effect")
def execution_options_in_effect(m, tmp):
    """with preserve_order the output keeps the input's order; limits still give all rows"""
    context = m.DataContext.get_current()
    with _restored(context, "execution_options"):
        context.execution_options.preserve_order = True
        ordered = m.range(40, override_num_blocks=8).map_batches(lambda b: b).take_all()
        limits = context.execution_options.resource_limits
        context.execution_options.resource_limits = limits.copy(cpu=1)
        limited = sorted(
            r["id"] for r in m.range(10, override_num_blocks=4).map(lambda r: r).take_all()
        )
        return [
            [r["id"] for r in ordered],
            limited,
            context.execution_options.preserve_order,
            context.execution_options.resource_limits.cpu,
        ]


@case(
    "DataContext.target_max_block_size",
    "DataContext.target_min_block_size",
    "DataContext.enable_progress_bars",
    "DataContext.max_errored_blocks",
    note="block sizes, progress bars and skipped errors",
)
def block_sizes_and_switches(m, tmp):
    """a small target block size cuts blocks; bars can be turned off; errored blocks skipped"""
    context = m.DataContext.get_current()
    with _restored(context, "target_max_block_size", "enable_progress_bars", "max_errored_blocks"):
        context.target_max_block_size = 1024
        context.enable_progress_bars = False
        cut = m.range(2000, override_num_blocks=1).map_batches(lambda b: b).materialize()
        context.max_errored_blocks = 1

        def fail_first(batch):
            if batch["id"][0] == 0:
                raise ValueError("skip me")
            return batch

        kept = m.range(10, override_num_blocks=2).map_batches(fail_first).count()
        return [
            cut.num_blocks() > 1,
            cut.count(),
            context.enable_progress_bars,
            isinstance(context.target_max_block_size, int),
            kept,
        ]


@case(
    "context.ShuffleStrategy",
    "DataContext.shuffle_strategy",
    "DataContext.retried_io_errors",
    note="shuffle strategies, the retried I/O errors",
)
def shuffle_and_io_settings(m, tmp):
    """ShuffleStrategy's members; the setting takes one; retried_io_errors' default list
    (debug_limit_shuffle_execution_to_num_blocks: test_documented_differences.py)"""
    from importlib import import_module

    strategy = import_module(f"{m.__name__}.context").ShuffleStrategy
    context = m.DataContext.get_current()
    with _restored(context, "shuffle_strategy"):
        context.shuffle_strategy = strategy.HASH_SHUFFLE
        chosen = context.shuffle_strategy
    return [
        [(s.name, s.value) for s in strategy],
        chosen == strategy.HASH_SHUFFLE,
        list(context.retried_io_errors),
    ]
