"""How an XShards partition is stored in a block, and read back.

A partition is one block. It holds a list of elements (usually exactly one), stored in one of
three ways, named in the block's schema metadata under ``shardflow.xshards``:

- ``frame``: the block *is* one pandas DataFrame, column for column (Arrow-native, with
  pandas' own schema metadata so dtypes and index come back exactly). ``to_dataset()`` and
  ``Dataset.to_xshards()`` pass such blocks through without copying, and repartitioning cuts
  them into zero-copy slices. Only DataFrames whose every column survives the round trip
  through Arrow unchanged are stored this way.
- ``arrays``: the block is one dict of numeric ndarrays with one first dimension, a column
  per key (tensor columns for arrays of more dimensions), built without copying; converting
  it to a Dataset copies nothing either.
- ``objects``: one row per element, each cell the pickled element (any picklable object:
  lists, tuples, other dicts, DataFrames that Arrow would change).

A block without the metadata (a block of a Dataset) is one DataFrame element.

The metadata also lists, per element, its type, its length where it has one (rows of a
DataFrame, first dimension of an ndarray or of a dict of ndarrays, items of a list) and its
item count when it is a list or tuple, so the driver can check and plan without reading data.
"""

from __future__ import annotations

import json
import numbers
import pickle
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.object_column import PythonObjectType, is_object_type

META_KEY = b"shardflow.xshards"
ELEMENT_COLUMN = "element"
FRAME, ARRAYS, OBJECTS, DATASET = "frame", "arrays", "objects", "dataset"
DATAFRAME = "pandas.core.frame.DataFrame"
DICT = "builtins.dict"
NUMBER = "number"

_NUMERIC_KINDS = "biufmM"


@dataclass
class BlockInfo:
    """What a partition block holds, read from its metadata.

    Args:
        kind: ``"frame"``, ``"arrays"``, ``"objects"`` or ``"dataset"`` (a Dataset block:
            one DataFrame).
        types: The type of each element (``module.Class``, or ``"number"`` for any number).
        lens: The length of each element, or None where it has none.
        seqs: The item count of each element that is a list or tuple, else None.
    """

    kind: str
    types: list[str]
    lens: list[int | None]
    seqs: list[int | None]

    @property
    def count(self) -> int:
        return len(self.types)


# -- element facts ------------------------------------------------------------------------


def _pandas() -> Any:
    """pandas if it is already imported (an element cannot be a DataFrame otherwise)."""
    return sys.modules.get("pandas")


def is_dataframe(value: Any) -> bool:
    pd = _pandas()
    return pd is not None and isinstance(value, pd.DataFrame)


def type_name(value: Any) -> str:
    """The name used to compare element types: numbers of any kind count as one type."""
    if isinstance(value, numbers.Number) and not isinstance(value, np.ndarray):
        return NUMBER
    if is_dataframe(value):
        return DATAFRAME
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def short_type(name: str) -> str:
    """A type name for messages: ``DataFrame`` rather than ``pandas.core.frame.DataFrame``."""
    return name.rsplit(".", 1)[-1]


def length_of(value: Any) -> int | None:
    """Rows of a DataFrame, first dimension of an ndarray (or of a dict of them with one
    first dimension), items of a list; None for anything else."""
    if is_dataframe(value) or isinstance(value, list):
        return len(value)
    if isinstance(value, np.ndarray):
        return int(value.shape[0]) if value.ndim else None
    if isinstance(value, dict) and value:
        lengths = set()
        for item in value.values():
            if not isinstance(item, np.ndarray) or not item.ndim:
                return None
            lengths.add(int(item.shape[0]))
        return lengths.pop() if len(lengths) == 1 else None
    return None


def seq_len(value: Any) -> int | None:
    return len(value) if isinstance(value, (list, tuple)) else None


# -- encoding -----------------------------------------------------------------------------


