"""Tensor columns in pandas: ``TensorDtype`` and ``TensorArray``, with Ray Data's names.

A ``TensorArray`` holds one NumPy array per row; rows of one shape are stored stacked as a
single ``(rows, *shape)`` array, rows of differing shapes (ragged) as an object array of
arrays. pandas batches show tensor columns as a ``TensorArray`` when
``DataContext.enable_tensor_extension_casting`` is False (with True, the default, as an
object column of arrays, as in Ray Data). A DataFrame with a ``TensorArray`` column becomes
a block whose column is Arrow's canonical fixed-shape (or variable-shape) tensor type.

Examples:
    >>> import numpy as np
    >>> import pandas as pd
    >>> from shardflow.extensions import TensorArray
    >>> df = pd.DataFrame({"x": TensorArray(np.zeros((3, 2, 2)))})
    >>> df.dtypes["x"]
    TensorDtype(shape=(2, 2), dtype=float64)
    >>> df["x"].to_numpy().shape
    (3, 2, 2)
"""

from __future__ import annotations

import builtins
import numbers
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype


class TensorArrayElement:
    """One row of a ``TensorArray``: wraps the row's NumPy array.

    Args:
        tensor: The row's values.
    """

    def __init__(self, tensor: np.ndarray):
        self._tensor = np.asarray(tensor)

    def to_numpy(self) -> np.ndarray:
        """The row's array."""
        return self._tensor

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._tensor if dtype is None else self._tensor.astype(dtype)

    def __repr__(self) -> str:
        return repr(self._tensor)

    def __eq__(self, other: object) -> bool:
        return bool(np.array_equal(self._tensor, np.asarray(other)))

    __hash__ = None  # type: ignore[assignment]


_DTYPE_NAME = re.compile(r"^TensorDtype\(shape=(\(.*?\)), dtype=(\w+)\)$")


@register_extension_dtype
class TensorDtype(ExtensionDtype):
    """The pandas dtype of a tensor column: the shape of each row and the element dtype.

    Args:
        shape: Shape of one row's tensor (``None`` entries for a ragged dimension).
        dtype: NumPy dtype of the elements.
    """

    base = None

    def __init__(self, shape: tuple[int | None, ...], dtype: Any):
        self._shape = tuple(shape)
        self._dtype = np.dtype(dtype)

    @property
    def shape(self) -> tuple[int | None, ...]:
        """Shape of one row's tensor."""
        return self._shape

    @property
    def element_dtype(self) -> np.dtype:
        """NumPy dtype of the elements."""
        return self._dtype

    @property
    def is_variable_shaped(self) -> bool:
        """Whether rows may differ in shape."""
        return any(d is None for d in self._shape)

    @property
    def type(self) -> type:
        return TensorArrayElement

    @property
    def name(self) -> str:
        return f"TensorDtype(shape={self._shape}, dtype={self._dtype})"

    @property
    def na_value(self) -> Any:
        return np.nan

    @classmethod
    def construct_array_type(cls) -> builtins.type[TensorArray]:
        return TensorArray

    @classmethod
    def construct_from_string(cls, string: str) -> TensorDtype:
        if not isinstance(string, str):
            raise TypeError(f"'construct_from_string' expects a string, got {type(string)}")
        match = _DTYPE_NAME.match(string)
        if match is None:
            raise TypeError(f"Cannot construct a 'TensorDtype' from '{string}'")
        shape = tuple(None if d.strip() == "None" else int(d) for d in _dims(match.group(1)))
        return cls(shape, match.group(2))

    def __from_arrow__(self, array: pa.Array | pa.ChunkedArray) -> TensorArray:
        from shardflow.sdk.block import _column_to_numpy

        return TensorArray(_column_to_numpy(array))

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return other == self.name
        return (
            isinstance(other, TensorDtype)
            and other._shape == self._shape
            and other._dtype == self._dtype
        )

    def __hash__(self) -> int:
        return hash((self._shape, self._dtype))


def _dims(text: str) -> list[str]:
    inner = text.strip()[1:-1]
    return [d for d in inner.split(",") if d.strip()]


def _stacked(values: Any) -> np.ndarray:
    """``values`` as one ``(rows, *shape)`` array, or an object array for ragged rows."""
    if isinstance(values, TensorArray):
        return values._tensor
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values
    rows = [
        np.asarray(v) if not isinstance(v, TensorArrayElement) else v.to_numpy() for v in values
    ]
    if rows and len({(r.shape, r.dtype) for r in rows}) == 1:
        return np.stack(rows)
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return out


