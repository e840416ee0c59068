"""ZarrDatasource: the chunks of a Zarr v2 store's arrays as rows, read with zarr-python 2."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.zarr.layout import (
    ArrayLayout,
    ChunkShapes,
    normalize_array_path,
    parse_chunk_shapes,
)
from shardflow.connectors.zarr.store import ZarrStore, open_store, read_slices, zarr_module
from shardflow.sdk.block import Block, BlockMetadata, numpy_batch_to_block
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.retry import RetryConfig

# A read task cuts its block after about this many bytes of chunk data.
_BLOCK_BYTES = 64 * 1024 * 1024


class ZarrDatasource(Datasource):
    """Reads the arrays of a Zarr v2 store. See :func:`shardflow.read_zarr` for the arguments.

    The store is opened on the driver (consolidated metadata when it has some) to learn each
    array's shape, chunks and dtype; read tasks reopen it by path and read their chunks, so
    they carry no open handle.
    """

    def __init__(
        self,
        path: Any,
        *,
        filesystem: Any = None,
        chunk_shapes: Any = None,
        array_paths: list[str] | None = None,
        allow_full_metadata_scan: bool = False,
        align_axis_0: bool = False,
        overlap: int = 0,
        storage_options: dict[str, Any] | None = None,
    ):
        zarr = zarr_module()
        if not isinstance(path, str):
            if isinstance(path, (list, tuple)):
                raise TypeError("read_zarr reads one store: pass its path as a string.")
            path = str(path)
        if array_paths is not None and (
            isinstance(array_paths, str) or not isinstance(array_paths, (list, tuple))
        ):
            raise TypeError(f"array_paths must be a list of strings, got {array_paths!r}.")
        self._path = path
        self._store = open_store(path, filesystem, storage_options)
        self._chunk_shapes: ChunkShapes = parse_chunk_shapes(chunk_shapes)
        with self._store.errors_named(""):
            try:
                root = zarr.open_consolidated(self._store.mapper(), mode="r")
                consolidated = True
            except KeyError:  # no .zmetadata
                root = zarr.open(self._store.mapper(), mode="r")
                consolidated = False
        shown = self._store.shown
        self._arrays = _discover(
            zarr, root, array_paths, consolidated, allow_full_metadata_scan, shown
        )
        if not self._arrays:
            raise ValueError(f"No arrays discovered in Zarr store at {shown!r}.")
        if isinstance(self._chunk_shapes, dict):
            unknown = sorted(set(self._chunk_shapes) - {a.name for a in self._arrays})
            if unknown:
                raise ValueError(f"Unknown array path(s) in chunk_shapes: {unknown}")
        self._aligned = bool(align_axis_0)
        if self._aligned:
            _check_aligned(self._arrays)
        if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
            raise ValueError(f"overlap must be a non-negative integer, got {overlap!r}")
        if overlap and not self._aligned:
            raise ValueError(
                "overlap requires align_axis_0=True. In the default long-form (chunk-per-row) "
                "mode, there's no wide row to extend forward: the ``chunk_slices`` column on "
                "each chunk row already exposes the global axis-0 range."
            )
        self._overlap = overlap
        # read_chunks raises for an override longer than an array's rank
        self._read_chunks = {a.name: a.read_chunks(self._chunk_shapes) for a in self._arrays}
        if self._aligned:
            axis_0 = {name: chunks[0] for name, chunks in self._read_chunks.items()}
            if len(set(axis_0.values())) > 1:
                raise ValueError(
                    f"Aligned arrays must share the same axis-0 chunk size. Got: {axis_0}. "
                    "Pass chunk_shapes=[N] (or a per-array chunk_shapes dict that resolves all "
                    "aligned arrays to the same axis-0 prefix) to re-tile them."
                )

    def __repr__(self) -> str:
        return f"ZarrDatasource(path={self._store.shown!r})"

    def get_name(self) -> str:
        return "Zarr"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(math.prod(a.shape) * a.itemsize for a in self._arrays)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
    ) -> list[ReadTask]:
        parallelism = max(1, int(parallelism))
        retry = RetryConfig.from_data_context(data_context)
        if self._aligned:
            return self._aligned_tasks(parallelism, per_task_row_limit, retry)
        tasks = []
        for array in self._arrays:
            chunks = self._read_chunks[array.name]
            grid = array.grid(chunks)
            count = math.prod(grid)
            if count == 0:
                continue
            per_task = math.ceil(count / min(parallelism, count))
            for start in range(0, count, per_task):
                stop = min(start + per_task, count)
                read = _ChunkRows(self._store, retry, array, chunks, grid, start, stop)
                size = (stop - start) * math.prod(chunks) * array.itemsize
                tasks.append(self._task(read, stop - start, size, per_task_row_limit))
        return tasks

    def _aligned_tasks(
        self, parallelism: int, limit: int | None, retry: RetryConfig
    ) -> list[ReadTask]:
        first = self._arrays[0]
        step, length = self._read_chunks[first.name][0], first.shape[0]
        rows = math.ceil(length / step)
        if rows == 0:
            return []
        per_task = math.ceil(rows / min(parallelism, rows))
        row_bytes = sum(math.prod(a.shape[1:]) * a.itemsize for a in self._arrays)
        tasks = []
        for start in range(0, rows, per_task):
            stop = min(start + per_task, rows)
            read = _AlignedRows(
                self._store, retry, tuple(self._arrays), step, length, self._overlap, start, stop
            )
            size = (min(stop * step + self._overlap, length) - start * step) * row_bytes
            tasks.append(self._task(read, stop - start, size, limit))
        return tasks

    def _task(self, read: Any, rows: int, size: int, limit: int | None) -> ReadTask:
        metadata = BlockMetadata(num_rows=rows, size_bytes=size, input_files=[self._store.shown])
        return ReadTask(read.limited(limit), metadata, per_task_row_limit=limit)


def _discover(
    zarr: Any,
    root: Any,
    array_paths: list[str] | None,
    consolidated: bool,
    allow_full_metadata_scan: bool,
    shown: str,
) -> list[ArrayLayout]:
    """The arrays to read: the store's own array, those named, or every array it lists."""

    def layout(name: str, array: Any) -> ArrayLayout:
        return ArrayLayout(
            name,
            tuple(int(s) for s in array.shape),
            tuple(int(c) for c in array.chunks),
            str(array.dtype),
        )

    wanted = [normalize_array_path(p) for p in array_paths] if array_paths else None
    if isinstance(root, zarr.Array):
        if wanted is not None and set(wanted) != {""}:
            raise ValueError(
                "This Zarr store is a single root-level array (path ''), but "
                f"array_paths={array_paths!r} requested other path(s). Pass array_paths=[''] "
                "or omit it."
            )
        return [layout("", root)]
    if not consolidated and not allow_full_metadata_scan:
        if wanted is None:
            raise ValueError(
                f"No array_paths were provided and the Zarr store {shown} does not contain "
                ".zmetadata. Pass array_paths=[...] or set allow_full_metadata_scan=True."
            )
        found = []
        for raw, name in zip(array_paths or [], wanted):
            try:
                array = root[name]
            except KeyError as exc:
                raise ValueError(f"Array path {raw!r} not found in Zarr store {shown}.") from exc
            if not isinstance(array, zarr.Array):
                raise ValueError(f"Array path {raw!r} in {shown} is a group, not an array.")
            found.append(layout(name, array))
        return found
    every: dict[str, ArrayLayout] = {}

    def collect(name: str, node: Any) -> None:
        if isinstance(node, zarr.Array):
            every[name] = layout(name, node)

    root.visititems(collect)
    if wanted is None:
        return list(every.values())
    missing = sorted(set(wanted) - set(every))
    if missing:
        raise ValueError(
            f"Array(s) not found in {shown}: {', '.join(repr(m) for m in missing)}. "
            f"Available: {', '.join(repr(a) for a in sorted(every))}"
        )
    return [a for name, a in every.items() if name in set(wanted)]


