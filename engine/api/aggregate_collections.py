"""Aggregations that collect values: AsList, Unique, CountDistinct, ValueCounter.

They follow Ray Data 2.60's code: ``AsList`` keeps nulls unless ``ignore_nulls``; ``Unique``
keeps nulls by default and ``CountDistinct`` does not; a list column's lists are compared
whole unless ``encode_lists`` flattens them (or hashes them); ``ValueCounter`` gives
``{"values": [...], "counts": [...]}`` in the order values were first seen.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.aggregate import AsList, CountDistinct
    >>> ds = sf.from_items([{"k": i % 2, "v": i} for i in range(5)])
    >>> ds.groupby("k").aggregate(AsList("v"), CountDistinct("v")).take_all()
    [{'k': 0, 'list(v)': [0, 2, 4], 'count_distinct(v)': 3}, {'k': 1, 'list(v)': [1, 3], \
'count_distinct(v)': 2}]
"""

from __future__ import annotations

import enum
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shardflow.engine.api.aggregate import AggregateFnV2, Block, VectorizedAggregateFnV2


def _is_list_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)


class _NaN:
    """The one key every NaN maps to, so that NaNs count as one distinct value."""

    def __repr__(self) -> str:
        return "NaN"


_NAN_KEY = _NaN()


def hashable(value: Any) -> Any:
    """A hashable stand-in for ``value``: lists become tuples, dicts sorted item tuples,
    arrays their shape and bytes, and every NaN one key."""
    if isinstance(value, float) and math.isnan(value):
        return _NAN_KEY
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if hasattr(value, "tobytes") and hasattr(value, "shape"):
        return (value.shape, str(value.dtype), value.tobytes())
    return value


def distinct(values: list[Any]) -> list[Any]:
    """``values`` without repeats, in the order first seen."""
    seen: dict[Any, Any] = {}
    for value in values:
        seen.setdefault(hashable(value), value)
    return list(seen.values())


class AsList(VectorizedAggregateFnV2):
    """All values of column ``on`` in one list per group.

    Args:
        on: The column whose values are collected.
        alias_name: Name of the output column; ``"list(on)"`` by default.
        ignore_nulls: Leave nulls out (False by default: nulls are in the list).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import AsList
        >>> sf.range(4).aggregate(AsList("id"))
        {'list(id)': [0, 1, 2, 3]}
    """

    def __init__(self, on: str, alias_name: str | None = None, ignore_nulls: bool = False):
        super().__init__(alias_name or f"list({on or ''})", list, on=on, ignore_nulls=ignore_nulls)

    def aggregate_block(self, block: Block) -> list[Any]:
        column = block.column(self._target_col_name)
        if self._ignore_nulls:
            column = column.drop_null()
        return column.to_pylist()

    def combine(self, current_accumulator: list[Any], new: list[Any]) -> list[Any]:
        return list(current_accumulator) + list(new)

    def _combine_column(self, accumulator_col: pa.Array) -> list[Any]:
        return pc.list_flatten(accumulator_col).to_pylist()


class Unique(VectorizedAggregateFnV2):
    """The distinct values of column ``on``, as a list (in no set order).

    Args:
        on: The column.
        ignore_nulls: Leave nulls out (False by default: a null is one of the values).
        alias_name: Name of the output column; ``"unique(on)"`` by default.
        encode_lists: For a column of lists: None or False compares whole lists; True or
            ``Unique.ListEncodingMode.FLATTEN`` gives the distinct elements of all lists
            (one level deep); ``Unique.ListEncodingMode.HASH`` the distinct hashes of the
            lists (polars' row hashes, as Ray Data; needs ``polars``).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import Unique
        >>> sorted(sf.from_items([{"x": 1}, {"x": 2}, {"x": 1}]).aggregate(Unique("x"))["unique(x)"])
        [1, 2]
    """

    class ListEncodingMode(str, enum.Enum):
        """How ``Unique`` treats the lists of a list column."""

        FLATTEN = "FLATTEN"
        HASH = "HASH"

    def __init__(
        self,
        on: str | None = None,
        ignore_nulls: bool = False,
        alias_name: str | None = None,
        encode_lists: bool | Unique.ListEncodingMode | None = None,
    ):
        super().__init__(alias_name or f"unique({on})", set, on=on, ignore_nulls=ignore_nulls)
        if isinstance(encode_lists, Unique.ListEncodingMode):
            self._list_encoding_mode: Unique.ListEncodingMode | None = encode_lists
        elif encode_lists is True:
            self._list_encoding_mode = Unique.ListEncodingMode.FLATTEN
        else:
            self._list_encoding_mode = None

    def _distinct_values(self, block: Block) -> list[Any]:
        column: Any = block.column(self._target_col_name)
        if _is_list_type(column.type) and self._list_encoding_mode is not None:
            if self._list_encoding_mode == Unique.ListEncodingMode.FLATTEN:
                column = pc.list_flatten(column)
            else:
                column = _row_hashes(column)
        if self._ignore_nulls:
            column = column.drop_null()
        if _is_list_type(column.type):
            # Arrow has no unique kernel for lists: whole lists are compared in Python, and
            # kept as an array of large lists (the type Ray Data's polars path gives).
            values = distinct(column.to_pylist())
            return pa.array(values, pa.large_list(column.type.value_type))
        return distinct(pc.unique(column).to_pylist())

    def aggregate_block(self, block: Block) -> Any:
        return self._distinct_values(block)

    def combine(self, current_accumulator: Any, new: Any) -> Any:
        values = distinct(_as_list(current_accumulator) + _as_list(new))
        for typed in (current_accumulator, new):
            if isinstance(typed, pa.Array):
                return pa.array(values, typed.type)
        return values

    def _combine_column(self, accumulator_col: pa.Array) -> list[Any]:
        return distinct(pc.list_flatten(accumulator_col).to_pylist())

    def finalize(self, accumulator: Any) -> Any:
        if isinstance(accumulator, pa.Array):  # lists: a list scalar of the lists' type
            return pa.scalar(accumulator.to_pylist(), pa.list_(accumulator.type))
        return list(accumulator)


