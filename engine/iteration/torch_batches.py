"""Torch batches for ``iter_torch_batches``: tensors from Arrow batches, collation, devices.

PyTorch is optional: it is imported when ``iter_torch_batches`` is called, never when
shardflow is imported.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from shardflow.engine.iteration.collate import collate_batch_format
from shardflow.sdk.block import Block, block_to_batch
from shardflow.sdk.optional import require


def import_torch() -> Any:
    """The torch module, or an ImportError saying how to install it."""
    return require("torch", "torch", "iter_torch_batches")


def resolve_device(torch: Any, device: Any) -> Any:
    """A concrete ``torch.device``: ``"auto"`` is the CPU (there is no trainer to ask)."""
    if isinstance(device, str) and device == "auto":
        device = "cpu"
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device must be 'auto', a device string or a torch.device, got {device!r}."
        )
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device={str(device)!r} was asked for, but torch sees no CUDA device here (a CPU "
            "build of torch, or no GPU visible to this process); use device='cpu' or 'auto'."
        )
    if device.type == "cuda" and device.index is None:
        # Batches are finalized in a background thread, whose current CUDA device may differ
        # from the caller's: pin the caller's device now.
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def validate_dtypes(torch: Any, dtypes: Any) -> None:
    if dtypes is None or isinstance(dtypes, torch.dtype):
        return
    if isinstance(dtypes, Mapping) and all(
        isinstance(k, str) and isinstance(v, torch.dtype) for k, v in dtypes.items()
    ):
        return
    raise TypeError(
        f"dtypes must be a torch.dtype or a dict of column name to torch.dtype, got {dtypes!r}."
    )


class ArrowToTensors:
    """The default collation: a dict of one tensor per column, with optional dtypes.

    Tensors on the CPU never share memory with the dataset's blocks (Arrow memory is
    immutable, and an in-place update of a batch must not change the next epoch's data).
    """

    def __init__(self, dtypes: Any, copy: bool):
        self._dtypes = dtypes
        self._copy = copy

    def __call__(self, batch: Block) -> dict[str, Any]:
        import pyarrow as pa
        import torch

        arrays = block_to_batch(batch, "numpy")
        out = {}
        for name, array in arrays.items():
            column = batch.column(name)
            if pa.types.is_null(column.type):
                # A column of nulls only is float32 NaNs, as Ray Data gives it.
                array = np.full(batch.num_rows, np.nan, dtype=np.float32)
            elif array.dtype == object:
                _raise_not_a_tensor(name, array, column)
            dtype = self._dtypes.get(name) if isinstance(self._dtypes, Mapping) else self._dtypes
            out[name] = _to_tensor(torch, name, array, dtype, self._copy)
        return out


class TensorConversionError(RuntimeError, TypeError):
    """A column of Python objects that cannot become a tensor: a RuntimeError, as Ray Data
    raises, and a TypeError (what shardflow raised before)."""


def _raise_not_a_tensor(name: str, array: np.ndarray, column: Any) -> None:
    import pyarrow as pa

    message = (
        f"Column {name!r} cannot become a tensor: its values are {_describe_object(array)}. "
        "Select numeric columns, or pass a collate_fn that converts this column."
    )
    kind = column.type
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not column.null_count:
        # Ray Data's NumPy batch holds these as a NumPy string array, which torch rejects
        # with a TypeError; with a null among them it is an object array (RuntimeError).
        raise TypeError(message)
    raise TensorConversionError(message)


def _to_tensor(torch: Any, name: str, array: np.ndarray, dtype: Any, copy: bool) -> Any:
    with warnings.catch_warnings():
        # Arrow-backed arrays are read-only; torch warns about sharing them.
        warnings.simplefilter("ignore")
        try:
            tensor = torch.as_tensor(array, dtype=dtype)
        except TypeError as exc:
            raise TypeError(
                f"Column {name!r} of NumPy dtype {array.dtype} cannot become a tensor ({exc}). "
                "Pass a collate_fn that converts it."
            ) from exc
    if copy and not array.flags.writeable and array.size and tensor.data_ptr() == array.ctypes.data:
        # NumPy's copy, not tensor.clone(): torch copies on its thread pool, which is many
        # times slower when the cores are busy (the data pipeline runs beside it).
        tensor = torch.from_numpy(array.copy())
    return tensor


def _describe_object(array: np.ndarray) -> str:
    first = next((v for v in array if v is not None), None)
    if isinstance(first, np.ndarray):
        return "arrays of different shapes (a ragged tensor column)"
    return f"Python objects ({type(first).__name__})"


def is_tensor_batch(torch: Any, batch: Any) -> bool:
    """A tensor, a sequence or mapping of tensors, or of sequences of tensors."""
    if isinstance(batch, torch.Tensor):
        return True
    if isinstance(batch, (list, tuple)):
        return bool(batch) and all(
            is_tensor_batch(torch, b) and not isinstance(b, Mapping) for b in batch
        )
    if isinstance(batch, Mapping):
        return bool(batch) and all(
            isinstance(v, torch.Tensor)
            or (isinstance(v, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in v))
            for v in batch.values()
        )
    return False


def _map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(batch, Mapping):
        return type(batch)((k, _map_tensors(v, fn)) for k, v in batch.items())
    if isinstance(batch, (list, tuple)):
        return type(batch)(_map_tensors(v, fn) for v in batch)
    return fn(batch)


class TensorFinalizer:
    """Pins (when asked and an accelerator exists) and moves tensor batches to ``device``.

    Other outputs of a collate function pass through unchanged.
    """

    def __init__(self, device: Any, pin_memory: bool):
        import torch

        self._device = device
        self._pin = pin_memory and torch.cuda.is_available()

    def __call__(self, batch: Any) -> Any:
        import torch

        if not is_tensor_batch(torch, batch):
            return batch
        non_blocking = self._device.type == "cuda"

        def finalize(tensor: Any) -> Any:
            if self._pin and tensor.device.type == "cpu":
                tensor = tensor.pin_memory()
            if tensor.device != self._device:
                tensor = tensor.to(self._device, non_blocking=non_blocking)
            return tensor

        return _map_tensors(batch, finalize)


def torch_batch_steps(
    dtypes: Any, device: Any, collate_fn: Any, pin_memory: bool
) -> tuple[str, Callable[[Any], Any], Callable[[Any], Any] | None]:
    """(batch format, collate function, finalize function) for ``iter_torch_batches``.

    Validates the arguments eagerly, with Ray Data's exception types.
    """
    torch = import_torch()
    if collate_fn is not None and dtypes is not None:
        raise ValueError(
            "collate_fn cannot be used with dtypes. You should manually convert the output "
            "Torch tensors to the desired dtype inside collate_fn."
        )
    if not isinstance(pin_memory, bool):
        raise TypeError(f"pin_memory must be a bool, got {pin_memory!r}.")
    validate_dtypes(torch, dtypes)
    device = resolve_device(torch, device)
    if collate_fn is None:
        batch_format = "pyarrow"
        collate = ArrowToTensors(dtypes, copy=device.type == "cpu")
    else:
        batch_format = collate_batch_format(collate_fn)
        collate = collate_fn
    finalize = None
    if collate_fn is not None or device.type != "cpu" or (pin_memory and torch.cuda.is_available()):
        finalize = TensorFinalizer(device, pin_memory)
    return batch_format, collate, finalize
