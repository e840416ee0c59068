"""Splitting a dataset into several: split, split_at_indices, split_proportionately,
train_test_split. Each runs the dataset once and cuts its blocks with zero-copy slices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shardflow.engine.execution.refs import slice_metadata, slice_ref
from shardflow.engine.plan.logical import BlocksSource, LogicalPlan

NodeIdStr = str
"""The id of a Ray node, as a string, as Ray Data names it (``ray.data.NodeIdStr``)."""


def _materialized_parts(ds: Any) -> tuple[list[Any], list[Any]]:
    """(references, metadata) of the dataset's blocks, running it once."""
    materialized = ds.materialize()
    source = materialized._plan.source
    return list(source.blocks), list(source.metadata)


def _cut(refs: list[Any], metas: list[Any], bounds: Sequence[int], name: str) -> list[Any]:
    """Datasets holding global rows ``bounds[i] .. bounds[i+1]`` for each i."""
    from shardflow.engine.api.dataset import Dataset

    starts = [0]
    for meta in metas:
        starts.append(starts[-1] + (meta.num_rows or 0))
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        blocks, block_metas = [], []
        for ref, meta, start in zip(refs, metas, starts[:-1]):
            rows = meta.num_rows or 0
            a, b = max(lo, start), min(hi, start + rows)
            if b <= a:
                continue
            if a == start and b == start + rows:
                blocks.append(ref)
                block_metas.append(meta)
            else:
                blocks.append(slice_ref(ref, a - start, b - a))
                block_metas.append(slice_metadata(meta, a - start, b - a))
        out.append(Dataset(LogicalPlan(BlocksSource(tuple(blocks), name, tuple(block_metas)))))
    return out


