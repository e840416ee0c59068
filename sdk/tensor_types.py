"""Ray Data's names for tensor types and arrays, over Arrow's canonical tensor types.

shardflow stores tensor columns as Arrow's canonical extension types,
``arrow.fixed_shape_tensor`` and ``arrow.variable_shape_tensor``, so files written from
them stay readable by other Arrow tools. That is what Ray Data 2.60 does with
``DataContext.arrow_fixed_shape_tensor_format = FixedShapeTensorFormat.ARROW_NATIVE`` (its
default, V2, is an extension type of Ray's own). The names of ``ray.data.extensions`` build
and recognise these types: ``ArrowTensorType((2, 3), pa.float32())`` is
``pa.fixed_shape_tensor(pa.float32(), (2, 3))``, and ``isinstance(t, ArrowTensorType)`` holds
for every fixed-shape tensor type.

Examples:
    >>> import numpy as np
    >>> import pyarrow as pa
    >>> from shardflow.extensions import ArrowTensorArray, ArrowTensorType
    >>> array = ArrowTensorArray.from_numpy(np.zeros((4, 2, 3)))
    >>> isinstance(array.type, ArrowTensorType), array.type.shape
    (True, [2, 3])
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

VARIABLE_SHAPE_NAME = "arrow.variable_shape_tensor"


def is_fixed_shape_tensor_type(arrow_type: Any) -> bool:
    """Whether ``arrow_type`` is Arrow's canonical fixed-shape tensor type."""
    return isinstance(arrow_type, pa.FixedShapeTensorType)


def is_variable_shape_tensor_type(arrow_type: Any) -> bool:
    """Whether ``arrow_type`` is Arrow's canonical variable-shape tensor type."""
    return getattr(arrow_type, "extension_name", None) == VARIABLE_SHAPE_NAME


class _FixedShapeTensorTypeMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return is_fixed_shape_tensor_type(instance)


class _VariableShapeTensorTypeMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return is_variable_shape_tensor_type(instance)


class _FixedShapeTensorArrayMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, pa.Array) and is_fixed_shape_tensor_type(instance.type)


class _VariableShapeTensorArrayMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, pa.Array) and is_variable_shape_tensor_type(instance.type)


class ArrowTensorType(metaclass=_FixedShapeTensorTypeMeta):
    """The Arrow type of a column of tensors of one shape.

    Args:
        shape: Shape of each row's tensor.
        dtype: Arrow type of the elements.

    Returns:
        Arrow's canonical ``pa.fixed_shape_tensor(dtype, shape)``.
    """

    def __new__(cls, shape: Sequence[int], dtype: pa.DataType) -> Any:
        return create_arrow_fixed_shape_tensor_type(shape, dtype)


class ArrowTensorTypeV2(ArrowTensorType):
    """Ray Data's second fixed-shape tensor type; here the same canonical Arrow type as
    :class:`ArrowTensorType`."""


class ArrowVariableShapedTensorType(metaclass=_VariableShapeTensorTypeMeta):
    """The Arrow type of a column of tensors whose shapes differ from row to row.

    Args:
        dtype: Arrow type of the elements.
        ndim: Number of dimensions of every row's tensor.

    Returns:
        Arrow's canonical ``arrow.variable_shape_tensor`` type.
    """

    def __new__(cls, dtype: pa.DataType, ndim: int) -> Any:
        from shardflow.sdk.block import _variable_shape_tensor_type

        if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0:
            raise ValueError(f"ndim must be an int >= 0, got {ndim!r}.")
        return _variable_shape_tensor_type(dtype, ndim)


class ArrowTensorArray(metaclass=_FixedShapeTensorArrayMeta):
    """Tensor columns from NumPy arrays (``ArrowTensorArray.from_numpy``)."""

    @staticmethod
    def from_numpy(arr: Any, column_name: str | None = None) -> pa.Array:
        """An Arrow tensor column from a ``(rows, *shape)`` array, or from a sequence of
        per-row arrays (of one shape: a fixed-shape column; of several: variable-shape).

        Args:
            arr: The tensors.
            column_name: Named in the error when ``arr`` cannot be converted.

        Returns:
            A ``pyarrow.Array`` of Arrow's canonical tensor type.
        """
        from shardflow.sdk.block import _ndarray_to_arrow

        if isinstance(arr, np.ndarray) and arr.dtype != object:
            if arr.ndim < 2:
                raise ValueError(
                    f"A tensor column needs arrays of at least 2 dimensions (rows first), got "
                    f"shape {arr.shape}" + (f" for column {column_name!r}." if column_name else ".")
                )
            return _ndarray_to_arrow(arr)
        cells = np.empty(len(arr), dtype=object)
        cells[:] = [np.asarray(a) for a in arr]
        return _ndarray_to_arrow(cells)


