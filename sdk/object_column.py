"""Columns of arbitrary Python objects, for values Arrow has no type for.

``from_items([{"model": SomeObject()}])`` or a ``map`` returning objects makes a column of
the extension type :class:`PythonObjectType`: each cell holds the pickled object, and rows,
NumPy batches and pandas batches give the objects back. Ray Data does the same with its own
extension type.

Objects are unpickled only from blocks made in this session. The type is deliberately not
registered with Arrow: a file holding such a column (written by ``write_parquet``, say)
reads back as plain binary cells, never unpickled, because unpickling data from a file can
run arbitrary code.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

EXTENSION_NAME = "shardflow.python_object"


class PythonObjectType(pa.ExtensionType):
    """Arrow extension type of pickled Python objects (storage: ``large_binary``)."""

    def __init__(self) -> None:
        super().__init__(pa.large_binary(), EXTENSION_NAME)

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> Any:
        return cls()

    def __arrow_ext_scalar_class__(self) -> type:
        return PythonObjectScalar

    def __arrow_ext_class__(self) -> type:
        return PythonObjectArray

    def __reduce__(self) -> tuple[Any, ...]:
        return PythonObjectType, ()

    def __hash__(self) -> int:  # types are kept in sets (schema unification)
        return hash(EXTENSION_NAME)

    def to_pandas_dtype(self) -> Any:
        """``python_object()``: ``Table.to_pandas`` gives a ``PythonObjectArray``."""
        from shardflow.sdk.object_pandas import PythonObjectDtype

        return PythonObjectDtype()


class PythonObjectScalar(pa.ExtensionScalar):
    """One cell: ``as_py()`` gives the object."""

    def as_py(self, *args: Any, **kwargs: Any) -> Any:
        return None if self.value is None else pickle.loads(self.value.as_py())


class PythonObjectArray(pa.ExtensionArray):
    """A column of objects: ``to_numpy()`` gives an object array."""

    def to_numpy(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return objects_to_numpy(self)


def is_object_type(arrow_type: pa.DataType) -> bool:
    """Whether ``arrow_type`` is the Python object extension type."""
    return isinstance(arrow_type, PythonObjectType)


def objects_to_arrow(values: Iterable[Any]) -> pa.Array:
    """A column holding ``values`` (any picklable objects; None stays null)."""
    import cloudpickle

    cells: list[Any] = [None if v is None else cloudpickle.dumps(v) for v in values]
    storage = pa.array(cells, pa.large_binary())
    return pa.ExtensionArray.from_storage(PythonObjectType(), storage)


def objects_to_numpy(column: Any) -> np.ndarray:
    """The objects of an object column (Array or ChunkedArray) as a NumPy object array."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.empty(sum(len(c) for c in chunks), dtype=object)
    i = 0
    for chunk in chunks:
        for cell in chunk.storage.to_pylist():
            out[i] = None if cell is None else pickle.loads(cell)
            i += 1
    return out
