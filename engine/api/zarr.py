"""Zarr stores: :func:`read_zarr`.

The connector lives in :mod:`shardflow.connectors.zarr` and needs zarr-python 2 (``pip install
'shardflow[zarr]'``), imported only when a store is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_zarr(
    path: str,
    *,
    filesystem: Any = None,
    chunk_shapes: dict[str, list[int]] | list[int] | None = None,
    array_paths: list[str] | None = None,
    allow_full_metadata_scan: bool = False,
    align_axis_0: bool = False,
    overlap: int = 0,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Dataset:
    """Read the arrays of a Zarr v2 store into a Dataset.

    **Long form** (the default): one row per chunk of each array, with the columns
    ``array`` (the array's path in the store), ``chunk_index`` (the chunk's index in the
    array's chunk grid), ``chunk_slices`` (``[start, stop]`` of the chunk on each axis) and
    ``chunk`` (its data, a tensor of the chunk's shape; edge chunks are smaller). Arrays of
    different ranks and dtypes are rows of one dataset: filter on ``array`` before batching
    their chunks together.

    **Aligned wide form** (``align_axis_0=True``): one row per chunk of axis 0, shared by
    every selected array (they must have the same length on axis 0 and the same axis-0
    chunk), with ``t_start``, ``t_stop`` and one column per array holding its
    ``[t_start:t_stop]`` slice, extended by ``overlap`` steps into the next row's range
    (cut at the end), for sliding windows.

    Which arrays: those in the store's consolidated metadata (``.zmetadata``), or those
    named in ``array_paths``; a store without ``.zmetadata`` needs ``array_paths`` or
    ``allow_full_metadata_scan=True`` (a listing of the whole store). ``chunk_shapes``
    re-tiles the leading axes at read time: a list applies to every array
    (``[16]`` turns chunks of ``(1, 28, 28)`` into ``(16, 28, 28)``), a dict per array.
    Arrays' attributes (``.zattrs``) are not read.

    A chunk that does not exist reads as the array's fill value; a chunk whose read fails
    is retried (transient errors, ``DataContext.retried_io_errors``), then raised with the
    store and the array named. Differences from Ray Data 2.60: Ray Data reads a failed
    chunk as the fill value, and reinterprets the bytes of big-endian arrays (shardflow
    reads their values, in native byte order).

    Examples:
        >>> import tempfile
        >>> import numpy as np, zarr
        >>> import shardflow as sf
        >>> path = tempfile.mkdtemp() + "/store.zarr"
        >>> root = zarr.open_group(path, mode="w")
        >>> root.create_dataset("x", data=np.arange(10), chunks=(4,))  # doctest: +ELLIPSIS
        <zarr.core.Array '/x' (10,) int64>
        >>> zarr.consolidate_metadata(path)  # doctest: +ELLIPSIS
        <zarr.hierarchy.Group '/'>
        >>> [r["chunk"].tolist() for r in sf.read_zarr(path).take_all()]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]

    Args:
        path: The store: a folder (local, ``s3://``, ``gs://``, ``memory://``) or a
            ``.zip`` archive.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred when None.
        chunk_shapes: Chunk shape prefix for every array, or a dict of one per array path.
        array_paths: Read only these arrays (paths in the store).
        allow_full_metadata_scan: List the whole store for arrays when it has no
            ``.zmetadata`` and ``array_paths`` is not given.
        align_axis_0: Read the aligned wide form.
        overlap: Steps of axis 0 each wide row's data extends past its range
            (``align_axis_0=True`` only).
        override_num_blocks: The number of read tasks.
        storage_options: fsspec options such as credentials or ``client_kwargs``.

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: no arrays, an array path not in the store, a store without
            ``.zmetadata`` and neither ``array_paths`` nor ``allow_full_metadata_scan``,
            invalid ``chunk_shapes`` or ``overlap``, arrays that cannot be aligned.
        ImportError: zarr-python 2 is not installed (``pip install 'shardflow[zarr]'``).
    """
    from shardflow.connectors.zarr import ZarrDatasource
    from shardflow.engine.api.create import read_datasource

    datasource = ZarrDatasource(
        path,
        filesystem=filesystem,
        chunk_shapes=chunk_shapes,
        array_paths=array_paths,
        allow_full_metadata_scan=allow_full_metadata_scan,
        align_axis_0=align_axis_0,
        overlap=overlap,
        storage_options=storage_options,
    )
    return read_datasource(datasource, override_num_blocks=override_num_blocks)
