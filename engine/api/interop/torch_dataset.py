"""PyTorch: ``to_torch``'s IterableDataset, which a ``DataLoader`` may read with workers.

Imported only when ``to_torch`` is called (it subclasses ``torch.utils.data.IterableDataset``,
so it imports torch).

Read by the process that made it, the IterableDataset runs the whole dataset each epoch. Read
by the workers of a ``DataLoader(num_workers=n)``, worker ``i`` runs only the pieces ``i``,
``i + n``, ... of the dataset (engine/plan/pieces.py: read tasks with the maps after them, or
blocks of a materialized dataset), cut once when ``to_torch`` is called, so every row comes
from exactly one worker in every epoch. Workers run their pieces on the local backend in
threads of their own process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa
import torch  # noqa: TID253 (this module is imported only once torch is needed)

from shardflow.engine.iteration.batches import validate_batch_size
from shardflow.engine.plan.logical import LogicalPlan
from shardflow.engine.plan.pieces import cut_plan, join_pieces
from shardflow.sdk.block import block_to_batch


def _check_dtype(value: Any, argument: str, allow_sequence: bool, allow_dict: bool) -> None:
    if value is None or isinstance(value, torch.dtype):
        return
    if allow_sequence and isinstance(value, (list, tuple)):
        if all(v is None or isinstance(v, torch.dtype) for v in value):
            return
    if allow_dict and isinstance(value, dict):
        if all(v is None or isinstance(v, torch.dtype) for v in value.values()):
            return
    raise TypeError(f"to_torch: {argument} must be None or a torch.dtype, got {value!r}.")


def validate_feature_columns(feature_columns: Any, feature_column_dtypes: Any) -> Any:
    """Check the shapes Ray Data's ``to_torch`` takes; returns None for an empty selection."""
    if not feature_columns:
        feature_columns = None
    if feature_columns is not None:
        if isinstance(feature_columns, dict):
            if not all(isinstance(v, list) and v for v in feature_columns.values()):
                raise ValueError("column list may not be empty")
        elif isinstance(feature_columns, list):
            groups = all(isinstance(c, (list, tuple)) for c in feature_columns)
            if groups and any(not c for c in feature_columns):
                raise ValueError("column list may not be empty")
            if not groups and not all(isinstance(c, str) for c in feature_columns):
                raise TypeError(
                    "to_torch: feature_columns must be a list of column names, a list of "
                    f"lists of them, or a dict of name to list; got {feature_columns!r}."
                )
        else:
            raise TypeError(
                "to_torch: feature_columns must be a list of column names, a list of lists of "
                f"them, or a dict of name to list; got {feature_columns!r}."
            )
    dtypes = feature_column_dtypes
    if dtypes and not isinstance(dtypes, torch.dtype):
        if isinstance(feature_columns, dict):
            if not isinstance(dtypes, dict):
                raise TypeError(
                    "If `feature_columns` is a dict, `feature_column_dtypes` must be None, "
                    f"`torch.dtype`, or dict, got {type(dtypes)}."
                )
            if set(feature_columns) != set(dtypes):
                raise ValueError(
                    "`feature_columns` and `feature_column_dtypes` must have the same keys."
                )
        elif feature_columns and isinstance(feature_columns[0], (list, tuple)):
            if not isinstance(dtypes, (list, tuple)):
                raise TypeError(
                    "If `feature_columns` is a list of lists, `feature_column_dtypes` must be "
                    f"None, `torch.dtype`, or a sequence, got {type(dtypes)}."
                )
            if len(feature_columns) != len(dtypes):
                raise ValueError(
                    "`feature_columns` and `feature_column_dtypes` must have the same length."
                )
        else:
            raise TypeError(
                "If `columns` is a list of strings, `column_dtypes` must be None or a single "
                f"`torch.dtype`. Got {type(dtypes)} instead."
            )
    _check_dtype(dtypes, "feature_column_dtypes", True, True)
    return feature_columns


def _columns_tensor(table: pa.Table, columns: list[str], dtype: Any, unsqueeze: bool) -> Any:
    """Columns of a batch side by side in one tensor: each (N,) column becomes (N, 1) when
    ``unsqueeze``, then they are concatenated along dimension 1."""
    arrays = block_to_batch(table.select(columns), "numpy")
    tensors = []
    for name in columns:
        array = arrays[name]
        if array.dtype == object:
            try:
                array = np.stack(array)
            except Exception as exc:
                raise ValueError(
                    f"Failed to convert column {name} to a Torch Tensor of dtype {dtype}: its "
                    "values are not numbers or equal-shaped arrays."
                ) from exc
        tensor = torch.as_tensor(np.array(array), dtype=dtype)
        tensors.append(tensor.unsqueeze(1) if unsqueeze else tensor)
    return torch.cat(tensors, dim=1) if len(tensors) > 1 else tensors[0]