class ArrowVariableShapedTensorArray(metaclass=_VariableShapeTensorArrayMeta):
    """Variable-shape tensor columns from NumPy arrays."""

    @staticmethod
    def from_numpy(arr: Any) -> pa.Array:
        """An Arrow variable-shape tensor column from per-row arrays (even of one shape).

        Returns:
            A ``pyarrow.Array`` of Arrow's canonical variable-shape tensor type.
        """
        from shardflow.sdk.block import _ragged_to_variable_tensor

        return _ragged_to_variable_tensor([np.asarray(a) for a in arr])


class FixedShapeTensorFormat(enum.Enum):
    """Ray Data's choice of fixed-shape tensor type (``DataContext.arrow_fixed_shape_tensor_format``).

    shardflow always uses ``ARROW_NATIVE``, Arrow's canonical type.
    """

    V1 = "v1"
    V2 = "v2"
    ARROW_NATIVE = "native"

    def to_type(self) -> type:
        """The class whose instances are tensor types of this format."""
        return ArrowTensorType


FixedShapeTensorType = pa.FixedShapeTensorType
"""Arrow's canonical fixed-shape tensor type class."""


def create_arrow_fixed_shape_tensor_type(shape: Sequence[int], dtype: pa.DataType) -> Any:
    """The fixed-shape tensor type of ``shape`` and element type ``dtype``.

    Raises:
        ValueError: if a dimension is not a non-negative int.
    """
    dims = tuple(shape)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"A tensor shape needs non-negative ints, got {shape!r}.")
    if not isinstance(dtype, pa.DataType):
        dtype = pa.from_numpy_dtype(np.dtype(dtype))
    return pa.fixed_shape_tensor(dtype, dims)


def get_arrow_extension_tensor_types() -> tuple[type, ...]:
    """The classes whose instances are tensor types, for ``isinstance`` checks."""
    return (
        ArrowTensorType,
        ArrowTensorTypeV2,
        FixedShapeTensorType,
        ArrowVariableShapedTensorType,
    )


def get_arrow_extension_fixed_shape_tensor_types() -> tuple[type, ...]:
    """The classes whose instances are fixed-shape tensor types."""
    return (ArrowTensorType, ArrowTensorTypeV2, FixedShapeTensorType)


def column_needs_tensor_extension(s: Any) -> bool:
    """Whether a pandas Series of NumPy arrays is a tensor column (its first cell is an
    ndarray), as Ray Data decides."""
    return bool(s.dtype.type is np.object_ and not s.empty and isinstance(s.iloc[0], np.ndarray))


__all__ = [
    "ArrowTensorArray",
    "ArrowTensorType",
    "ArrowTensorTypeV2",
    "ArrowVariableShapedTensorArray",
    "ArrowVariableShapedTensorType",
    "FixedShapeTensorFormat",
    "FixedShapeTensorType",
    "column_needs_tensor_extension",
    "create_arrow_fixed_shape_tensor_type",
    "get_arrow_extension_fixed_shape_tensor_types",
    "get_arrow_extension_tensor_types",
    "is_fixed_shape_tensor_type",
    "is_variable_shape_tensor_type",
]


def decode_tensor_columns(block: pa.Table, tensor_column_schema: dict[str, Any]) -> pa.Table:
    """Binary columns of raw C-ordered tensor bytes (``ndarray.tobytes()``) as tensor columns.

    ``tensor_column_schema`` maps a column to ``(numpy dtype, shape)``, as ``read_parquet``'s
    argument of that name.

    Raises:
        ValueError: naming the column, when a cell's size does not fit ``dtype`` and ``shape``.
    """
    from shardflow.sdk.block import _ndarray_to_arrow

    for name, (dtype, shape) in tensor_column_schema.items():
        if name not in block.column_names:
            continue
        dtype, shape = np.dtype(dtype), tuple(shape)
        column = block.column(name)
        size = int(np.prod(shape)) * dtype.itemsize
        cells = column.to_pylist()
        if any(cell is None or len(cell) != size for cell in cells):
            raise ValueError(
                f"tensor_column_schema: column {name!r} holds cells that are not {size} bytes "
                f"(a {dtype} tensor of shape {shape}), or nulls."
            )
        values = np.frombuffer(b"".join(cells), dtype=dtype).reshape((len(cells), *shape))
        # The type as create_arrow_fixed_shape_tensor_type makes it (no permutation), as in
        # Ray Data.
        tensor_type = create_arrow_fixed_shape_tensor_type(shape, pa.from_numpy_dtype(dtype))
        tensors = pa.ExtensionArray.from_storage(tensor_type, _ndarray_to_arrow(values).storage)
        index = block.schema.get_field_index(name)
        block = block.set_column(index, name, tensors)
    return block
