"""Blocks, their metadata, and the batch formats users see.

A block is a :class:`pyarrow.Table`. Users see batches in one of three formats:

* ``"numpy"``: a ``dict`` mapping column names to :class:`numpy.ndarray`
* ``"pandas"``: a :class:`pandas.DataFrame`
* ``"pyarrow"``: a :class:`pyarrow.Table`

Multi-dimensional NumPy columns are stored as Arrow's canonical fixed-shape tensor
extension type, and ragged ones (arrays of differing shapes) as the canonical
variable-shape tensor type, so files written from them stay readable by other Arrow tools.
"""

from __future__ import annotations

import copyreg
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, Union

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import pandas

    from shardflow.sdk.pandas_batches import PandasConversion

from shardflow.sdk.object_column import is_object_type, objects_to_numpy
from shardflow.sdk.python_values import (
    is_torch_tensor,
    object_ndarray_to_arrow,
    tensor_to_numpy,
    values_to_arrow,
)

Block: TypeAlias = pa.Table
"""The unit of data the engine moves: an Arrow table."""

BATCH_FORMATS = ("numpy", "pandas", "pyarrow")
"""The batch formats accepted by ``map_batches``, ``iter_batches`` and friends."""

DataBatch = Union[pa.Table, "pandas.DataFrame", dict[str, np.ndarray]]


@dataclass
class BlockMetadata:
    """What is known about a block without reading it.

    Args:
        num_rows: Number of rows, or None when unknown.
        size_bytes: In-memory size in bytes, or None when unknown.
        exec_stats: Free-form execution statistics of the task that made the block.
        input_files: Paths the block was read from.
    """

    num_rows: int | None
    size_bytes: int | None
    exec_stats: Any | None = None
    input_files: list[str] | None = field(default=None)

    @classmethod
    def of(cls, block: Block, input_files: list[str] | None = None) -> BlockMetadata:
        """Metadata measured from a block in hand."""
        return cls(num_rows=block.num_rows, size_bytes=block.nbytes, input_files=input_files)


def validate_batch_format(batch_format: str | None) -> str:
    """Return the canonical batch format name, raising ValueError for unknown ones.

    ``"default"`` means ``"numpy"``; None (or ``"native"``) the blocks' own format, as in
    Ray Data: a pandas DataFrame for data that came from pandas frames (``from_pandas``,
    which Ray Data keeps as pandas blocks), else the ``pyarrow.Table``.
    """
    if batch_format == "default":
        return "numpy"
    if batch_format is None or batch_format == "native":
        return "native"
    if batch_format not in BATCH_FORMATS:
        # Ray Data's words first: code matches them with pytest.raises(match=...).
        raise ValueError(
            f"The given batch format {batch_format} isn't allowed (must be one of "
            f"{[*BATCH_FORMATS, None]}): batch_format takes {BATCH_FORMATS}, 'default' or "
            f"None, got {batch_format!r}."
        )
    return batch_format


def _column_to_numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if is_object_type(column.type):
        return objects_to_numpy(column)
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            column = column.chunk(0)
        elif isinstance(column.type, (pa.FixedShapeTensorType,)) or _is_variable_tensor(
            column.type
        ):
            column = column.combine_chunks()
    if isinstance(column, pa.ChunkedArray):
        parts = [_primitive_to_numpy(chunk) for chunk in column.chunks]
        views = [part for part in parts if part is not None]
        if views and len(views) == len(parts):
            return np.concatenate(views)  # pyarrow's ChunkedArray.to_numpy imports pandas
        return column.to_numpy()
    if isinstance(column.type, pa.FixedShapeTensorType):
        return column.to_numpy_ndarray()
    if _is_variable_tensor(column.type):
        return _variable_tensor_to_numpy(column)
    direct = _primitive_to_numpy(column)
    if direct is not None:
        return direct
    return column.to_numpy(zero_copy_only=False)


_NUMPY_OF_ARROW = {
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "halffloat": np.float16,
    "float": np.float32,
    "double": np.float64,
}


def _primitive_to_numpy(array: pa.Array) -> np.ndarray | None:
    """A read-only zero-copy view of a null-free numeric array, without importing pandas."""
    dtype = _NUMPY_OF_ARROW.get(str(array.type))
    if dtype is None or array.null_count:
        return None
    data = array.buffers()[1]
    if data is None:
        return np.empty(0, dtype=dtype)
    view = np.frombuffer(data, dtype=dtype)[array.offset : array.offset + len(array)]
    view.flags.writeable = False  # Arrow memory is immutable; callers copy to modify
    return view


