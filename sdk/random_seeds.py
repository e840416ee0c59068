"""Seeds of the random operations, with Ray Data's ``RandomSeedConfig``.

``random_shuffle``, ``randomize_block_order`` and ``random_sample`` take an int seed (the
same randomness on every execution) or a :class:`RandomSeedConfig`, whose
``reseed_after_execution=True`` gives each execution of the dataset a different seed derived
from the base seed and the execution's number (0, 1, 2, ...), as Ray Data does. File
shuffles (``FileShuffleConfig``) follow the same rule.

Examples:
    >>> import shardflow as sf
    >>> from shardflow import RandomSeedConfig
    >>> ds = sf.range(100).random_shuffle(seed=RandomSeedConfig(seed=42, reseed_after_execution=False))
    >>> ds.take(3) == ds.take(3)
    True
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

_SEED_RANGE = 2**32
_lock = threading.Lock()


@dataclass
class RandomSeedConfig:
    """How a random operation is seeded across executions.

    Args:
        seed: The base seed, or None for different randomness on every execution.
        reseed_after_execution: With a seed: True (the default) derives a different seed for
            each execution from ``seed`` and the execution's number; False uses ``seed``
            itself every time.
        use_timestamp_as_default: Ray Data's legacy switch for a seed taken from the clock
            when ``seed`` is None; without a seed shardflow's randomness differs per
            execution either way.

    Raises:
        ValueError: if ``seed`` is neither an int nor None.
    """

    seed: int | None = None
    reseed_after_execution: bool = True
    use_timestamp_as_default: bool = False
    _executions: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seed is not None and not isinstance(self.seed, int):
            raise ValueError("Seed must be an integer or None.")

    def next_seed(self) -> int | None:
        """The seed of the next execution (counting this one)."""
        with _lock:
            execution = self._executions
            self._executions += 1
        return derived_seed(self.seed, self.reseed_after_execution, execution)


def derived_seed(seed: int | None, reseed_after_execution: bool, execution: int) -> int | None:
    """``seed`` itself, or one derived from it and the execution's number."""
    if seed is None:
        return None
    if reseed_after_execution:
        return hash((seed, execution)) % _SEED_RANGE
    return seed


def check_seed(seed: Any) -> Any:
    """``seed`` if it is None, an int or a RandomSeedConfig; Ray Data's ValueError else."""
    if seed is None or isinstance(seed, (int, RandomSeedConfig)):
        return seed
    raise ValueError(f"Invalid seed type: {type(seed)}")


def seed_for_execution(seed: Any) -> int | None:
    """The seed one execution uses: an int as given (wrapped into NumPy's range), or what a
    RandomSeedConfig gives for this execution."""
    if isinstance(seed, RandomSeedConfig):
        seed = seed.next_seed()
    if seed is None:
        return None
    return int(seed) % 2**64  # NumPy's generators take non-negative seeds


__all__ = ["RandomSeedConfig", "check_seed", "derived_seed", "seed_for_execution"]
