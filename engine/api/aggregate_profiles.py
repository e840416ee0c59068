"""Aggregations that profile a column: MissingValuePercentage, ZeroPercentage, and the
sketches ApproximateQuantile and ApproximateTopK (which need ``datasketches``).

They follow Ray Data 2.60's code: percentages are between 0.0 and 100.0 and None for a group
without values; NaN counts as missing; the sketches ignore nulls, and ApproximateQuantile
uses a KLL sketch of 32-bit floats as Ray Data does, so its answers are the same.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.aggregate import MissingValuePercentage, ZeroPercentage
    >>> ds = sf.from_items([{"v": 0}, {"v": None}, {"v": 3}, {"v": 0}])
    >>> ds.aggregate(MissingValuePercentage("v"), ZeroPercentage("v"))
    {'missing_pct(v)': 25.0, 'zero_pct(v)': 66.66666666666666}
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow.compute as pc

from shardflow.engine.api.aggregate import AggregateFnV2, Block


class MissingValuePercentage(AggregateFnV2):
    """The percentage of null (None or NaN) values of column ``on``.

    Args:
        on: The column.
        alias_name: Name of the output column; ``"missing_pct(on)"`` by default.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import MissingValuePercentage
        >>> sf.from_items([{"v": 1.0}, {"v": None}]).aggregate(MissingValuePercentage("v"))
        {'missing_pct(v)': 50.0}
    """

    def __init__(self, on: str, alias_name: str | None = None):
        super().__init__(
            alias_name or f"missing_pct({on})", lambda: [0, 0], on=on, ignore_nulls=False
        )

    def aggregate_block(self, block: Block) -> list[int]:
        column = block.column(self._target_col_name)
        missing = pc.sum(pc.is_null(column, nan_is_null=True)).as_py() or 0
        return [missing, len(column)]

    def combine(self, current_accumulator: list[int], new: list[int]) -> list[int]:
        return [current_accumulator[0] + new[0], current_accumulator[1] + new[1]]

    def finalize(self, accumulator: list[int]) -> float | None:
        return None if accumulator[1] == 0 else accumulator[0] / accumulator[1] * 100.0


class ZeroPercentage(AggregateFnV2):
    """The percentage of zeros among the values of a numeric column ``on``.

    Args:
        on: The column.
        ignore_nulls: Leave nulls out of the count of values (True by default); with False
            they count as values that are not zero.
        alias_name: Name of the output column; ``"zero_pct(on)"`` by default.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import ZeroPercentage
        >>> sf.from_items([{"v": 0}, {"v": 1}]).aggregate(ZeroPercentage("v"))
        {'zero_pct(v)': 50.0}
    """

    def __init__(self, on: str, ignore_nulls: bool = True, alias_name: str | None = None):
        super().__init__(
            alias_name or f"zero_pct({on})", lambda: [0, 0], on=on, ignore_nulls=ignore_nulls
        )

    def aggregate_block(self, block: Block) -> list[int]:
        column = block.column(self._target_col_name)
        mode = "only_valid" if self._ignore_nulls else "all"
        count = pc.count(column, mode=mode).as_py()
        if count == 0:
            return [0, 0]
        zeros = pc.sum(pc.equal(column, 0)).as_py() or 0
        return [zeros, count]

    def combine(self, current_accumulator: list[int], new: list[int]) -> list[int]:
        return [current_accumulator[0] + new[0], current_accumulator[1] + new[1]]

    def finalize(self, accumulator: list[int]) -> float | None:
        return None if accumulator[1] == 0 else accumulator[0] / accumulator[1] * 100.0


def _datasketches(name: str, aggregation: str) -> Any:
    try:
        import datasketches
    except ImportError as exc:
        raise ImportError(
            f"{aggregation} needs the `datasketches` package: pip install datasketches"
        ) from exc
    return getattr(datasketches, name)


class ApproximateQuantile(AggregateFnV2):
    """Approximate quantiles of column ``on``, from a KLL sketch (needs ``datasketches``).

    The sketch's rank error is about 0.35% with the default precision (800); nulls are
    skipped.

    Args:
        on: The column (numeric).
        quantiles: The quantiles to estimate, each between 0 and 1.
        quantile_precision: The sketch's ``k``: larger is more accurate and bigger.
        alias_name: Name of the output column; ``"approx_quantile(on)"`` by default.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import ApproximateQuantile
        >>> sf.range(101).aggregate(ApproximateQuantile("id", quantiles=[0.5]))
        {'approx_quantile(id)': [50.0]}
    """

    def __init__(
        self,
        on: str,
        quantiles: list[float],
        quantile_precision: int = 800,
        alias_name: str | None = None,
    ):
        self._sketch_cls = _datasketches("kll_floats_sketch", "ApproximateQuantile")
        self._quantiles = quantiles
        self._quantile_precision = quantile_precision
        super().__init__(
            alias_name or f"approx_quantile({on})",
            lambda: self.zero(quantile_precision).serialize(),
            on=on,
            ignore_nulls=True,
        )

    def zero(self, quantile_precision: int) -> Any:
        """An empty sketch."""
        return self._sketch_cls(k=quantile_precision)

    def aggregate_block(self, block: Block) -> bytes:
        sketch = self.zero(self._quantile_precision)
        for value in block.column(self._target_col_name).drop_null().to_pylist():
            sketch.update(float(value))
        return sketch.serialize()

    def combine(self, current_accumulator: bytes, new: bytes) -> bytes:
        merged = self.zero(self._quantile_precision)
        merged.merge(self._sketch_cls.deserialize(current_accumulator))
        merged.merge(self._sketch_cls.deserialize(new))
        return merged.serialize()

    def finalize(self, accumulator: bytes) -> list[float]:
        return self._sketch_cls.deserialize(accumulator).get_quantiles(self._quantiles)


class ApproximateTopK(AggregateFnV2):
    """The ``k`` most frequent values of column ``on``, approximately, from a frequent-items
    sketch (needs ``datasketches``).

    Every value more frequent than N / 2**log_capacity is found; counts are off by at most
    that much. The result is a list of ``{on: value, "count": n}``, most frequent first.

    Args:
        on: The column.
        k: How many values to give.
        log_capacity: Base-2 logarithm of the sketch's size (15 by default).
        alias_name: Name of the output column; ``"approx_topk(on)"`` by default.
        encode_lists: Count the elements of a list column's lists, not the lists.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import ApproximateTopK
        >>> ds = sf.from_items([{"w": w} for w in ["a", "b", "a", "c", "a", "b"]])
        >>> ds.aggregate(ApproximateTopK("w", k=2))
        {'approx_topk(w)': [{'w': 'a', 'count': 3}, {'w': 'b', 'count': 2}]}
    """

    def __init__(
        self,
        on: str,
        k: int,
        log_capacity: int = 15,
        alias_name: str | None = None,
        encode_lists: bool = False,
    ):
        self.k = k
        self._log_capacity = log_capacity
        self._encode_lists = encode_lists
        self._sketch_cls = _datasketches("frequent_strings_sketch", "ApproximateTopK")
        super().__init__(
            alias_name or f"approx_topk({on})",
            lambda: self.zero(log_capacity).serialize(),
            on=on,
            ignore_nulls=True,
        )

    def zero(self, log_capacity: int) -> Any:
        """An empty sketch."""
        return self._sketch_cls(lg_max_k=log_capacity)

    def aggregate_block(self, block: Block) -> bytes:
        sketch = self.zero(self._log_capacity)
        for value in block.column(self._target_col_name).to_pylist():
            items = value if self._encode_lists and isinstance(value, list) else [value]
            for item in items:
                if item is not None:  # the sketch counts strings: values are pickled
                    sketch.update(pickle.dumps(item).hex())
        return sketch.serialize()

    def combine(self, current_accumulator: bytes, new: bytes) -> bytes:
        merged = self.zero(self._log_capacity)
        merged.merge(self._sketch_cls.deserialize(current_accumulator))
        merged.merge(self._sketch_cls.deserialize(new))
        return merged.serialize()

    def finalize(self, accumulator: bytes) -> list[dict[str, Any]]:
        from datasketches import frequent_items_error_type

        items = self._sketch_cls.deserialize(accumulator).get_frequent_items(
            frequent_items_error_type.NO_FALSE_NEGATIVES
        )
        column = self._target_col_name
        return [
            {column: pickle.loads(bytes.fromhex(item[0])), "count": int(item[1])}
            for item in items[: self.k]
        ]


__all__ = [
    "ApproximateQuantile",
    "ApproximateTopK",
    "MissingValuePercentage",
    "ZeroPercentage",
]
