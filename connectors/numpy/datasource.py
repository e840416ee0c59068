"""NumPy reads: ``read_numpy`` of ``.npy`` and ``.npz`` files.

A ``.npy`` file holds one array; its first axis is the rows, in column ``data``. A ``.npz``
archive holds named arrays; each becomes a column (they must agree on their first axis).
Arrays of more than one dimension become Arrow fixed-shape tensor columns.

Files are never unpickled: arrays of Python objects are refused, so a hostile or corrupt file
cannot run code. ``.npy`` files are read in slices of rows, so a file larger than memory
streams through in bounded memory.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource

# NumPy parses .npy headers with ast.literal_eval, which CPython 3.11 cannot run in two threads
# at once ("AST constructor recursion depth mismatch"); header parsing is tiny, so serialize it.
_HEADER_LOCK = threading.Lock()

DATA_COLUMN = "data"
_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_ROWS_SLICE_BYTES = 32 * 1024 * 1024
_LOAD_ARGS = ("max_header_size",)


def array_to_arrow(values: np.ndarray) -> pa.Array:
    """An Arrow array with one element per row of ``values`` (its first axis).

    1-D arrays become plain columns; arrays of more dimensions become fixed-shape tensor
    columns, empty ones included.

    Raises:
        ValueError: for dtypes Arrow cannot hold (complex, structured, Python objects).
    """
    _check_dtype(values.dtype)
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    try:
        if values.ndim == 1:
            return pa.array(values)
        values = np.ascontiguousarray(values)
        if len(values):
            return pa.FixedShapeTensorArray.from_numpy_ndarray(values)
        value_type = pa.from_numpy_dtype(values.dtype)
        shape = list(values.shape[1:])
        tensor_type = pa.fixed_shape_tensor(value_type, shape, permutation=list(range(len(shape))))
        width = math.prod(values.shape[1:])
        storage = pa.array([], pa.list_(value_type, width))
        return pa.ExtensionArray.from_storage(tensor_type, storage)
    except (pa.ArrowException, ValueError) as exc:
        message = f"arrays of dtype {values.dtype} cannot be stored in Arrow ({exc})."
        raise ValueError(message) from None


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise ValueError(
            "it holds Python objects (dtype object), which only pickle can load; shardflow "
            "never unpickles NumPy files."
        )


class NumpyDatasource(FileBasedDatasource):
    """Reads ``.npy`` and ``.npz`` files. See :func:`shardflow.read_numpy` for the arguments."""

    _FILE_EXTENSIONS = ["npy"]  # as Ray Data; .npz files are read when named or listed

    def __init__(self, paths: Any, **kwargs: Any):
        super().__init__(paths, **kwargs)
        load_args = dict(self._file_args)
        if load_args.pop("allow_pickle", False):
            raise ValueError(
                "read_numpy never loads pickled data (allow_pickle=True): unpickling a file can "
                "run arbitrary code. Convert object arrays to numeric or string arrays first."
            )
        unknown = sorted(set(load_args) - set(_LOAD_ARGS))
        if unknown:
            raise TypeError(
                f"Unknown arguments for read_numpy: {unknown}; it accepts {list(_LOAD_ARGS)}."
            )
        self._load_args = load_args

    def get_name(self) -> str:
        return "Numpy"

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        head = f.read(len(_NPY_MAGIC))
        f = _rewound(f, head)
        if head.startswith(_NPY_MAGIC):
            yield from self._read_npy(f)
        elif head.startswith(_ZIP_MAGICS):
            yield from self._read_npz(f)
        else:
            raise ValueError(
                "not a NumPy file: it starts with neither the .npy magic bytes nor a .npz (zip) "
                "header."
            )

    def _read_npy(self, f: Any) -> Iterator[Block]:
        from numpy.lib import format as npy_format

        version = npy_format.read_magic(f)
        header_args = dict(self._load_args)
        if version == (1, 0):
            with _HEADER_LOCK:
                shape, fortran_order, dtype = npy_format.read_array_header_1_0(f, **header_args)
        elif version == (2, 0):
            with _HEADER_LOCK:
                shape, fortran_order, dtype = npy_format.read_array_header_2_0(f, **header_args)
        else:  # newer header versions: let NumPy parse the whole file
            f.seek(0)
            with _HEADER_LOCK:
                values = np.load(f, allow_pickle=False, **header_args)
            yield _table({DATA_COLUMN: np.atleast_1d(values)})
            return
        _check_dtype(dtype)
        if fortran_order or len(shape) == 0:
            count = math.prod(shape)
            data = _read_exact(f, count * dtype.itemsize, 0, count * dtype.itemsize)
            values = np.frombuffer(data, dtype=dtype, count=count)
            if fortran_order:
                values = values.reshape(shape[::-1]).transpose()
            else:
                values = values.reshape(shape)
            yield _table({DATA_COLUMN: np.atleast_1d(values)})
            return
        rows = shape[0]
        row_bytes = math.prod(shape[1:]) * dtype.itemsize
        total = rows * row_bytes
        if rows == 0 or row_bytes == 0:
            yield _table({DATA_COLUMN: np.empty(shape, dtype)})
            return
        step = max(1, _ROWS_SLICE_BYTES // row_bytes)
        for start in range(0, rows, step):
            count = min(step, rows - start)
            data = _read_exact(f, count * row_bytes, start * row_bytes, total)
            values = np.frombuffer(data, dtype=dtype).reshape((count,) + tuple(shape[1:]))
            yield _table({DATA_COLUMN: values})

    def _read_npz(self, f: Any) -> Iterator[Block]:
        columns: dict[str, np.ndarray] = {}
        with _HEADER_LOCK, np.load(f, allow_pickle=False, **self._load_args) as archive:
            for name in archive.files:
                values = archive[name]
                if values.ndim == 0:
                    raise ValueError(
                        f"member {name!r} of the .npz archive is a scalar; every member must have "
                        "a first axis of rows."
                    )
                columns[name] = values
        lengths = {name: len(values) for name, values in columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"the members of the .npz archive have different first dimensions {lengths}; "
                "each member is a column, so all must have the same number of rows."
            )
        if columns:
            yield _table(columns)


def _table(columns: dict[str, np.ndarray]) -> pa.Table:
    arrays, names = [], []
    for name, values in columns.items():
        try:
            arrays.append(array_to_arrow(values))
        except ValueError as exc:
            raise ValueError(f"column {name!r}: {exc}") from None
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


def _rewound(f: Any, head: bytes) -> Any:
    """``f`` positioned at its start again, after ``head`` was read from it."""
    seekable = getattr(f, "seekable", None)
    if seekable is not None and seekable():
        f.seek(0)
        return f
    return io.BytesIO(head + f.read())


def _read_exact(f: Any, size: int, offset: int, total: int) -> bytes:
    """Read ``size`` bytes of array data, saying how much is missing when the file ends early."""
    chunks = []
    remaining = size
    while remaining:
        chunk = f.read(remaining)
        if not chunk:
            got = offset + size - remaining
            raise ValueError(
                f"the file is truncated: its header announces {total} bytes of array data, "
                f"but it holds only {got}."
            )
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]
