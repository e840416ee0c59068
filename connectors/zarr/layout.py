"""What a Zarr read plans with: each array's shape, chunks and dtype, and the chunk grid a
``chunk_shapes`` override gives. Plain data, computed on the driver, shipped to read tasks."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

ChunkShapes = tuple[int, ...] | dict[str, tuple[int, ...]] | None


@dataclass(frozen=True)
class ArrayLayout:
    """One array of the store: where it is, its shape, native chunks and dtype."""

    name: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str

    @property
    def itemsize(self) -> int:
        return int(np.dtype(self.dtype).itemsize)

    def read_chunks(self, chunk_shapes: ChunkShapes) -> tuple[int, ...]:
        """The chunk shape a read uses: ``chunk_shapes`` replaces the leading axes (a dict:
        for the arrays it names), the other axes keep the native chunks."""
        override = chunk_shapes.get(self.name) if isinstance(chunk_shapes, dict) else chunk_shapes
        if override is None:
            return self.chunks
        if len(override) > len(self.shape):
            raise ValueError(
                f"chunk_shapes override for array {self.name!r} has {len(override)} axes but "
                f"array of shape {self.shape!r} has rank {len(self.shape)}. Each chunk_shapes "
                "override may not be longer than its target array's rank."
            )
        return tuple(override) + self.chunks[len(override) :]

    def grid(self, chunks: tuple[int, ...]) -> tuple[int, ...]:
        """The number of chunks along each axis."""
        return tuple(math.ceil(size / chunk) for size, chunk in zip(self.shape, chunks))

    def chunk_slices(
        self, index: tuple[int, ...], chunks: tuple[int, ...]
    ) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` on each axis of the chunk at ``index`` (edge chunks are cut)."""
        return tuple(
            (i * chunk, min((i + 1) * chunk, size))
            for i, chunk, size in zip(index, chunks, self.shape)
        )


def normalize_array_path(path: Any) -> str:
    """An array's path in a store as zarr names it: ``/a//b/`` is ``a/b``."""
    if not isinstance(path, str):
        raise TypeError(f"An array path must be a string, got {path!r}.")
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"An array path may not contain '.' or '..': {path!r}.")
    return "/".join(parts)


def _is_positive_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and int(value) > 0


def _chunk_prefix(value: Any, what: str) -> tuple[int, ...]:
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(_is_positive_int(x) for x in value)
    ):
        raise ValueError(
            f"{what} must be a non-empty sequence of positive integers (list or tuple), got "
            f"{value!r}"
        )
    return tuple(int(x) for x in value)


def parse_chunk_shapes(chunk_shapes: Any) -> ChunkShapes:
    """``chunk_shapes`` validated: None, a shared prefix, or a prefix per array path."""
    if chunk_shapes is None:
        return None
    if isinstance(chunk_shapes, dict):
        parsed: dict[str, tuple[int, ...]] = {}
        for name, prefix in chunk_shapes.items():
            parsed[normalize_array_path(name)] = _chunk_prefix(prefix, f"chunk_shapes[{name!r}]")
        return parsed
    if not isinstance(chunk_shapes, (list, tuple)):
        raise ValueError(
            "chunk_shapes must be a non-empty sequence of positive integers (list or tuple), "
            f"or a dict, got {chunk_shapes!r}"
        )
    return _chunk_prefix(chunk_shapes, "chunk_shapes")
