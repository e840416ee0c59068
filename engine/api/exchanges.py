"""Dataset methods that move rows between blocks: shuffles, sorts, repartitions, unions,
zips and joins (groupby and aggregations are in engine/api/grouped_data.py)."""

from __future__ import annotations

from typing import Any

from shardflow.engine.plan.logical import (
    Join,
    LogicalPlan,
    RandomizeBlockOrder,
    RandomSample,
    RandomShuffle,
    Repartition,
    Sort,
    SortKey,
    Union,
    Zip,
)

JOIN_TYPES = (
    "inner",
    "left_outer",
    "right_outer",
    "full_outer",
    "left_semi",
    "right_semi",
    "left_anti",
    "right_anti",
)


def _positive_int(value: Any, name: str, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{name} must be a positive int{' or None' if allow_none else ''}, got {value!r}."
        )
    return value


def _seed(seed: Any) -> Any:
    """An int, a RandomSeedConfig or None (resolved to one seed per execution when planned);
    Ray Data's ValueError for anything else."""
    from shardflow.sdk.random_seeds import check_seed

    return check_seed(seed)


def key_columns(key: Any, method: str, allow_empty: bool = False) -> tuple[str, ...]:
    """A key given as a column name or a list of them, as a tuple."""
    if isinstance(key, str):
        return (key,)
    if (
        isinstance(key, (list, tuple))
        and all(isinstance(k, str) for k in key)
        and (key or allow_empty)
    ):
        return tuple(key)
    raise ValueError(
        f"{method}: the key must be a column name or a list of column names, got {key!r}."
    )


def check_columns_exist(ds: Any, columns: Any, method: str) -> None:
    """Raise ValueError naming an unknown column, when the schema is known without running."""
    schema = ds._cheap_schema()
    if schema is None or not schema.names:
        return
    for column in columns:
        if column not in schema.names:
            raise ValueError(
                f"{method}: you specified the column '{column}', but there's no such column in the "
                f"dataset. The dataset has columns: {schema.names}"
            )