def _check_aligned(arrays: list[ArrayLayout]) -> None:
    scalars = sorted(a.name for a in arrays if not a.shape)
    if scalars:
        raise ValueError(
            "align_axis_0=True requires every selected array to have at least one axis, but "
            f"these are 0-D (scalar): {scalars}. Drop them with array_paths=[...]."
        )
    lengths = {a.name: a.shape[0] for a in arrays}
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"All selected arrays must share shape[0] when align_axis_0=True. Got: {lengths}. "
            "Pass a shape-compatible subset via array_paths=[...]."
        )


def _tensor_column(values: list[np.ndarray]) -> Any:
    """A tensor column of ``values`` (fixed shape when they agree, else variable)."""
    cells = np.empty(len(values), dtype=object)
    cells[:] = values
    return cells


@dataclass(frozen=True)
class _ChunkRows:
    """Read task of the long form: chunks ``start..stop`` (row-major over the grid) of one
    array, one row per chunk."""

    store: ZarrStore
    retry: RetryConfig
    array: ArrayLayout
    chunks: tuple[int, ...]
    grid: tuple[int, ...]
    start: int
    stop: int

    def limited(self, limit: int | None) -> _ChunkRows:
        if limit is None or self.start + limit >= self.stop:
            return self
        return replace(self, stop=self.start + limit)

    def __call__(self) -> Iterator[Block]:
        opened = self.store.open(self.array.name, self.retry)
        indexes, slices, data = [], [], []
        held = 0
        for flat in range(self.start, self.stop):
            index = tuple(int(i) for i in np.unravel_index(flat, self.grid)) if self.grid else ()
            where = self.array.chunk_slices(index, self.chunks)
            chunk = read_slices(self.store, opened, where, self.retry)
            indexes.append(list(index))
            slices.append([list(pair) for pair in where])
            data.append(chunk)
            held += chunk.nbytes
            if held >= _BLOCK_BYTES:
                yield self._block(indexes, slices, data)
                indexes, slices, data, held = [], [], [], 0
        if data:
            yield self._block(indexes, slices, data)

    def _block(self, indexes: list[Any], slices: list[Any], data: list[np.ndarray]) -> Block:
        return numpy_batch_to_block(
            {
                "array": pa.array([self.array.name] * len(data), pa.string()),
                "chunk_index": pa.array(indexes, pa.list_(pa.int64())),
                "chunk_slices": pa.array(slices, pa.list_(pa.list_(pa.int64()))),
                "chunk": _tensor_column(data),
            }
        )


