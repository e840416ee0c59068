"""Columns of Python objects in pandas: ``PythonObjectDtype`` and ``PythonObjectArray``,
with Ray Data's names.

A column Arrow has no type for (instances of a user's class, say) is stored in blocks as
shardflow's object extension type (shardflow.sdk.object_column). In pandas it is a
``PythonObjectArray`` of dtype ``python_object()``, as in Ray Data: ``to_pandas()``,
pandas batches of ``map_batches`` and ``iter_batches`` give the objects themselves, and a
DataFrame holding such a column (or an object column Arrow cannot convert) becomes a block
with the object type again.

Examples:
    >>> import pandas as pd
    >>> from shardflow.extensions import PythonObjectArray
    >>> class Point:
    ...     def __init__(self, x):
    ...         self.x = x
    >>> s = pd.Series(PythonObjectArray([Point(1), None, Point(3)]))
    >>> str(s.dtype), s.isna().tolist(), s[2].x
    ('python_object()', [False, True, False], 3)
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype

_NO_DEFAULT: Any = getattr(pd.api.extensions, "no_default", None)


@register_extension_dtype
class PythonObjectDtype(ExtensionDtype):
    """The pandas dtype of a column of Python objects; its name is ``"python_object()"``
    (``pandas.api.types.pandas_dtype("python_object()")`` builds it)."""

    @classmethod
    def construct_from_string(cls, string: str) -> PythonObjectDtype:
        if string != "python_object()":
            raise TypeError(f"Cannot construct a '{cls.__name__}' from '{string}'")
        return cls()

    @property
    def type(self) -> builtins.type:
        """The scalar type: any object."""
        return object

    @property
    def name(self) -> str:
        return "python_object()"

    @classmethod
    def construct_array_type(cls) -> builtins.type[PythonObjectArray]:
        return PythonObjectArray

    def __from_arrow__(self, array: pa.Array | pa.ChunkedArray) -> PythonObjectArray:
        """The column's values (objects of an object column, Python values of others)."""
        return PythonObjectArray(array.to_pylist())


class PythonObjectArray(ExtensionArray):
    """A pandas extension array of arbitrary Python objects (one per row, None for a
    missing one).

    Args:
        values: The objects.
    """

    def __init__(self, values: Iterable[Any]):
        items = list(values)
        self.values = np.empty(len(items), dtype=object)
        self.values[:] = items

    @classmethod
    def _from_sequence(
        cls, scalars: Sequence[Any], *, dtype: Any = None, copy: bool = False
    ) -> PythonObjectArray:
        return cls(scalars)

    @classmethod
    def _from_factorized(
        cls, values: Sequence[Any], original: PythonObjectArray
    ) -> PythonObjectArray:
        return cls(values)

    def __getitem__(self, item: Any) -> Any:
        # pandas' contract: a scalar position gives the object, anything else (a slice, a
        # mask, positions) gives an array of the same type, never a bare NumPy array.
        if pd.api.types.is_integer(item):
            return self.values[item]
        if not isinstance(item, slice):
            item = pd.api.indexers.check_array_indexer(self, item)
        return type(self)(self.values[item])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.values[key] = value

    def __len__(self) -> int:
        return len(self.values)

    def __eq__(self, other: object) -> Any:
        if isinstance(other, PythonObjectArray):
            return self.values == other.values
        if isinstance(other, np.ndarray):
            return self.values == other
        return NotImplemented

    def to_numpy(
        self, dtype: Any = None, copy: bool = False, na_value: Any = _NO_DEFAULT
    ) -> np.ndarray:
        """The objects as a NumPy object array (missing ones as ``na_value`` when given)."""
        result = self.values
        if copy or na_value is not _NO_DEFAULT:
            result = result.copy()
        if na_value is not _NO_DEFAULT:
            result[self.isna()] = na_value
        return result

    @property
    def dtype(self) -> PythonObjectDtype:
        return PythonObjectDtype()

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def __arrow_array__(self, type: Any = None) -> pa.Array:
        """The column as shardflow's Arrow object type (pickled objects)."""
        from shardflow.sdk.object_column import objects_to_arrow

        return objects_to_arrow(self.values)

    def isna(self) -> np.ndarray:
        return np.asarray(pd.isnull(self.values), dtype=bool)

    def take(
        self, indices: Sequence[int], *, allow_fill: bool = False, fill_value: Any = None
    ) -> PythonObjectArray:
        from pandas.api.extensions import take

        if allow_fill and fill_value is None:
            fill_value = self.dtype.na_value
        return self._from_sequence(
            take(self.values, indices, allow_fill=allow_fill, fill_value=fill_value)
        )

    def copy(self) -> PythonObjectArray:
        return PythonObjectArray(self.values)

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[PythonObjectArray]) -> PythonObjectArray:
        return cls(np.concatenate([a.values for a in to_concat]))


__all__ = ["PythonObjectArray", "PythonObjectDtype"]
