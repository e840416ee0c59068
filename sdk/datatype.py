"""DataType: the type of an expression's result, as Ray Data's ``ray.data.datatype``.

A DataType wraps an Arrow type (``DataType.int64()``, ``DataType.from_arrow(...)``), a NumPy
dtype (``DataType.from_numpy("float32")``) or a Python type (``DataType(int)``). Expressions
use it to declare what a ``udf`` returns and what ``cast`` converts to.

Examples:
    >>> from shardflow.datatype import DataType
    >>> DataType.int64()
    DataType(arrow:int64)
    >>> DataType.list(DataType.string()).to_arrow_dtype()
    ListType(list<item: string>)
    >>> DataType.from_numpy("float32").to_arrow_dtype()
    DataType(float)
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

# The factories named after Arrow's primitive types.
_ARROW_FACTORIES = {
    "int8": pa.int8,
    "int16": pa.int16,
    "int32": pa.int32,
    "int64": pa.int64,
    "uint8": pa.uint8,
    "uint16": pa.uint16,
    "uint32": pa.uint32,
    "uint64": pa.uint64,
    "float32": pa.float32,
    "float64": pa.float64,
    "string": pa.string,
    "bool": pa.bool_,
    "binary": pa.binary,
}


class DataType:
    """A type backed by an Arrow type, a NumPy dtype or a Python type.

    Args:
        physical_dtype: A ``pyarrow.DataType``, a ``numpy.dtype`` or a Python type.
    """

    __slots__ = ("_physical_dtype",)

    def __init__(self, physical_dtype: pa.DataType | np.dtype | type):
        if not isinstance(physical_dtype, (pa.DataType, np.dtype, type)):
            raise TypeError(
                "DataType supports only PyArrow DataType, NumPy dtype, or Python type, but was "
                f"given type {type(physical_dtype)}."
            )
        self._physical_dtype = physical_dtype

    # -- what backs it ------------------------------------------------------------------------

    def is_arrow_type(self) -> bool:
        return isinstance(self._physical_dtype, pa.DataType)

    def is_numpy_type(self) -> bool:
        return isinstance(self._physical_dtype, np.dtype)

    def is_python_type(self) -> bool:
        return isinstance(self._physical_dtype, type)

    # -- conversions ----------------------------------------------------------------------------

    def to_arrow_dtype(self, values: Sequence[Any] | None = None) -> pa.DataType:
        """The Arrow type; a Python-type-backed DataType needs ``values`` to infer it from."""
        if self.is_arrow_type():
            return self._physical_dtype
        if self.is_numpy_type():
            return pa.from_numpy_dtype(self._physical_dtype)
        if not values:
            raise ValueError(
                f"{self!r} is backed by a Python type: pass values to infer its Arrow type from."
            )
        return pa.array(list(values)).type

    def to_numpy_dtype(self) -> np.dtype:
        """The NumPy dtype (``object`` where NumPy has no equivalent)."""
        if self.is_numpy_type():
            return self._physical_dtype
        if self.is_arrow_type():
            try:
                return np.dtype(self._physical_dtype.to_pandas_dtype())
            except (TypeError, ValueError, NotImplementedError, pa.ArrowNotImplementedError):
                return np.dtype("object")
        return np.dtype("object")

    def to_python_type(self) -> type:
        """The Python type, for a DataType backed by one."""
        if not self.is_python_type():
            raise ValueError(f"DataType {self} is not backed by a Python type.")
        return self._physical_dtype

    # -- factories ------------------------------------------------------------------------------

    @classmethod
    def from_arrow(cls, arrow_type: pa.DataType) -> DataType:
        return cls(arrow_type)

    @classmethod
    def from_numpy(cls, numpy_dtype: np.dtype | str) -> DataType:
        return cls(np.dtype(numpy_dtype))

    @classmethod
    def infer_dtype(cls, value: Any) -> DataType:
        """The DataType of a Python, NumPy or Arrow value."""
        if isinstance(value, (np.ndarray, np.generic)):
            return cls.from_numpy(value.dtype)
        try:
            return cls.from_arrow(pa.array([value]).type)
        except (pa.ArrowException, TypeError, ValueError):
            return cls(type(value))

    @classmethod
    def list(cls, value_type: DataType) -> DataType:
        return cls.from_arrow(pa.list_(value_type.to_arrow_dtype()))

    @classmethod
    def large_list(cls, value_type: DataType) -> DataType:
        return cls.from_arrow(pa.large_list(value_type.to_arrow_dtype()))

    @classmethod
    def fixed_size_list(cls, value_type: DataType, list_size: int) -> DataType:
        return cls.from_arrow(pa.list_(value_type.to_arrow_dtype(), list_size))

    @classmethod
    def struct(cls, fields: builtins.list[tuple[str, DataType]]) -> DataType:
        return cls.from_arrow(pa.struct([(name, t.to_arrow_dtype()) for name, t in fields]))

    @classmethod
    def map(cls, key_type: DataType, value_type: DataType) -> DataType:
        return cls.from_arrow(pa.map_(key_type.to_arrow_dtype(), value_type.to_arrow_dtype()))

    # -- comparison and display -----------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DataType):
            return False
        mine, theirs = self._physical_dtype, other._physical_dtype
        return type(mine) is type(theirs) and mine == theirs

    def __hash__(self) -> int:
        return hash((type(self._physical_dtype), self._physical_dtype))

    def __repr__(self) -> str:
        if self.is_arrow_type():
            return f"DataType(arrow:{self._physical_dtype})"
        if self.is_numpy_type():
            return f"DataType(numpy:{self._physical_dtype})"
        return f"DataType(python:{self._physical_dtype.__name__})"

    def __reduce__(self):
        return (DataType, (self._physical_dtype,))


def _make_factory(name: str, arrow_type: Any) -> classmethod:
    def factory(cls: type) -> DataType:
        return cls.from_arrow(arrow_type())

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"A DataType of Arrow's ``{arrow_type()}``."
    return classmethod(factory)


for _name, _arrow_type in _ARROW_FACTORIES.items():
    setattr(DataType, _name, _make_factory(_name, _arrow_type))
del _name, _arrow_type