def encode(elements: list[Any]) -> pa.Table:
    """The block holding a partition's ``elements``."""
    if len(elements) == 1 and is_dataframe(elements[0]):
        table = frame_to_table(elements[0])
        if table is not None:
            return _with_info(table, FRAME, [elements[0]])
    if len(elements) == 1 and type(elements[0]) is dict:
        table = arrays_to_table(elements[0])
        if table is not None:
            return _with_info(table, ARRAYS, [elements[0]])
    return _with_info(_objects_table(elements), OBJECTS, elements)


def encode_objects(elements: list[Any]) -> pa.Table:
    """A block holding ``elements`` pickled, one per row, whatever their type."""
    return _with_info(_objects_table(elements), OBJECTS, elements)


def encode_arrow_frame(table: pa.Table) -> pa.Table:
    """A block holding one DataFrame given as an Arrow table (Parquet reads)."""
    info = BlockInfo(FRAME, [DATAFRAME], [table.num_rows], [None])
    return with_metadata(table, info)


def _with_info(table: pa.Table, kind: str, elements: list[Any]) -> pa.Table:
    info = BlockInfo(
        kind,
        [type_name(e) for e in elements],
        [length_of(e) for e in elements],
        [seq_len(e) for e in elements],
    )
    return with_metadata(table, info)


def with_metadata(table: pa.Table, info: BlockInfo) -> pa.Table:
    payload = json.dumps(
        {"kind": info.kind, "types": info.types, "lens": info.lens, "seqs": info.seqs}
    ).encode()
    metadata = dict(table.schema.metadata or {})
    metadata[META_KEY] = payload
    return table.replace_schema_metadata(metadata)