def _as_list(accumulator: Any) -> list[Any]:
    return accumulator.to_pylist() if isinstance(accumulator, pa.Array) else list(accumulator)


def _row_hashes(column: Any) -> pa.Array:
    try:
        import polars as pl
    except ImportError as exc:
        raise ImportError(
            "Unique(encode_lists=Unique.ListEncodingMode.HASH) hashes lists with polars: "
            "pip install polars"
        ) from exc
    hashes = pl.DataFrame({"col": column}).hash_rows().cast(pl.Int64, wrap_numerical=True)
    return hashes.to_arrow()


class CountDistinct(Unique):
    """The number of distinct values of column ``on`` (SQL's ``COUNT(DISTINCT on)``).

    Args:
        on: The column.
        ignore_nulls: Leave nulls out of the count (True by default).
        alias_name: Name of the output column; ``"count_distinct(on)"`` by default.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import CountDistinct
        >>> sf.from_items([{"c": "a"}, {"c": "b"}, {"c": "a"}]).aggregate(CountDistinct("c"))
        {'count_distinct(c)': 2}
    """

    def __init__(self, on: str, ignore_nulls: bool = True, alias_name: str | None = None):
        super().__init__(
            on=on, ignore_nulls=ignore_nulls, alias_name=alias_name or f"count_distinct({on})"
        )

    def finalize(self, accumulator: Any) -> int:
        return len(accumulator)


class ValueCounter(AggregateFnV2):
    """How often each value of column ``on`` occurs, as pandas' ``value_counts``.

    The result is ``{"values": [...], "counts": [...]}``, values in the order first seen.

    Args:
        on: The column.
        alias_name: Name of the output column; ``"value_counter(on)"`` by default.

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.aggregate import ValueCounter
        >>> sf.from_items([{"c": "a"}, {"c": "b"}, {"c": "a"}]).aggregate(ValueCounter("c"))
        {'value_counter(c)': {'values': ['a', 'b'], 'counts': [2, 1]}}
    """

    def __init__(self, on: str, alias_name: str | None = None):
        super().__init__(
            alias_name or f"value_counter({on})",
            lambda: {"values": [], "counts": []},
            on=on,
            ignore_nulls=True,
        )

    def aggregate_block(self, block: Block) -> dict[str, list] | None:
        counts = pc.value_counts(block.column(self._target_col_name))
        if len(counts) == 0:
            return None
        return {
            "values": counts.field("values").to_pylist(),
            "counts": counts.field("counts").to_pylist(),
        }

    def combine(self, current_accumulator: dict[str, list], new: dict[str, list]) -> dict:
        values = list(current_accumulator["values"])
        counts = list(current_accumulator["counts"])
        position = {hashable(v): i for i, v in enumerate(values)}
        for value, count in zip(new["values"], new["counts"]):
            i = position.get(hashable(value))
            if i is None:
                position[hashable(value)] = len(values)
                values.append(value)
                counts.append(count)
            else:
                counts[i] += count
        return {"values": values, "counts": counts}


__all__ = ["AsList", "CountDistinct", "Unique", "ValueCounter", "distinct", "hashable"]
