"""Blocks as pandas DataFrames and back, with Ray Data 2.60's dtypes.

How a block becomes a DataFrame follows three DataContext settings of Ray Data's names,
which executions capture as a :class:`PandasConversion`:

* ``enable_arrow_backed_pandas_conversion`` (True by default): Arrow's standard types become
  ``pd.ArrowDtype`` columns (``int64[pyarrow]``), else NumPy dtypes (``int64``, ``float64``
  with NaN for nulls, ``datetime64`` keeping the timestamp's unit).
* ``enable_tensor_extension_casting`` (True by default): tensor columns become object
  columns of NumPy arrays, else a ``TensorArray`` (shardflow.extensions).
* ``pandas_block_ignore_metadata``: whether pandas metadata stored with the data is used.

Columns of Python objects (shardflow.sdk.object_column) become ``PythonObjectArray``
columns of dtype ``python_object()``, as in Ray Data (shardflow.sdk.object_pandas).

A DataFrame given to ``from_pandas`` comes back with its own dtypes (an object column of
strings stays object, ``Int64`` stays ``Int64``), as Ray Data, which keeps such frames as
pandas blocks, gives them back: the block records each column's pandas dtype in its
field's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.object_column import is_object_type, objects_to_arrow
from shardflow.sdk.python_values import is_plain_arrow_type

if TYPE_CHECKING:
    import pandas

PANDAS_DTYPE_KEY = b"shardflow.pandas_dtype"
"""Field metadata key: the pandas dtype a column had in the frame given to from_pandas."""

PANDAS_BLOCK_KEY = b"shardflow.pandas_block"
"""Schema metadata key of blocks made from pandas frames by from_pandas: their native batch
format (``batch_format=None``) is a pandas DataFrame, as Ray Data's pandas blocks give."""


def is_pandas_block(block: pa.Table) -> bool:
    """Whether ``block`` came from a frame given to from_pandas."""
    return bool(block.schema.metadata and PANDAS_BLOCK_KEY in block.schema.metadata)


@dataclass(frozen=True)
class PandasConversion:
    """How blocks become pandas DataFrames (see the module docstring).

    Args:
        arrow_backed: Standard Arrow types as ``pd.ArrowDtype`` (else NumPy dtypes).
        tensors_as_ndarrays: Tensor columns as object columns of arrays (else TensorArray).
        ignore_metadata: Ignore pandas metadata stored with the data.
    """

    arrow_backed: bool = True
    tensors_as_ndarrays: bool = True
    ignore_metadata: bool = False


DEFAULT = PandasConversion()


def block_to_pandas(block: pa.Table, conversion: PandasConversion = DEFAULT) -> pandas.DataFrame:
    """``block`` as a DataFrame, with the dtypes ``conversion`` asks for."""
    import pandas as pd

    from shardflow.sdk.block import _column_to_numpy, _is_tensor_type

    plain = {}
    special: dict[str, Any] = {}
    for name in block.column_names:
        column = block.column(name)
        if _is_tensor_type(column.type) and not conversion.tensors_as_ndarrays:
            from shardflow.sdk.tensor_pandas import TensorArray

            special[name] = TensorArray(_column_to_numpy(column))
        elif is_object_type(column.type):
            from shardflow.sdk.object_pandas import PythonObjectArray

            objects = _column_to_numpy(column)
            recorded = (block.schema.field(name).metadata or {}).get(PANDAS_DTYPE_KEY)
            # An object column of a frame given to from_pandas comes back as it was given.
            special[name] = objects if recorded == b"object" else PythonObjectArray(objects)
        elif _is_tensor_type(column.type):
            arrays = _column_to_numpy(column)
            cells = np.empty(len(arrays), dtype=object)
            cells[:] = list(arrays)
            special[name] = cells
        else:
            plain[name] = column
    if plain:
        table = block.select(list(plain))  # keeps the fields' metadata
        if conversion.ignore_metadata:
            table = table.replace_schema_metadata(None)
        mapper = _arrow_backed_dtype if conversion.arrow_backed else None
        df = table.to_pandas(types_mapper=mapper, ignore_metadata=conversion.ignore_metadata)
        df = _restore_frame_dtypes(df, table)
    else:
        df = pd.DataFrame(index=range(block.num_rows))
    # Inserted where they stand: selecting columns afterwards (``df[names]``) would turn
    # extension arrays of objects into NumPy object columns.
    for position, name in enumerate(block.column_names):
        if name in special:
            df.insert(position, name, special[name])
    return df