def _objects_table(elements: list[Any]) -> pa.Table:
    import cloudpickle

    payloads = [cloudpickle.dumps(e, protocol=5) for e in elements]
    offsets = np.zeros(len(payloads) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in payloads], out=offsets[1:])
    data = payloads[0] if len(payloads) == 1 else b"".join(payloads)
    storage = pa.Array.from_buffers(
        pa.large_binary(), len(payloads), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    column = pa.ExtensionArray.from_storage(PythonObjectType(), storage)
    return pa.table({ELEMENT_COLUMN: column})


def frame_to_table(df: Any) -> pa.Table | None:
    """``df`` as an Arrow table that converts back to an equal DataFrame, or None when Arrow
    would change it (object columns, non-string or repeated column names, attrs, ...)."""
    pd = _pandas()
    columns = df.columns
    if df.attrs or isinstance(columns, pd.MultiIndex) or len(columns) == 0:
        return None
    if not all(isinstance(c, str) for c in columns) or columns.has_duplicates:
        return None
    if not all(_safe_dtype(dtype) for dtype in df.dtypes):
        return None
    index = df.index
    default_index = (
        isinstance(index, pd.RangeIndex)
        and index.start == 0
        and index.step == 1
        and index.name is None
    )
    if not default_index:
        if isinstance(index, pd.RangeIndex):
            return None
        levels = [index.get_level_values(i) for i in range(index.nlevels)]
        if not all(_safe_dtype(level.dtype) for level in levels):
            return None
        names = [n for n in index.names if n is not None]
        if any(not isinstance(n, str) or n in columns for n in names):
            return None
    try:
        return pa.Table.from_pandas(df, preserve_index=not default_index)
    except (pa.ArrowException, ValueError, TypeError):
        return None


def arrays_to_table(arrays: dict) -> pa.Table | None:
    """A dict of numeric ndarrays of one first dimension as columns (no copy for contiguous
    arrays), or None when a value would not come back the same."""
    if not arrays or not all(isinstance(k, str) for k in arrays):
        return None
    lengths = set()
    for value in arrays.values():
        if (
            not isinstance(value, np.ndarray)
            or value.ndim == 0
            or value.dtype.kind not in "iuf"
            or not value.dtype.isnative
            or (value.ndim > 1 and value.size == 0)
        ):
            return None
        lengths.add(value.shape[0])
    if len(lengths) != 1:
        return None
    from shardflow.sdk.block import numpy_batch_to_block

    try:
        return numpy_batch_to_block(arrays)
    except (pa.ArrowException, ValueError, TypeError):
        return None


def _safe_dtype(dtype: Any) -> bool:
    """Whether a column of this dtype comes back from Arrow with the same dtype and values."""
    if isinstance(dtype, np.dtype):
        return dtype.kind in _NUMERIC_KINDS
    pd = _pandas()
    if isinstance(dtype, pd.CategoricalDtype):
        return _safe_dtype(dtype.categories.dtype)
    if isinstance(dtype, pd.StringDtype):
        return dtype.storage == "pyarrow"  # Python-stored strings come back Arrow-stored
    return isinstance(
        dtype,
        (
            pd.ArrowDtype,
            pd.DatetimeTZDtype,
            pd.PeriodDtype,
            pd.IntervalDtype,
            pd.BooleanDtype,
            pd.core.arrays.integer.IntegerDtype,
            pd.core.arrays.floating.FloatingDtype,
        ),
    )


# -- decoding -----------------------------------------------------------------------------


def info_of(table: pa.Table) -> BlockInfo:
    """What a partition block holds."""
    return info_from_metadata(table.schema.metadata, table.num_rows)


def info_from_metadata(metadata: dict | None, num_rows: int) -> BlockInfo:
    raw = (metadata or {}).get(META_KEY)
    if raw is None:
        return BlockInfo(DATASET, [DATAFRAME], [num_rows], [None])
    data = json.loads(raw)
    return BlockInfo(data["kind"], data["types"], data["lens"], data["seqs"])


def decode(table: pa.Table) -> list[Any]:
    """The elements of a partition block."""
    info = info_of(table)
    if info.kind == OBJECTS:
        return decode_objects(table)
    if info.kind == ARRAYS:
        return [table_to_arrays(table)]
    return [table_to_frame(table)]


def table_to_arrays(table: pa.Table) -> dict:
    """The dict of (writable) ndarrays an arrays block holds."""
    from shardflow.sdk.block import block_to_batch

    batch = block_to_batch(table, "numpy")
    return {name: np.array(values, copy=True) for name, values in batch.items()}


def decode_objects(table: pa.Table) -> list[Any]:
    out: list[Any] = []
    for chunk in table.column(ELEMENT_COLUMN).chunks:
        storage = chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk
        for cell in storage:
            out.append(None if not cell.is_valid else pickle.loads(memoryview(cell.as_buffer())))
    return out


def _is_tensor(arrow_type: pa.DataType) -> bool:
    """Tensor columns, which pandas cannot hold: they become columns of ndarrays."""
    name = getattr(arrow_type, "extension_name", None)
    return name in ("arrow.fixed_shape_tensor", "arrow.variable_shape_tensor")


def table_to_frame(table: pa.Table) -> Any:
    """A DataFrame from a frame block (exact, through pandas' metadata) or a Dataset block
    (tensor and object columns become columns of ndarrays or objects)."""
    import pandas as pd

    metadata = dict(table.schema.metadata or {})
    metadata.pop(META_KEY, None)
    special = [
        name
        for name, field_type in zip(table.column_names, table.schema.types)
        if is_object_type(field_type) or _is_tensor(field_type)
    ]
    if not special:
        return table.replace_schema_metadata(metadata or None).to_pandas()
    from shardflow.sdk.block import block_to_batch

    plain = table.drop_columns(special).replace_schema_metadata(metadata or None)
    df = plain.to_pandas() if plain.num_columns else pd.DataFrame(index=range(table.num_rows))
    cells = block_to_batch(table.select(special), "numpy")
    for name in special:
        column = np.empty(table.num_rows, dtype=object)
        column[:] = list(cells[name])
        df[name] = column
    return df[[c for c in table.column_names if c in df.columns]]