class TensorArray(ExtensionArray):
    """A pandas column of tensors, one NumPy array per row.

    Args:
        values: A ``(rows, *shape)`` array, or a sequence of per-row arrays (which may
            differ in shape).

    Examples:
        >>> import numpy as np
        >>> from shardflow.extensions import TensorArray
        >>> TensorArray([np.ones(2), np.zeros(3)]).dtype
        TensorDtype(shape=(None,), dtype=float64)
    """

    def __init__(self, values: Any):
        self._tensor = _stacked(values)

    # -- what pandas asks of an extension array -------------------------------------------

    @classmethod
    def _from_sequence(cls, scalars: Any, *, dtype: Any = None, copy: bool = False) -> TensorArray:
        return cls(scalars)

    @classmethod
    def _from_factorized(cls, values: Any, original: TensorArray) -> TensorArray:
        return cls(values)

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[TensorArray]) -> TensorArray:
        parts = [a._tensor for a in to_concat]
        if all(p.dtype != object for p in parts) and len({p.shape[1:] for p in parts}) == 1:
            return cls(np.concatenate(parts))
        return cls([row for p in parts for row in p])

    @property
    def dtype(self) -> TensorDtype:
        if self._tensor.dtype != object:
            return TensorDtype(self._tensor.shape[1:], self._tensor.dtype)
        rows = [r for r in self._tensor if r is not None]
        ndim = rows[0].ndim if rows else 1
        element = rows[0].dtype if rows else np.dtype(np.float64)
        return TensorDtype((None,) * ndim, element)

    @property
    def nbytes(self) -> int:
        if self._tensor.dtype != object:
            return int(self._tensor.nbytes)
        return int(sum(r.nbytes for r in self._tensor if r is not None))

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        """Shape of the stacked tensor (rows first)."""
        return self._tensor.shape

    @property
    def numpy_dtype(self) -> np.dtype:
        """NumPy dtype of the elements."""
        return self.dtype.element_dtype

    def __len__(self) -> int:
        return len(self._tensor)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, numbers.Integral):
            return TensorArrayElement(self._tensor[item])
        if isinstance(item, tuple) and item and isinstance(item[0], numbers.Integral):
            return self._tensor[item]
        item = pd.api.indexers.check_array_indexer(self, item)
        return TensorArray(self._tensor[item])

    def __setitem__(self, key: Any, value: Any) -> None:
        value = value.to_numpy() if isinstance(value, TensorArrayElement) else value
        self._tensor[key] = value._tensor if isinstance(value, TensorArray) else value

    def isna(self) -> np.ndarray:
        if self._tensor.dtype == object:
            return np.array([r is None for r in self._tensor], dtype=bool)
        if self._tensor.dtype.kind == "f":
            flat = self._tensor.reshape(len(self._tensor), -1)
            return np.isnan(flat).all(axis=1) if flat.shape[1] else np.zeros(len(self), bool)
        return np.zeros(len(self._tensor), dtype=bool)

    def take(
        self, indices: Any, *, allow_fill: bool = False, fill_value: Any = None
    ) -> TensorArray:
        indices = np.asarray(indices, dtype=np.intp)
        if allow_fill and (indices < 0).any():
            rows = [None if i < 0 else self._tensor[i] for i in indices]
            out = np.empty(len(rows), dtype=object)
            out[:] = rows
            return TensorArray(out)
        return TensorArray(self._tensor.take(indices, axis=0))

    def copy(self) -> TensorArray:
        return TensorArray(self._tensor.copy())

    def to_numpy(self, dtype: Any = None, copy: bool = False, na_value: Any = None) -> np.ndarray:
        """The column as one ``(rows, *shape)`` array (an object array for ragged rows)."""
        out = self._tensor
        if dtype is not None:
            out = out.astype(dtype)
        return out.copy() if copy else out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.to_numpy(dtype)

    def astype(self, dtype: Any, copy: bool = True) -> Any:
        if isinstance(dtype, TensorDtype):
            return TensorArray(self._tensor.astype(dtype.element_dtype)) if copy else self
        return np.array([TensorArrayElement(r) for r in self._tensor], dtype=object).astype(dtype)

    def __arrow_array__(self, type: Any = None) -> pa.Array:
        from shardflow.sdk.block import _ndarray_to_arrow

        return _ndarray_to_arrow(self._tensor)

    def __eq__(self, other: Any) -> Any:
        other = other._tensor if isinstance(other, TensorArray) else np.asarray(other)
        return self._tensor == other

    def __repr__(self) -> str:
        return f"TensorArray({self._tensor!r})"


__all__ = ["TensorArray", "TensorArrayElement", "TensorDtype"]