def _is_variable_tensor(arrow_type: pa.DataType) -> bool:
    return getattr(arrow_type, "extension_name", None) == "arrow.variable_shape_tensor"


def _variable_tensor_to_numpy(column: pa.Array) -> np.ndarray:
    out = np.empty(len(column), dtype=object)
    storage = column.storage
    data = storage.field("data")
    shapes = storage.field("shape")
    for i in range(len(column)):
        if not storage[i].is_valid:
            out[i] = None
            continue
        shape = shapes[i].as_py()
        flat = data[i].values.to_numpy(zero_copy_only=False)
        out[i] = flat.reshape(shape)
    return out


def _ndarray_to_arrow(values: np.ndarray) -> pa.Array:
    if values.dtype == object and len(values) and all(isinstance(v, np.ndarray) for v in values):
        shapes = {v.shape for v in values}
        if len(shapes) == 1:
            values = np.stack(list(values))
        else:
            return _ragged_to_variable_tensor(list(values))
    if values.ndim > 1:
        return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(values))
    if values.dtype.kind == "U":
        return pa.array(values.tolist(), type=pa.string())
    if values.dtype == object:
        return object_ndarray_to_arrow(values)
    return _numeric_to_arrow(values)


def _numeric_to_arrow(values: np.ndarray) -> pa.Array:
    """Zero-copy for plain 1-D numeric arrays.

    ``pa.array`` imports pandas on first use (about half a second), which shardflow avoids
    until a user asks for pandas.
    """
    if values.ndim == 1 and values.dtype.kind in "iuf" and values.dtype.isnative:
        values = np.ascontiguousarray(values)
        return pa.Array.from_buffers(
            pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)]
        )
    return pa.array(values)


def _list_to_arrow(values: list[Any]) -> pa.Array:
    first = values[0] if values else None
    if type(first) in (int, float):
        try:
            array = np.asarray(values)
        except (ValueError, OverflowError):
            array = None
        if array is not None and array.dtype.kind in "if":
            return _numeric_to_arrow(array)
    return values_to_arrow(values)


def _ragged_to_variable_tensor(arrays: list[np.ndarray]) -> pa.Array:
    ndim = {a.ndim for a in arrays}
    dtypes = {a.dtype for a in arrays}
    if len(ndim) != 1 or len(dtypes) != 1:
        raise ValueError(
            "A ragged tensor column needs arrays of one dtype and one number of dimensions; "
            f"got dtypes {sorted(map(str, dtypes))} and ndims {sorted(ndim)}."
        )
    value_type = pa.from_numpy_dtype(dtypes.pop())
    tensor_type = _variable_shape_tensor_type(value_type, ndim.pop())
    data = pa.array([a.ravel() for a in arrays], type=pa.list_(value_type))
    shape = pa.array(
        [list(a.shape) for a in arrays], type=tensor_type.storage_type.field("shape").type
    )
    storage = pa.StructArray.from_arrays([data, shape], fields=list(tensor_type.storage_type))
    return pa.ExtensionArray.from_storage(tensor_type, storage)


_EXTENSION_FIELD_METADATA = {
    b"ARROW:extension:name": b"arrow.variable_shape_tensor",
    b"ARROW:extension:metadata": b"{}",
}


@functools.cache
def _variable_shape_tensor_type(value_type: pa.DataType, ndim: int) -> pa.DataType:
    # pyarrow implements the canonical type in C++ without a Python constructor; reading a
    # schema whose field carries the extension's name yields the C++ type.
    if hasattr(pa, "variable_shape_tensor"):
        return pa.variable_shape_tensor(value_type, ndim)
    storage = pa.struct([("data", pa.list_(value_type)), ("shape", pa.list_(pa.int32(), ndim))])
    field = pa.field("tensor", storage, metadata=_EXTENSION_FIELD_METADATA)
    return _extension_type_from_ipc(pa.schema([field]).serialize().to_pybytes())


def _extension_type_from_ipc(serialized_schema: bytes) -> pa.DataType:
    return pa.ipc.read_schema(pa.py_buffer(serialized_schema)).field(0).type