class ExchangeMixin:
    """All-to-all and combining methods of Dataset."""

    _plan: LogicalPlan

    def _with(self, op: Any) -> Any:  # provided by Dataset
        raise NotImplementedError

    def random_shuffle(self, *, seed: Any = None, num_blocks: int | None = None) -> Any:
        """Randomly shuffle the rows of this dataset.

        Every output block mixes rows of every input block. With a seed, the result depends
        only on the seed and the input (the same on every run and backend). Spills to local
        disk when the data exceeds the memory budget.

        Args:
            seed: Fix the random order: an int (the same order on every execution) or a
                ``RandomSeedConfig`` (with ``reseed_after_execution``, a different order on
                each execution, derived from its seed).
            num_blocks: Number of output blocks; by default as many as input blocks (a
                shardflow extension: Ray Data 2.60 raises for it).

        Returns:
            The shuffled dataset.

        Examples:
            >>> import shardflow as sf
            >>> sorted(r["id"] for r in sf.range(5).random_shuffle(seed=0).take_all())
            [0, 1, 2, 3, 4]
        """
        return self._with(RandomShuffle(_seed(seed), _positive_int(num_blocks, "num_blocks")))

    def randomize_block_order(self, *, seed: Any = None) -> Any:
        """Shuffle the order of the blocks (rows within a block keep their order).

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10, override_num_blocks=5).randomize_block_order(seed=1).count()
            10
        """
        return self._with(RandomizeBlockOrder(_seed(seed)))

    def random_sample(self, fraction: float, *, seed: Any = None) -> Any:
        """Keep each row with probability ``fraction``.

        Examples:
            >>> import shardflow as sf
            >>> 0 < sf.range(1000).random_sample(0.5, seed=3).count() < 1000
            True
        """
        if fraction < 0 or fraction > 1:  # Ray Data's check (a TypeError for a non-number)
            raise ValueError("Fraction must be between 0 and 1.")
        return self._with(RandomSample(float(fraction), _seed(seed)))

    def repartition(
        self,
        num_blocks: int | None = None,
        target_num_rows_per_block: int | None = None,
        *,
        strict: bool = False,
        shuffle: bool = False,
        keys: list[str] | None = None,
        sort: bool = False,
    ) -> Any:
        """Repartition the dataset into ``num_blocks`` blocks, or blocks of a given row count.

        Args:
            num_blocks: Number of output blocks. Without ``shuffle`` or ``keys``, rows keep
                their order and blocks hold equal numbers of rows (within one).
            target_num_rows_per_block: Instead of a count, cut the stream into blocks of this
                many rows (the last may be smaller); streaming, no barrier.
            strict: Accepted for compatibility: blocks always hold exactly the target rows.
            shuffle: Every output block takes an even share of every input block.
            keys: Rows with equal values of these columns land in the same block.
            sort: With ``keys``, sort each block by them.

        Returns:
            The repartitioned dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10).repartition(3).materialize().num_blocks()
            3
        """
        if (num_blocks is None) == (target_num_rows_per_block is None):
            raise ValueError(
                "repartition: either `num_blocks` or `target_num_rows_per_block` must be set, not both."
            )
        _positive_int(num_blocks, "num_blocks")
        _positive_int(target_num_rows_per_block, "target_num_rows_per_block")
        if target_num_rows_per_block is not None and (shuffle or keys):
            raise ValueError(
                "repartition: target_num_rows_per_block cannot be combined with shuffle or keys."
            )
        key_tuple = None
        if keys is not None:
            key_tuple = key_columns(keys, "repartition")
            check_columns_exist(self, key_tuple, "repartition")
        if sort and not key_tuple:
            raise ValueError("repartition: sort=True needs keys.")
        return self._with(
            Repartition(num_blocks, target_num_rows_per_block, strict, shuffle, key_tuple, sort)
        )

    def sort(
        self,
        key: str | list[str],
        descending: bool | list[bool] = False,
        boundaries: list[int | float] | None = None,
    ) -> Any:
        """Sort by one or more columns, each ascending or descending; nulls come last.

        Args:
            key: A column name or a list of them.
            descending: One flag for all keys, or one per key.
            boundaries: Values of the first key at which to cut output blocks (ints or floats),
                instead of boundaries sampled from the data.

        Returns:
            The sorted dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 2}, {"a": None}, {"a": 1}]).sort("a").take_all()
            [{'a': 1}, {'a': 2}, {'a': None}]
        """
        if key is None:
            raise ValueError("The 'key' parameter cannot be None for sorting.")
        columns = key_columns(key, "sort")
        if isinstance(descending, bool):
            flags = (descending,) * len(columns)
        elif isinstance(descending, (list, tuple)) and all(isinstance(d, bool) for d in descending):
            if len(descending) != len(columns):
                raise ValueError("Length of `descending` does not match the length of the key.")
            flags = tuple(descending)
        else:
            raise ValueError(
                f"sort: descending must be a bool or a list of bools, got {descending!r}."
            )
        bounds = None
        if boundaries:
            if not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in boundaries):
                raise ValueError("The type of items in boundaries must be int or float.")
            bounds = tuple(sorted(set(boundaries)))
        check_columns_exist(self, columns, "sort")
        return self._with(Sort(SortKey(columns, flags), bounds))

    def union(self, *other: Any) -> Any:
        """Concatenate this dataset and ``other`` datasets, rows of each in turn.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(2).union(sf.range(3)).take_all()
            [{'id': 0}, {'id': 1}, {'id': 0}, {'id': 1}, {'id': 2}]
        """
        _check_datasets(other, "union")
        return self._with(Union(tuple(d._plan for d in other)))

    def zip(self, *other: Any) -> Any:
        """Combine the columns of datasets with the same number of rows, row by row.

        Duplicate column names of later datasets get the suffix ``_1``, ``_2``, ...

        Examples:
            >>> import shardflow as sf
            >>> sf.range(2).zip(sf.from_items([{"x": "a"}, {"x": "b"}])).take_all()
            [{'id': 0, 'x': 'a'}, {'id': 1, 'x': 'b'}]
        """
        _check_datasets(other, "zip")
        counts = [self._cheap_num_rows()] + [d._cheap_num_rows() for d in other]
        if None not in counts and len(set(counts)) > 1:
            raise ValueError(
                f"Cannot zip datasets of different number of rows: {', '.join(map(str, counts))}"
            )
        return self._with(Zip(tuple(d._plan for d in other)))

    def join(
        self,
        ds: Any,
        join_type: str,
        num_partitions: int,
        on: tuple[str, ...] = ("id",),
        right_on: tuple[str, ...] | None = None,
        left_suffix: str | None = None,
        right_suffix: str | None = None,
        *,
        partition_size_hint: int | None = None,
        aggregator_ray_remote_args: dict | None = None,
        validate_schemas: bool = False,
    ) -> Any:
        """Join with another dataset on key columns.

        Args:
            ds: The right-hand dataset.
            join_type: ``"inner"``, ``"left_outer"``, ``"right_outer"``, ``"full_outer"``,
                ``"left_semi"``, ``"right_semi"``, ``"left_anti"`` or ``"right_anti"``.
            num_partitions: Number of partitions both sides are split into by key.
            on: Key columns of this dataset.
            right_on: Key columns of ``ds`` (default: ``on``).
            left_suffix: Suffix for non-key columns of this dataset present on both sides.
            right_suffix: Suffix for such columns of ``ds``.
            partition_size_hint: Accepted for compatibility; unused.
            aggregator_ray_remote_args: Accepted for compatibility; unused.
            validate_schemas: Check that both key column sets exist before running.

        Returns:
            The joined dataset.

        Examples:
            >>> import shardflow as sf
            >>> left = sf.from_items([{"id": 1, "a": "x"}, {"id": 2, "a": "y"}])
            >>> right = sf.from_items([{"id": 2, "b": 20}])
            >>> left.join(right, "inner", 1).take_all()
            [{'id': 2, 'a': 'y', 'b': 20}]
        """
        _check_datasets((ds,), "join")
        if join_type not in JOIN_TYPES:
            raise ValueError(
                f"join: join_type must be one of {list(JOIN_TYPES)}, got {join_type!r}."
            )
        _positive_int(num_partitions, "num_partitions", allow_none=False)
        left_keys = key_columns(on, "join")
        right_keys = left_keys if right_on is None else key_columns(right_on, "join")
        if len(left_keys) != len(right_keys):
            raise ValueError(
                f"join: `on` {left_keys} and `right_on` {right_keys} must have the same length."
            )
        check_columns_exist(self, left_keys, "join")
        check_columns_exist(ds, right_keys, "join")
        return self._with(
            Join(
                ds._plan,
                join_type,
                left_keys,
                right_keys,
                left_suffix,
                right_suffix,
                num_partitions,
            )
        )


def _check_datasets(others: Any, method: str) -> None:
    from shardflow.engine.api.dataset import Dataset

    for other in others:
        if not isinstance(other, Dataset):
            raise TypeError(f"{method} takes Datasets, got {type(other).__name__}.")
