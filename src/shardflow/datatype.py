"""DataType, as Ray Data's ``ray.data.datatype``: ``from shardflow.datatype import DataType``.

Examples:
    >>> from shardflow.datatype import DataType
    >>> DataType.float32().to_arrow_dtype()
    DataType(float)
"""

from __future__ import annotations

from shardflow.sdk.datatype import DataType

__all__ = ["DataType"]