def _reduce_extension_type(arrow_type: pa.DataType) -> tuple[Any, ...]:
    # pyarrow cannot pickle C++ extension types that lack a Python class (such as the
    # variable-shape tensor), which blocks sending such blocks to workers.
    schema = pa.schema([pa.field("tensor", arrow_type)])
    return _extension_type_from_ipc, (schema.serialize().to_pybytes(),)


copyreg.pickle(pa.lib.BaseExtensionType, _reduce_extension_type)


def numpy_batch_to_block(batch: Mapping[str, Any]) -> Block:
    """Build a block from a dict of column name to array-like."""
    arrays = {}
    for name, values in batch.items():
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            arrays[str(name)] = values
            continue
        if _is_arrow_backed_series(values):  # a pandas column of Arrow's type: kept as is
            arrays[str(name)] = pa.Array.from_pandas(values)
            continue
        values = tensor_to_numpy(values)
        if not isinstance(values, np.ndarray):
            values = _list_to_ndarray(values)
        arrays[str(name)] = _ndarray_to_arrow(values)
    return pa.table(arrays)


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _is_arrow_backed_series(values: Any) -> bool:
    dtype = getattr(values, "dtype", None)
    return type(dtype).__name__ == "ArrowDtype" and type(values).__name__ == "Series"


def _list_to_ndarray(values: Any) -> np.ndarray:
    values = [tensor_to_numpy(v) for v in values]
    if values and all(isinstance(v, np.ndarray) for v in values):
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    try:
        array = np.asarray(values)
    except ValueError:
        array = None
    # NumPy's fixed-width bytes and str types drop trailing NUL characters (b"\x00" would
    # become b""): Python strings and bytes stay objects, which Arrow converts as they are.
    if array is None or array.dtype.kind in "SU":
        array = np.empty(len(values), dtype=object)
        array[:] = values
    return array