def _arrow_backed_dtype(arrow_type: pa.DataType) -> Any:
    import pandas as pd

    return pd.ArrowDtype(arrow_type) if is_plain_arrow_type(arrow_type) else None


def _restore_frame_dtypes(df: pandas.DataFrame, table: pa.Table) -> pandas.DataFrame:
    """Columns that came from a frame given to from_pandas get that frame's dtypes back."""
    import pandas as pd

    for name in df.columns:
        metadata = table.schema.field(name).metadata or {}
        recorded = metadata.get(PANDAS_DTYPE_KEY)
        if recorded is None or str(df[name].dtype) == recorded.decode():
            continue
        if recorded == b"object":  # the Python values themselves, None for nulls
            cells = np.empty(table.num_rows, dtype=object)
            cells[:] = table.column(name).to_pylist()
            df[name] = pd.Series(cells, index=df.index, dtype=object)
            continue
        try:
            df[name] = df[name].astype(recorded.decode())
        except (TypeError, ValueError):
            pass  # a dtype pandas cannot name again: keep the conversion's own
    return df


def pandas_to_block(df: pandas.DataFrame, record_dtypes: bool = False) -> pa.Table:
    """A DataFrame as a block; ``record_dtypes`` keeps each column's pandas dtype in its
    field's metadata, so that ``block_to_pandas`` gives the frame's dtypes back."""
    from shardflow.sdk.block import _ndarray_to_arrow

    fields, columns = [], []
    for name in df.columns:
        series = df[name]
        if series.dtype == object and len(series) and isinstance(series.iloc[0], np.ndarray):
            column = _ndarray_to_arrow(series.to_numpy())
        elif series.dtype == object:
            try:
                column = pa.Array.from_pandas(series)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                column = objects_to_arrow(series.tolist())
        else:
            column = pa.Array.from_pandas(series)
        metadata = None
        if record_dtypes and not _is_native_dtype_of(series.dtype, column.type):
            metadata = {PANDAS_DTYPE_KEY: str(series.dtype).encode()}
        fields.append(pa.field(str(name), column.type, metadata=metadata))
        columns.append(column)
    if not columns:
        return pa.table({}).slice(0, 0)
    metadata = {PANDAS_BLOCK_KEY: b"1"} if record_dtypes else None
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=metadata))


def _is_native_dtype_of(dtype: Any, arrow_type: pa.DataType) -> bool:
    """Whether the default conversion gives ``dtype`` back anyway (nothing to record)."""
    import pandas as pd

    if isinstance(dtype, pd.ArrowDtype):
        return bool(dtype.pyarrow_dtype == arrow_type)
    if is_object_type(arrow_type):
        return str(dtype) == "python_object()"
    return str(dtype).startswith("TensorDtype")


def strip_frame_dtypes(block: pa.Table) -> pa.Table:
    """``block`` without the recorded pandas dtypes (before it is written to files)."""
    if not is_pandas_block(block) and not any(
        f.metadata and PANDAS_DTYPE_KEY in f.metadata for f in block.schema
    ):
        return block
    fields = []
    for f in block.schema:
        metadata = {k: v for k, v in (f.metadata or {}).items() if k != PANDAS_DTYPE_KEY}
        fields.append(f.with_metadata(metadata or None) if f.metadata else f)
    kept = {k: v for k, v in (block.schema.metadata or {}).items() if k != PANDAS_BLOCK_KEY}
    return block.cast(pa.schema(fields, metadata=kept or None))


__all__ = [
    "DEFAULT",
    "PANDAS_BLOCK_KEY",
    "PANDAS_DTYPE_KEY",
    "is_pandas_block",
    "PandasConversion",
    "block_to_pandas",
    "pandas_to_block",
    "strip_frame_dtypes",
]