class BatchToTensors:
    """A pyarrow batch as ``(features, label)`` tensors, as Ray Data's ``to_torch`` gives."""

    def __init__(self, options: dict[str, Any]):
        self.o = options

    def __call__(self, batch: pa.Table) -> tuple[Any, Any]:
        o = self.o
        label = o["label_column"]
        if label:
            features = batch.select([c for c in batch.column_names if c != label])
            label_tensor = _columns_tensor(
                batch, [label], o["label_column_dtype"], o["unsqueeze_label_tensor"]
            )
        else:
            features, label_tensor = batch, None
        columns, dtypes = o["feature_columns"], o["feature_column_dtypes"]
        squeeze = o["unsqueeze_feature_tensors"]
        if isinstance(columns, dict):
            return {
                key: _columns_tensor(
                    features,
                    list(names),
                    dtypes[key] if isinstance(dtypes, dict) else dtypes,
                    squeeze,
                )
                for key, names in columns.items()
            }, label_tensor
        if columns and isinstance(columns[0], (list, tuple)):
            per_group = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes] * len(columns)
            return [
                _columns_tensor(features, list(group), dtype, squeeze)
                for group, dtype in zip(columns, per_group)
            ], label_tensor
        names = list(columns) if columns else features.column_names
        return _columns_tensor(features, names, dtypes, squeeze), label_tensor


class ShardflowIterableDataset(torch.utils.data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` over a shardflow dataset or DataIterator
    (``to_torch``).

    Each ``iter()`` is one epoch. In the workers of a ``DataLoader``, each worker reads its
    share of the dataset's pieces, so the workers together read every row once per epoch.
    Picklable (the dataset's functions with cloudpickle), so spawned workers work too.
    """

    def __init__(self, dataset: Any, batch_options: dict[str, Any], convert: Any):
        self._dataset = dataset
        self._batch_options = batch_options
        self._convert = convert
        plan = getattr(dataset, "_plan", None)  # a DataIterator of a split has no plan
        self._pieces: list[LogicalPlan] | None = None if plan is None else cut_plan(plan)

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        if info is None:
            source = self._dataset
            batches = source.iter_batches(batch_format="pyarrow", **self._batch_options)
            yield from map(self._convert, batches)
            return
        yield from self._worker_epoch(info.id, info.num_workers)

    def _worker_epoch(self, worker: int, workers: int) -> Iterator[Any]:
        from shardflow.engine.api.context import DataContext
        from shardflow.engine.api.dataset import Dataset

        if self._pieces is None:
            raise ValueError(
                "to_torch: this dataset cannot be divided among DataLoader workers without "
                "running it (it has a limit, a shuffle, a sort, a groupby, a union, a zip or a "
                "join, or it is a split of a streaming_split). Call ds.materialize() before "
                "to_torch(), or use num_workers=0."
            )
        plan = join_pieces(self._pieces[worker::workers])
        if plan is None:
            return
        if any(type(b).__name__ == "RayRef" for b in getattr(plan.source, "blocks", ())):
            raise ValueError(
                "to_torch: blocks in Ray's object store cannot be read by DataLoader worker "
                "processes; iterate the IterableDataset directly (num_workers=0), or use "
                "iter_torch_batches / streaming_split on Ray."
            )
        # The worker runs its pieces itself, in threads: a DataLoader worker is already one
        # of several processes, and a forked one must not use the parent's backends.
        context = DataContext.get_current().copy()
        context.backend = "local"
        context.python_udfs_in_processes = False
        DataContext._set_current(context)
        batches = Dataset(plan).iter_batches(batch_format="pyarrow", **self._batch_options)
        yield from map(self._convert, batches)

    def __reduce__(self) -> tuple:
        state = cloudpickle.dumps((self._dataset, self._batch_options, self._convert, self._pieces))
        return _restore, (state,)


def _restore(state: bytes) -> ShardflowIterableDataset:
    dataset, batch_options, convert, pieces = cloudpickle.loads(state)
    restored = ShardflowIterableDataset.__new__(ShardflowIterableDataset)
    restored._dataset, restored._batch_options = dataset, batch_options
    restored._convert, restored._pieces = convert, pieces
    return restored


def to_torch(
    dataset: Any,
    *,
    label_column: str | None,
    feature_columns: Any,
    label_column_dtype: Any,
    feature_column_dtypes: Any,
    batch_size: int,
    prefetch_batches: int,
    drop_last: bool,
    local_shuffle_buffer_size: int | None,
    local_shuffle_seed: int | None,
    unsqueeze_label_tensor: bool,
    unsqueeze_feature_tensors: bool,
) -> ShardflowIterableDataset:
    """The work of :meth:`Dataset.to_torch` (see its docstring)."""
    if label_column is not None and not isinstance(label_column, str):
        raise TypeError(f"to_torch: label_column must be a column name, got {label_column!r}.")
    _check_dtype(label_column_dtype, "label_column_dtype", False, False)
    feature_columns = validate_feature_columns(feature_columns, feature_column_dtypes)
    for name, value in (
        ("drop_last", drop_last),
        ("unsqueeze_label_tensor", unsqueeze_label_tensor),
        ("unsqueeze_feature_tensors", unsqueeze_feature_tensors),
    ):
        if not isinstance(value, bool):
            raise TypeError(f"to_torch: {name} must be a bool, got {value!r}.")
    batch_options = {
        "batch_size": validate_batch_size(batch_size),
        "prefetch_batches": prefetch_batches,
        "drop_last": drop_last,
        "local_shuffle_buffer_size": local_shuffle_buffer_size,
        "local_shuffle_seed": local_shuffle_seed,
    }
    dataset.iter_batches(batch_format="pyarrow", **batch_options)  # validates them
    convert = BatchToTensors(
        {
            "label_column": label_column,
            "feature_columns": feature_columns,
            "label_column_dtype": label_column_dtype,
            "feature_column_dtypes": feature_column_dtypes,
            "unsqueeze_label_tensor": unsqueeze_label_tensor,
            "unsqueeze_feature_tensors": unsqueeze_feature_tensors,
        }
    )
    return ShardflowIterableDataset(dataset, batch_options, convert)