def _locality_parts(
    refs: list[Any], metas: list[Any], n: int, actors: list[Any]
) -> list[list[int]]:
    """Block positions for each of ``n`` splits, split ``i`` read by ``actors[i]``: as Ray
    Data, every split gets the same number of blocks (the first ones one more), first the
    blocks held on its actor's node, then what is left, in order."""
    from shardflow.engine.execution.runtime import current_backend

    backend = current_backend()
    held = backend.block_nodes(refs) or [frozenset()] * len(refs)
    nodes = backend.actor_nodes(actors)
    counts = [len(refs) // n + (1 if i < len(refs) % n else 0) for i in range(n)]
    parts: list[list[int]] = [[] for _ in range(n)]
    free = [True] * len(refs)
    for i, node in enumerate(nodes):
        for position, where in enumerate(held):
            if len(parts[i]) >= counts[i]:
                break
            if free[position] and node is not None and node in where:
                parts[i].append(position)
                free[position] = False
    rest = iter([position for position in range(len(refs)) if free[position]])
    for i in range(n):
        while len(parts[i]) < counts[i]:
            parts[i].append(next(rest))
    return [sorted(part) for part in parts]


def _equalized(parts: list[list[tuple[Any, Any]]]) -> list[list[tuple[Any, Any]]]:
    """``parts`` (lists of (reference, metadata)) cut so that each holds ``total // n``
    rows: rows beyond that at the end of a part move to the parts short of it, and the
    remainder (fewer than n rows) is dropped, as Ray Data does."""
    n = len(parts)
    target = sum(m.num_rows or 0 for part in parts for _, m in part) // n
    kept: list[list[tuple[Any, Any]]] = []
    spare: list[tuple[Any, Any]] = []
    for part in parts:
        mine, rows = [], 0
        for ref, meta in part:
            count = meta.num_rows or 0
            take = min(count, target - rows)
            if take == count:
                mine.append((ref, meta))
            else:
                if take > 0:
                    mine.append((slice_ref(ref, 0, take), slice_metadata(meta, 0, take)))
                spare.append(
                    (slice_ref(ref, take, count - take), slice_metadata(meta, take, count - take))
                )
            rows += max(take, 0)
        kept.append(mine)
    for mine in kept:
        rows = sum(m.num_rows or 0 for _, m in mine)
        while rows < target and spare:
            ref, meta = spare.pop(0)
            count = meta.num_rows or 0
            take = min(count, target - rows)
            if take < count:
                spare.insert(
                    0,
                    (slice_ref(ref, take, count - take), slice_metadata(meta, take, count - take)),
                )
                ref, meta = slice_ref(ref, 0, take), slice_metadata(meta, 0, take)
            mine.append((ref, meta))
            rows += take
    return kept


def _datasets(parts: list[list[tuple[Any, Any]]], name: str) -> list[Any]:
    from shardflow.engine.api.dataset import Dataset

    return [
        Dataset(
            LogicalPlan(BlocksSource(tuple(r for r, _ in part), name, tuple(m for _, m in part)))
        )
        for part in parts
    ]


class SplitMixin:
    """Dataset methods that cut a dataset into several materialized ones."""

    _plan: LogicalPlan

    def split_at_indices(self, indices: list[int]) -> list[Any]:
        """Split at the given row indices: ``[0, i0), [i0, i1), ..., [in, end)``.

        Args:
            indices: Sorted, non-negative row positions; positions past the end give empty
                datasets.

        Returns:
            ``len(indices) + 1`` materialized datasets.

        Examples:
            >>> import shardflow as sf
            >>> [d.count() for d in sf.range(5).split_at_indices([1, 3])]
            [1, 2, 2]
        """
        if not isinstance(indices, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in indices
        ):
            raise TypeError(f"split_at_indices takes a list of ints, got {indices!r}.")
        if any(i < 0 for i in indices):
            raise ValueError(f"indices must be non-negative, got {list(indices)}.")
        if list(indices) != sorted(indices):
            raise ValueError(f"indices must be sorted in ascending order, got {list(indices)}.")
        refs, metas = _materialized_parts(self)
        total = sum(m.num_rows or 0 for m in metas)
        bounds = [0] + [min(i, total) for i in indices] + [total]
        return _cut(refs, metas, bounds, "Split")

    def split(
        self, n: int, *, equal: bool = False, locality_hints: list[Any] | None = None
    ) -> list[Any]:
        """Split into ``n`` materialized datasets.

        Args:
            n: Number of splits.
            equal: Give every split exactly ``count // n`` rows, dropping the remainder (as
                Ray Data does); otherwise split sizes differ by at most one row.
            locality_hints: ``n`` Ray actor handles, split ``i`` to be read by actor
                ``i``. As in Ray Data, each split then gets whole blocks (the same number of
                blocks each; ``equal=True`` then evens out the rows), first those held on
                its actor's node (seed example: each training worker reads the blocks of its
                own node). Ignored on the local backend (one machine); its length must be
                ``n``.

        Returns:
            ``n`` datasets, in order: split 0 holds the first rows.

        Examples:
            >>> import shardflow as sf
            >>> [d.count() for d in sf.range(10).split(3)]
            [3, 3, 4]
            >>> [d.count() for d in sf.range(10).split(3, equal=True)]
            [3, 3, 3]
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"split: n must be an int, got {n!r}.")
        if n <= 0:
            raise ValueError(f"The number of splits {n} is not positive.")
        if locality_hints is not None and len(locality_hints) != n:
            raise ValueError(
                f"The length of locality_hints {len(locality_hints)} doesn't equal the number of splits {n}."
            )
        from shardflow.engine.api.context import DataContext

        locality = locality_hints is not None and DataContext.get_current().backend == "ray"
        if locality and not all(hasattr(h, "_actor_id") for h in locality_hints or ()):
            raise TypeError(
                "split: locality_hints must be Ray actor handles (one per split), got "
                f"{list(locality_hints or ())!r}."
            )
        refs, metas = _materialized_parts(self)
        if locality:
            positions = _locality_parts(refs, metas, n, list(locality_hints or ()))
            parts = [[(refs[p], metas[p]) for p in part] for part in positions]
            return _datasets(_equalized(parts) if equal else parts, "Split")
        total = sum(m.num_rows or 0 for m in metas)
        if equal:
            each = total // n
            bounds = [each * j for j in range(n + 1)]
        else:
            bounds = [total * j // n for j in range(n + 1)]
        return _cut(refs, metas, bounds, "Split")

    def split_proportionately(self, proportions: list[float]) -> list[Any]:
        """Split by fractions of the row count; the last split takes what remains.

        Args:
            proportions: Positive fractions summing to less than 1.

        Returns:
            ``len(proportions) + 1`` datasets.

        Examples:
            >>> import shardflow as sf
            >>> [d.count() for d in sf.range(10).split_proportionately([0.2, 0.5])]
            [2, 5, 3]
        """
        if not isinstance(proportions, (list, tuple)) or not proportions:
            raise ValueError("proportions must be a non-empty list of fractions.")
        if any(
            isinstance(p, bool) or not isinstance(p, (int, float)) or p <= 0 for p in proportions
        ):
            raise ValueError("proportions must be greater than 0.")
        if sum(proportions) >= 1:
            raise ValueError("proportions must sum to less than 1.")
        refs, metas = _materialized_parts(self)
        total = sum(m.num_rows or 0 for m in metas)
        import numpy as np

        indices = [int(total * c) for c in np.cumsum(proportions)]
        # As Ray Data: move rows forward so that no split is empty, where the rows allow.
        taken = 0
        for i in range(len(indices) - 2, -1, -1):
            indices[i] -= taken
            if indices[i] == indices[i + 1]:
                taken += 1
                indices[i] -= 1
        if any(i <= 0 for i in indices):
            raise ValueError("Couldn't create non-empty splits with the given proportions.")
        return _cut(refs, metas, [0] + indices + [total], "Split")

    def train_test_split(
        self,
        test_size: int | float,
        *,
        shuffle: bool = False,
        seed: int | None = None,
        stratify: str | None = None,
    ) -> tuple[Any, Any]:
        """Split into a train and a test dataset; the test set is the last rows.

        Args:
            test_size: A fraction in (0, 1) of the rows, or a number of rows.
            shuffle: Shuffle the rows first (``random_shuffle(seed=seed)``).
            seed: Seed of the shuffle.
            stratify: A column: each of its classes is split in proportion, the last
                ``int(n * test_size)`` rows of a class of ``n`` rows going to the test set.
                Not with ``shuffle``.

        Returns:
            ``(train, test)``, both materialized.

        Examples:
            >>> import shardflow as sf
            >>> train, test = sf.range(10).train_test_split(0.3)
            >>> train.count(), test.take_all()
            (7, [{'id': 7}, {'id': 8}, {'id': 9}])
        """
        from shardflow.engine.api.train_test import (
            check_test_fraction,
            stratified_train_test_split,
        )

        ds = self.random_shuffle(seed=seed) if shuffle else self  # type: ignore[attr-defined]
        if not isinstance(test_size, (int, float)):
            raise TypeError(f"`test_size` must be int or float got {type(test_size)}.")
        if shuffle and stratify is not None:
            raise ValueError(
                "Cannot specify both 'shuffle=True' and 'stratify' parameters. Stratified "
                "splitting maintains class proportions and is incompatible with shuffling."
            )
        if stratify is not None:
            return stratified_train_test_split(ds, test_size, stratify)
        if isinstance(test_size, float):
            check_test_fraction(test_size)
            train, test = ds.split_proportionately([1 - test_size])
            return train, test
        refs, metas = _materialized_parts(ds)
        total = sum(m.num_rows or 0 for m in metas)
        if test_size <= 0 or test_size >= total:
            raise ValueError(
                "If `test_size` is an int, it must be bigger than 0 and smaller than the size "
                f"of the dataset ({total}). Got {test_size}."
            )
        train, test = _cut(refs, metas, [0, total - test_size, total], "Split")
        return train, test

    def streaming_train_test_split(
        self,
        test_size: float,
        *,
        split_type: str = "random",
        hash_column: str | None = None,
        seed: int | None = None,
        **ray_remote_kwargs: Any,
    ) -> tuple[Any, Any]:
        """Split into train and test datasets as rows stream, without materializing.

        Args:
            test_size: The fraction of rows for the test set, in (0, 1).
            split_type: ``"random"`` (each row goes to test with probability ``test_size``;
                with ``seed``, the same rows on every run while blocks come in the same
                tasks) or ``"hash"`` (by a hash of ``hash_column``'s value, the same on every
                run and machine).
            hash_column: The column hashed by a hash split.
            seed: Seed of a random split.
            **ray_remote_kwargs: Accepted as Ray Data does; the flags are set in the tasks
                that produce the rows.

        Returns:
            ``(train, test)``, two lazy datasets that each read this one when they run.

        Examples:
            >>> import shardflow as sf
            >>> train, test = sf.range(8).streaming_train_test_split(
            ...     0.25, split_type="hash", hash_column="id"
            ... )
            >>> train.count() + test.count()
            8
        """
        from shardflow.engine.api.train_test import streaming_train_test_split

        return streaming_train_test_split(self, test_size, split_type, hash_column, seed)
