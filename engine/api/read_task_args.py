"""Ray Data's per-task scheduling arguments of the read_* functions, checked the same way.

Readers take them so that code written for ray.data runs; shardflow's read operator runs its
tasks with the engine's defaults, so they are checked and not applied.
"""

from __future__ import annotations

from typing import Any

RAY_TASK_ARGS: dict[str, tuple[type, ...]] = {
    "num_cpus": (int, float),
    "num_gpus": (int, float),
    "memory": (int, float),
    "label_selector": (dict,),
    "fallback_strategy": (list,),
    "max_calls": (int,),
    "resources": (dict,),
    "accelerator_type": (str,),
    "runtime_env": (dict,),
    "ray_remote_args": (dict,),
}
_QUANTITIES = ("num_cpus", "num_gpus", "memory", "max_calls")
_KIND_NAMES = {int: "an int", float: "a float", dict: "a dict", list: "a list", str: "a string"}


def check_read_task_args(reader: str, given: dict[str, Any]) -> None:
    """Raise TypeError for an argument of the wrong type, ValueError for a negative quantity,
    as Ray does; ``reader`` names the function in the message."""
    for name, value in given.items():
        kinds = RAY_TASK_ARGS[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            names = " or ".join(_KIND_NAMES[k] for k in kinds)
            raise TypeError(f"{reader}: {name} must be {names}, got {value!r}.")
    for name in _QUANTITIES:
        value = given.get(name)
        if value is not None and value < 0:
            kind = "an int" if name == "max_calls" else "a number"
            raise ValueError(f"{reader}: {name} must be {kind} >= 0, got {value!r}.")
