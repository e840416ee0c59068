"""Train/test splits that are not cuts at a row position: streaming (each row flagged as it
passes, at random or by a hash of a column) and stratified (each class cut in proportion).

Both follow Ray Data 2.60's code: a random streaming split draws, per task, from a NumPy
generator seeded with ``[task index, seed]`` (``[task index]`` without a seed), a row going
to train with probability ``1 - test_size``; a hash split sends a row to train when the
64-bit BLAKE2b hash of ``str(value)`` falls below ``(1 - test_size) * 2**64``; a stratified
split puts the last ``int(n * test_size)`` rows of each class (in the order the class's rows
arrive) in the test set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.engine.execution.stages.udf import Stage
from shardflow.engine.plan.logical import MapLike
from shardflow.sdk.block import Block
from shardflow.sdk.datasink import TaskContext

FLAG = "__is_train"
"""The temporary column holding each row's side (True: train)."""


@dataclass(frozen=True, eq=False)
class TrainTestFlags(MapLike):
    """Logical operation: append ``FLAG``, chosen at random or by hashing ``hash_column``."""

    test_size: float
    split_type: str
    hash_column: str | None = None
    seed: int | None = None
    row_preserving = True

    @property
    def name(self) -> str:
        return "TrainTestSplit"

    def make_stage(self) -> _FlagStage:
        return _FlagStage(self.test_size, self.split_type, self.hash_column, self.seed)


class _FlagStage(Stage):
    def __init__(self, test_size: float, split_type: str, hash_column: str | None, seed: Any):
        self.test_size, self.split_type = test_size, split_type
        self.hash_column, self.seed = hash_column, seed
        self.name = "TrainTestSplit"

    def __call__(self, blocks: Iterator[Block], ctx: TaskContext) -> Iterator[Block]:
        rng = None
        for block in blocks:
            if self.split_type == "hash":
                flags = self._hashed(block)
            else:
                if rng is None:  # one generator per task, as Ray Data keeps in its TaskContext
                    entropy = [ctx.task_idx] if self.seed is None else [ctx.task_idx, self.seed]
                    rng = np.random.default_rng(entropy)
                flags = rng.random(block.num_rows) < (1 - self.test_size)
            yield block.append_column(FLAG, pa.array(flags, type=pa.bool_()))

    def _hashed(self, block: Block) -> list[bool]:
        if self.hash_column not in block.column_names:
            raise ValueError(f"Key column {self.hash_column} not found in batch")
        threshold = (1 - self.test_size) * (1 << 64)
        keys = block.column(self.hash_column).to_numpy()
        return [_bucket(key) < threshold for key in keys]


def _bucket(key: Any) -> int:
    digest = hashlib.blake2b(str(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def streaming_train_test_split(
    ds: Any,
    test_size: float,
    split_type: str = "random",
    hash_column: str | None = None,
    seed: int | None = None,
) -> tuple[Any, Any]:
    """``(train, test)`` of ``ds``, each row's side chosen as it streams (see the module
    docstring); both read ``ds`` when they run."""
    if test_size <= 0 or test_size >= 1:
        raise ValueError("test_size must be between 0 and 1.")
    if seed is not None and split_type == "hash":
        raise ValueError("seed is not supported for hash split")
    if hash_column is not None and split_type == "random":
        raise ValueError("hash_column is not supported for random split")
    if split_type == "hash" and hash_column is None:
        raise ValueError("hash_column is required for hash split")
    if split_type not in ("random", "hash"):
        raise ValueError(f"Invalid split type: {split_type}")
    flagged = ds._with(TrainTestFlags(float(test_size), split_type, hash_column, seed))
    return _sides(flagged)


def _sides(flagged: Any) -> tuple[Any, Any]:
    from shardflow.sdk.expressions import col

    train = flagged.filter(expr=col(FLAG) == True).drop_columns([FLAG])  # noqa: E712
    test = flagged.filter(expr=col(FLAG) == False).drop_columns([FLAG])  # noqa: E712
    return train, test


def _flag_group(group: pa.Table, test_size: float) -> pa.Table:
    """One class's rows, the last ``int(n * test_size)`` flagged for the test set."""
    n = group.num_rows
    test_count = int(n * test_size)
    flags = np.array([True] * (n - test_count) + [False] * test_count, dtype=bool)
    return group.append_column(FLAG, pa.array(flags, type=pa.bool_()))


def stratified_train_test_split(ds: Any, test_size: int | float, stratify: str) -> tuple[Any, Any]:
    """``(train, test)`` keeping each class of column ``stratify`` in proportion; both
    materialized."""
    if isinstance(test_size, int):
        total = ds.count()
        if test_size <= 0 or test_size >= total:
            raise ValueError(
                "If `test_size` is an int, it must be bigger than 0 and smaller than the size "
                f"of the dataset ({total}). Got {test_size}."
            )
        test_size = test_size / total
    else:
        check_test_fraction(test_size)
    flagged = (
        ds.groupby(stratify)
        .map_groups(_flag_group, batch_format="pyarrow", fn_args=(test_size,))
        .materialize()
    )
    train, test = _sides(flagged)
    return train.materialize(), test.materialize()


def check_test_fraction(test_size: float) -> None:
    """Ray Data's ValueError for a float ``test_size`` outside (0, 1)."""
    if test_size <= 0 or test_size >= 1:
        raise ValueError(
            "If `test_size` is a float, it must be bigger than 0 and smaller than 1. "
            f"Got {test_size}."
        )
