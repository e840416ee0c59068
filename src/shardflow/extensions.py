"""Tensor and Python-object extension types, as Ray Data's ``ray.data.extensions``.

Tensor columns are Arrow's canonical ``arrow.fixed_shape_tensor`` (or
``arrow.variable_shape_tensor`` for ragged tensors); the Arrow names here build and recognise
them (shardflow.sdk.tensor_types). In pandas, ``TensorArray`` / ``TensorDtype`` hold tensor
columns (shardflow.sdk.tensor_pandas). Python objects without an Arrow type are stored in
shardflow's own extension type (shardflow.sdk.object_column), and are ``PythonObjectArray``
columns of dtype ``PythonObjectDtype`` in pandas (shardflow.sdk.object_pandas).

Examples:
    >>> import numpy as np
    >>> import pandas as pd
    >>> import shardflow as sf
    >>> from shardflow.extensions import TensorArray
    >>> ds = sf.from_pandas(pd.DataFrame({"x": TensorArray(np.ones((2, 3, 3)))}))
    >>> ds.take_batch()["x"].shape
    (2, 3, 3)
"""

from __future__ import annotations

from shardflow.sdk.object_column import (
    PythonObjectArray as ArrowPythonObjectArray,
)
from shardflow.sdk.object_column import (
    PythonObjectScalar as ArrowPythonObjectScalar,
)
from shardflow.sdk.object_column import (
    PythonObjectType as ArrowPythonObjectType,
)
from shardflow.sdk.object_pandas import PythonObjectArray, PythonObjectDtype
from shardflow.sdk.schema_conflicts import ArrowConversionError
from shardflow.sdk.tensor_pandas import TensorArray, TensorArrayElement, TensorDtype
from shardflow.sdk.tensor_types import (
    ArrowTensorArray,
    ArrowTensorType,
    ArrowTensorTypeV2,
    ArrowVariableShapedTensorArray,
    ArrowVariableShapedTensorType,
    FixedShapeTensorFormat,
    FixedShapeTensorType,
    column_needs_tensor_extension,
    create_arrow_fixed_shape_tensor_type,
    get_arrow_extension_fixed_shape_tensor_types,
    get_arrow_extension_tensor_types,
)

__all__ = [
    "ArrowConversionError",
    "ArrowPythonObjectArray",
    "ArrowPythonObjectScalar",
    "ArrowPythonObjectType",
    "ArrowTensorArray",
    "ArrowTensorType",
    "ArrowTensorTypeV2",
    "ArrowVariableShapedTensorArray",
    "ArrowVariableShapedTensorType",
    "FixedShapeTensorFormat",
    "FixedShapeTensorType",
    "PythonObjectArray",
    "PythonObjectDtype",
    "TensorArray",
    "TensorArrayElement",
    "TensorDtype",
    "column_needs_tensor_extension",
    "create_arrow_fixed_shape_tensor_type",
    "get_arrow_extension_fixed_shape_tensor_types",
    "get_arrow_extension_tensor_types",
]