@dataclass(frozen=True)
class _AlignedRows:
    """Read task of the wide form: axis-0 chunks ``start..stop`` of every array, one row per
    chunk, ``overlap`` more steps of each array's data past the chunk's end."""

    store: ZarrStore
    retry: RetryConfig
    arrays: tuple[ArrayLayout, ...]
    step: int
    length: int
    overlap: int
    start: int
    stop: int

    def limited(self, limit: int | None) -> _AlignedRows:
        if limit is None or self.start + limit >= self.stop:
            return self
        return replace(self, stop=self.start + limit)

    def __call__(self) -> Iterator[Block]:
        opened = [self.store.open(a.name, self.retry) for a in self.arrays]
        rows: list[tuple[int, int]] = []
        columns: dict[str, list[np.ndarray]] = {a.name: [] for a in self.arrays}
        held = 0
        for i in range(self.start, self.stop):
            t_start, t_stop = i * self.step, min((i + 1) * self.step, self.length)
            data_stop = min(t_stop + self.overlap, self.length)
            rows.append((t_start, t_stop))
            for array, handle in zip(self.arrays, opened):
                chunk = read_slices(self.store, handle, ((t_start, data_stop),), self.retry)
                columns[array.name].append(chunk)
                held += chunk.nbytes
            if held >= _BLOCK_BYTES:
                yield self._block(rows, columns)
                rows, columns, held = [], {a.name: [] for a in self.arrays}, 0
        if rows:
            yield self._block(rows, columns)

    def _block(self, rows: list[tuple[int, int]], columns: dict[str, list[np.ndarray]]) -> Block:
        batch: dict[str, Any] = {
            "t_start": np.array([r[0] for r in rows], np.int64),
            "t_stop": np.array([r[1] for r in rows], np.int64),
        }
        for name, values in columns.items():
            batch[name] = _tensor_column(values)
        return numpy_batch_to_block(batch)
