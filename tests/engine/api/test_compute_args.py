"""Ray Data 2.60's compute and resource arguments of map-like methods, validated when called."""

from __future__ import annotations

import math

import pytest

import shardflow as sf
from shardflow.engine.api.compute import (
    ActorPoolStrategy,
    TaskPoolStrategy,
    compute_strategy,
)


def double(batch):
    return {"id": batch["id"] * 2}


class Model:
    def __init__(self, factor=1):
        self.factor = factor

    def __call__(self, batch):
        return {"id": batch["id"] * self.factor}


@pytest.mark.parametrize(
    "fn, kwargs, expected",
    [
        (Model, {}, ActorPoolStrategy(min_size=1)),  # Ray 2.60: an unbounded pool from 1
        (Model, {"concurrency": 3}, ActorPoolStrategy(size=3)),
        (Model, {"concurrency": (1, 4)}, ActorPoolStrategy(min_size=1, max_size=4)),
        (
            Model,
            {"concurrency": (1, 4, 2)},
            ActorPoolStrategy(min_size=1, max_size=4, initial_size=2),
        ),
        (Model, {"compute": "actors"}, ActorPoolStrategy()),
        (double, {}, TaskPoolStrategy()),
        (double, {"concurrency": 2}, TaskPoolStrategy(size=2)),
        (double, {"compute": TaskPoolStrategy(size=5)}, TaskPoolStrategy(size=5)),
        (
            Model,
            {"compute": ActorPoolStrategy(size=2), "concurrency": 7},
            ActorPoolStrategy(size=2),
        ),
    ],
)
def test_strategy_from_arguments(fn, kwargs, expected):
    assert (
        compute_strategy(
            fn, kwargs.get("fn_constructor_args"), kwargs.get("compute"), kwargs.get("concurrency")
        )
        == expected
    )


def test_unbounded_pool_defaults():
    strategy = ActorPoolStrategy()
    assert (strategy.min_size, strategy.max_size, strategy.initial_size) == (1, math.inf, 1)


@pytest.mark.parametrize(
    "fn, kwargs, message",
    [
        (double, {"fn_constructor_args": (1,)}, "fn_constructor_args`` can only be specified"),
        (double, {"concurrency": (1, 2)}, "is for callable classes"),
        (double, {"concurrency": 0}, "concurrency must be >= 1"),
        (double, {"concurrency": "x"}, "concurrency must be an int"),
        (Model, {"concurrency": (1, 2, 3, 4)}, "tuple of two or three ints"),
        (Model, {"concurrency": (2, 1)}, r"min_size \(2\) must be <= max_size \(1\)"),
        (Model, {"concurrency": (0, 2)}, "min_size must be >= 1"),
        (Model, {"concurrency": (1, 2, 3)}, "initial_size"),
        (Model, {"concurrency": -1}, "concurrency must be >= 1"),
        (Model, {"concurrency": (1.5, 2)}, "tuple of two or three ints"),
        (Model, {"compute": TaskPoolStrategy()}, "classes run in actor pools"),
        (double, {"compute": ActorPoolStrategy(size=1)}, "actor pools run callable classes"),
        (double, {"compute": 3}, "compute must be a TaskPoolStrategy"),
        (double, {"num_cpus": -1}, "num_cpus must be >= 0"),
        (double, {"num_gpus": -0.5, "batch_size": 4}, "num_gpus must be >= 0"),
        (double, {"memory": "lots"}, "memory must be a number"),
        (double, {"num_gpus": 1}, "explicit batch_size"),
        (double, {"num_gpus": 1.5, "batch_size": 4}, "whole number of GPUs"),
        (double, {"max_retries": -2}, "max_retries must be an int >= -1"),
        (double, {"ray_remote_args_fn": 3}, "ray_remote_args_fn must be a function"),
    ],
)
def test_invalid_arguments_raise_when_the_method_is_called(fn, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sf.range(3).map_batches(fn, **kwargs)


@pytest.mark.parametrize("method", ["map", "flat_map", "filter"])
def test_row_methods_validate_the_same_way(method):
    with pytest.raises(ValueError, match="is for callable classes"):
        getattr(sf.range(3), method)(lambda row: row, concurrency=(1, 2))
    with pytest.raises(ValueError, match="classes run in actor pools"):
        getattr(sf.range(3), method)(Model, compute=TaskPoolStrategy())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"size": 2, "min_size": 1}, "either size"),
        ({"size": 0}, "size must be >= 1"),
        ({"min_size": 3, "max_size": 2}, "must be <= max_size"),
        ({"max_tasks_in_flight_per_actor": 0}, "max_tasks_in_flight_per_actor must be >= 1"),
        ({"min_size": 2, "initial_size": 1}, "initial_size"),
        ({"size": 1.5}, "must be an int"),
    ],
)
def test_actor_pool_strategy_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ActorPoolStrategy(**kwargs)


def test_task_pool_strategy_validates():
    with pytest.raises(ValueError, match="size must be >= 1"):
        TaskPoolStrategy(size=0)
    assert TaskPoolStrategy() == "tasks"


def test_named_and_remote_arguments_are_kept():
    ds = sf.range(3).map_batches(
        Model,
        concurrency=1,
        num_cpus=0.5,
        memory=2**20,
        max_retries=5,
        resources={"custom": 1},
        ray_remote_args_fn=lambda: {"num_cpus": 0.25},
    )
    options = ds._plan.ops[-1].options
    assert (options.num_cpus, options.memory, options.max_retries) == (0.5, 2**20, 5)
    assert options.ray_remote_args == {"max_retries": 5, "resources": {"custom": 1}}
    args = options.remote_args()
    assert args["num_cpus"] == 0.25 and args["resources"] == {"custom": 1}
    assert "max_retries" not in args  # the pool retries crashed inputs itself
