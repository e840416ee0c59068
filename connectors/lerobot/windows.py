"""Temporal windows (``delta_timestamps``): a feature stacked over frame offsets per row.

Offsets in seconds become whole frame steps (``round(offset * fps)``) when each is a
multiple of ``1 / fps`` within a tolerance, as lerobot's ``LeRobotDataset`` checks them. A
window is clamped to its anchor frame's episode: an offset before the episode's first frame or
after its last takes the nearest frame of the episode, and ``<key>_is_pad`` marks it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shardflow.sdk.tensor_types import ArrowVariableShapedTensorType


def delta_steps_for(
    delta_timestamps: dict[str, list[float]] | None,
    features: dict[str, Any],
    fps: float,
    tolerance_s: float,
    root: str,
) -> dict[str, list[int]]:
    """``delta_timestamps`` as frame steps per feature (``{}`` when None).

    Raises:
        ValueError: a key that is not a feature of the dataset, or an offset off the frame
            grid by more than ``tolerance_s``.
    """
    if not delta_timestamps:
        return {}
    unknown = sorted(set(delta_timestamps) - set(features))
    if unknown:
        raise ValueError(f"{root!r}: delta_timestamps keys {unknown} are not dataset features.")
    off_grid = {}
    for key, offsets in delta_timestamps.items():
        bad = [t for t in offsets if abs(t * fps - round(t * fps)) / fps > tolerance_s]
        if bad:
            off_grid[key] = bad
    if off_grid:
        raise ValueError(
            f"{root!r}: delta_timestamps {off_grid} are not multiples of 1/{fps} s (within "
            f"delta_tolerance_s={tolerance_s}); adjust them to the frame grid."
        )
    return {key: [round(t * fps) for t in offsets] for key, offsets in delta_timestamps.items()}


def check_delta_timestamps(delta_timestamps: Any, delta_tolerance_s: Any) -> None:
    """The shape of the arguments, checked before any file is read."""
    if delta_timestamps is not None:
        if not isinstance(delta_timestamps, dict):
            raise TypeError(
                "delta_timestamps must be a dict of feature name to a list of offsets in "
                f"seconds, got {type(delta_timestamps).__name__}."
            )
        for key, offsets in delta_timestamps.items():
            if isinstance(offsets, (str, bytes)) or not hasattr(offsets, "__iter__"):
                raise TypeError(
                    f"delta_timestamps[{key!r}] must be a list of seconds, got {offsets!r}."
                )
            if not list(offsets):
                raise ValueError(f"delta_timestamps[{key!r}] is empty; give at least one offset.")
            if not all(isinstance(t, (int, float)) and math.isfinite(t) for t in offsets):
                raise ValueError(
                    f"delta_timestamps[{key!r}] must hold finite numbers, got {offsets!r}."
                )
    if isinstance(delta_tolerance_s, bool) or not isinstance(delta_tolerance_s, (int, float)):
        raise TypeError(
            f"delta_tolerance_s must be a number of seconds, got {delta_tolerance_s!r}."
        )
    if not delta_tolerance_s >= 0:
        raise ValueError(f"delta_tolerance_s must be >= 0, got {delta_tolerance_s!r}.")


def _is_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    )


def window_type(arrow_type: pa.DataType) -> pa.DataType:
    """The tensor type of a windowed column: one more (leading) dimension than the stored
    feature, whose nested lists give the rest."""
    if isinstance(arrow_type, pa.BaseExtensionType):
        arrow_type = arrow_type.storage_type
    ndim = 1
    while _is_list(arrow_type):
        ndim += 1
        arrow_type = arrow_type.value_type
    return ArrowVariableShapedTensorType(arrow_type, ndim)


def column_to_numpy(column: Any, name: str) -> np.ndarray:
    """A column of scalars or of uniformly shaped nested lists as one ``(rows, *shape)``
    array of the stored element type."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column.type, pa.BaseExtensionType):
        column = column.storage
    shape = [len(column)]
    values = column
    while _is_list(values.type):
        if values.null_count:
            raise ValueError(f"Windowed LeRobot feature {name!r} holds null lists.")
        if pa.types.is_fixed_size_list(values.type):
            length = values.type.list_size
        else:
            lengths = pc.unique(pc.list_value_length(values)).to_pylist()
            if len(lengths) > 1:
                raise ValueError(
                    f"Windowed LeRobot feature {name!r} must have one shape, but its lists "
                    f"have lengths {sorted(lengths)}."
                )
            length = lengths[0] if lengths else 0
        shape.append(length)
        values = values.flatten()
    return values.to_numpy(zero_copy_only=False).reshape(shape)


def window_targets(
    anchors: np.ndarray, low: np.ndarray, high: np.ndarray, steps: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Frames ``anchors + steps`` clamped to ``[low, high)`` (per anchor), and the mask of
    the ones that were clamped: two ``(anchors, steps)`` arrays."""
    wanted = anchors[:, None] + np.asarray(steps)[None, :]
    low, high = low[:, None], high[:, None]
    pad = (wanted < low) | (wanted >= high)
    return np.clip(wanted, low, high - 1), pad