def to_block(data: Any) -> Block:
    """Convert a user batch (Arrow table, pandas DataFrame or dict of arrays) to a block.

    Raises:
        TypeError: if ``data`` is none of the supported batch types.
        ValueError: for a list (of rows), with Ray Data's words: wrap rows in a dict of arrays.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, Mapping):
        return numpy_batch_to_block(data)
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        from shardflow.sdk.pandas_batches import pandas_to_block

        return pandas_to_block(data)
    if isinstance(data, list):  # Ray Data's ValueError (and words) for a list of rows
        raise ValueError(
            f"Error validating {_short_repr(data)}: Standalone Python objects are not allowed. "
            "To use Python objects in a dataset, wrap them in a dict of numpy arrays, e.g., "
            "return `{'item': batch}` instead of just `batch`."
        )
    raise TypeError(
        "A batch must be a pyarrow.Table, a pandas.DataFrame or a dict of column name to "
        f"numpy array; got {type(data).__name__}."
    )


def block_to_batch(
    block: Block, batch_format: str, pandas: PandasConversion | None = None
) -> DataBatch:
    """Convert a block to a batch in ``batch_format`` ("numpy", "pandas" or "pyarrow").

    ``pandas`` says how a pandas batch gets its dtypes (Ray Data's DataContext settings;
    see shardflow.sdk.pandas_batches); the default is Ray Data's default.
    """
    batch_format = validate_batch_format(batch_format)
    if batch_format == "native":
        from shardflow.sdk.pandas_batches import is_pandas_block

        batch_format = "pandas" if is_pandas_block(block) else "pyarrow"
    if batch_format == "pyarrow":
        return block
    if batch_format == "numpy":
        return {name: _column_to_numpy(block.column(name)) for name in block.column_names}
    from shardflow.sdk.pandas_batches import DEFAULT, block_to_pandas

    return block_to_pandas(block, pandas or DEFAULT)


def block_to_rows(block: Block) -> list[dict[str, Any]]:
    """Rows of a block as dicts; tensor cells become numpy arrays."""
    if not any(_is_tensor_type(t) for t in block.schema.types):
        return block.to_pylist()
    columns = {}
    for name in block.column_names:
        column = block.column(name)
        if _is_tensor_type(column.type):
            columns[name] = list(_column_to_numpy(column))
        else:
            columns[name] = column.to_pylist()
    return [{name: columns[name][i] for name in block.column_names} for i in range(block.num_rows)]


def _is_tensor_type(arrow_type: pa.DataType) -> bool:
    return isinstance(arrow_type, pa.FixedShapeTensorType) or _is_variable_tensor(arrow_type)


def rows_to_block(rows: list[Mapping[str, Any]]) -> Block:
    """Build a block from a list of row dicts (the output of ``map`` or ``flat_map``)."""
    if not rows:
        return pa.table({})
    first = rows[0]
    columns = None
    if isinstance(first, Mapping):
        names = list(first)
        try:
            if sum(map(len, rows)) == len(rows) * len(names):
                columns = {name: [row[name] for row in rows] for name in names}
        except (KeyError, TypeError):
            columns = None
    if columns is None:
        columns = _columns_of_irregular_rows(rows)
    for name, values in columns.items():
        if values and is_torch_tensor(values[0]):
            columns[name] = [tensor_to_numpy(v) for v in values]
    if any(isinstance(values[0], np.ndarray) for values in columns.values() if values):
        return numpy_batch_to_block(
            {name: _list_to_ndarray(values) for name, values in columns.items()}
        )
    return pa.table({name: _list_to_arrow(values) for name, values in columns.items()})


def _columns_of_irregular_rows(rows: list[Any]) -> dict[str, list[Any]]:
    names: dict[str, None] = {}
    for row in rows:
        if not isinstance(row, Mapping):
            raise TypeError(
                f"Each row must be a dict of column name to value; got {type(row).__name__}. "
                "Wrap scalars as {'item': value}."
            )
        for key in row:
            names.setdefault(key, None)
    return {name: [row.get(name) for row in rows] for name in names}


def rows_without_columns(num_rows: int) -> Block:
    """A block of ``num_rows`` rows and no columns (what ``columns=[]`` reads)."""
    return pa.table({"_": pa.nulls(num_rows)}).select([])


def concat_blocks(blocks: list[Block]) -> Block:
    """Concatenate blocks, unifying schemas where they differ only by missing columns or nulls."""
    blocks = [b for b in blocks if b.num_columns or b.num_rows]
    if not blocks:
        return pa.table({})
    if len(blocks) == 1:
        return blocks[0]
    if not any(b.num_columns for b in blocks):  # Arrow drops the rows of column-less tables
        return rows_without_columns(sum(b.num_rows for b in blocks))
    try:
        return pa.concat_tables(blocks)
    except pa.ArrowInvalid:
        try:
            return pa.concat_tables(blocks, promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.concat_tables(_unify_tensor_shapes(blocks), promote_options="permissive")


def _unify_tensor_shapes(blocks: list[Block]) -> list[Block]:
    """Blocks whose tensor columns differ in shape from block to block (images of different
    sizes read by different tasks) get those columns as variable-shape tensors."""
    types: dict[str, set[Any]] = {}
    for block in blocks:
        for f in block.schema:
            types.setdefault(f.name, set()).add(f.type)
    names = [n for n, ts in types.items() if len(ts) > 1 and all(_is_tensor_type(t) for t in ts)]
    for name in names:
        ndims = {_tensor_ndim(t) for t in types[name]}
        if len(ndims) > 1:
            raise ValueError(
                f"Column {name!r} holds tensors with different numbers of dimensions "
                f"{sorted(ndims)}; one column needs one number of dimensions."
            )
    out = []
    for block in blocks:
        for name in names:
            arrow_type = block.schema.field(name).type if name in block.column_names else None
            if isinstance(arrow_type, pa.FixedShapeTensorType):
                column = block.column(name).combine_chunks()
                if len(column):
                    ragged = _ragged_to_variable_tensor(list(column.to_numpy_ndarray()))
                else:
                    ndim = len(arrow_type.shape)
                    vtype = _variable_shape_tensor_type(arrow_type.value_type, ndim)
                    ragged = pa.ExtensionArray.from_storage(vtype, pa.array([], vtype.storage_type))
                block = block.set_column(block.schema.get_field_index(name), name, ragged)
        out.append(block)
    return out


def _tensor_ndim(arrow_type: pa.DataType) -> int:
    if isinstance(arrow_type, pa.FixedShapeTensorType):
        return len(arrow_type.shape)
    return arrow_type.storage_type.field("shape").type.list_size


def __getattr__(name: str) -> Any:
    """``BlockAccessor`` (shardflow.sdk.block_accessor), under Ray Data's module name."""
    if name == "BlockAccessor":
        from shardflow.sdk.block_accessor import BlockAccessor

        return BlockAccessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
