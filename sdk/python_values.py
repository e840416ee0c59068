"""Python values as Arrow columns, with Ray Data's conventions.

* Lists of ``datetime`` objects become timestamps of the finest unit their values need
  (``s``, ``ms``, ``us``, or ``ns`` for pandas Timestamps with nanoseconds), so a timestamp
  column read as rows and rebuilt by ``map`` keeps its unit.
* Tensors of deep-learning libraries (``torch.Tensor``) become NumPy arrays on the way in;
  torch is never imported here.
* Values Arrow has no type for (arbitrary objects, mixed types) become a column of Python
  objects (:mod:`shardflow.sdk.object_column`).
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.object_column import objects_to_arrow

# OverflowError: integers beyond 64 bits, which Arrow has no type for either
_ARROW_CANNOT = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)
_UNITS = ("s", "ms", "us", "ns")


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a ``torch.Tensor`` (checked without importing torch)."""
    module = type(value).__module__
    return module.startswith("torch") and hasattr(value, "detach") and hasattr(value, "numpy")


def tensor_to_numpy(value: Any) -> Any:
    """A torch tensor as a NumPy array (copied off the GPU when needed); others unchanged."""
    if is_torch_tensor(value):
        return value.detach().cpu().numpy()
    return value


def datetime_unit(values: list[Any]) -> str | None:
    """The finest timestamp unit that ``values`` (naive datetimes or None) need, or None
    when they are not all naive datetimes."""
    finest = 0
    seen = False
    for value in values:
        if value is None:
            continue
        if not isinstance(value, datetime.datetime) or value.tzinfo is not None:
            return None
        seen = True
        if getattr(value, "nanosecond", 0):
            return "ns"
        if value.microsecond:
            finest = max(finest, 1 if value.microsecond % 1000 == 0 else 2)
    return _UNITS[finest] if seen else None


def values_to_arrow(values: list[Any]) -> pa.Array:
    """A column of the Python ``values`` of one field of many rows."""
    unit = datetime_unit(values) if values and _first_present_is_datetime(values) else None
    if unit is not None:
        return pa.array(values, pa.timestamp(unit))
    if any(is_torch_tensor(v) for v in values[:1]):
        values = [tensor_to_numpy(v) for v in values]
    try:
        return pa.array(values)
    except _ARROW_CANNOT:
        return objects_to_arrow(values)


def object_ndarray_to_arrow(values: np.ndarray) -> pa.Array:
    """A 1-D NumPy object array as a column: Arrow's inferred type, else Python objects."""
    try:
        return pa.array(values)
    except _ARROW_CANNOT:
        return objects_to_arrow(list(values))


def _first_present_is_datetime(values: list[Any]) -> bool:
    for value in values:
        if value is not None:
            return isinstance(value, datetime.datetime)
    return False


def is_plain_arrow_type(arrow_type: pa.DataType) -> bool:
    """Whether pandas batches show this type as ``pd.ArrowDtype`` (as Ray Data 2.60 does):
    every type except extension types, dictionaries and the null type."""
    return not (
        isinstance(arrow_type, pa.BaseExtensionType)
        or pa.types.is_dictionary(arrow_type)
        or pa.types.is_null(arrow_type)
    )
