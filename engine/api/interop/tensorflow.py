"""TensorFlow: ``from_tf`` and the work of ``to_tf`` / ``iter_tf_batches`` (Dataset and
DataIterator).

``to_tf`` returns a ``tf.data.Dataset`` built with ``from_generator`` over the iterator's
NumPy batches, with an output signature inferred from the Arrow schema as Ray Data infers
it: one ``TensorSpec`` of shape ``(None, ...)`` per column (a fixed-shape tensor column adds
its shape), a ``RaggedTensorSpec`` for list and variable-shape tensor columns, strings as
``tf.string``. ``from_tf`` reads a ``tf.data.Dataset`` element by element in one streaming
read task in the driver (TensorFlow datasets do not leave their process).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import BlockMetadata, rows_to_block
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require

_ROWS_PER_BLOCK = 1024


def _tf(feature: str) -> Any:
    return require("tensorflow", "tensorflow", feature)


# -- type specs --------------------------------------------------------------------------------


def _element_type(kind: pa.DataType) -> tuple[pa.DataType, tuple[int | None, ...]]:
    """The element type of a column and the shape of one row's value."""
    if isinstance(kind, pa.FixedShapeTensorType):
        return kind.value_type, tuple(kind.shape)
    if getattr(kind, "extension_name", None) == "arrow.variable_shape_tensor":
        ndim = getattr(kind, "ndim", None)
        if ndim is None:  # pyarrow without the type: a struct of data and shape (storage)
            ndim = kind.storage_type.field("shape").type.list_size
        return kind.storage_type.field("data").type.value_type, (None,) * ndim
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return kind.value_type, (None,)
    if pa.types.is_fixed_size_list(kind):
        return kind.value_type, (kind.list_size,)
    return kind, ()


def _tf_dtype(tf: Any, kind: pa.DataType) -> Any:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        return tf.string
    if pa.types.is_large_binary(kind):
        return tf.string
    try:
        return tf.dtypes.as_dtype(kind.to_pandas_dtype())
    except TypeError as exc:
        raise TypeError(
            f"to_tf: columns of Arrow type {kind} have no TensorFlow dtype; convert them "
            "(map_batches) or pass a type spec."
        ) from exc


def type_spec(schema: pa.Schema, columns: str | list[str]) -> Any:
    """The ``tf.TypeSpec`` of one column, or a dict of them for a list of columns."""
    tf = _tf("to_tf")

    def spec(name: str) -> Any:
        value_type, row_shape = _element_type(schema.field(name).type)
        shape = (None, *row_shape)
        dtype = _tf_dtype(tf, value_type)
        if sum(dim is None for dim in shape) > 1:
            return tf.RaggedTensorSpec(shape, dtype=dtype)
        return tf.TensorSpec(shape, dtype=dtype, name=name)

    if isinstance(columns, str):
        return spec(columns)
    return {name: spec(name) for name in columns}


# -- conversion ----------------------------------------------------------------------------------


def to_tf_tensor(array: np.ndarray, dtype: Any = None, spec: Any = None) -> Any:
    """A NumPy column of a batch as a TensorFlow tensor (ragged where the spec says so)."""
    tf = _tf("to_tf")
    if dtype is None and spec is not None:
        dtype = spec.dtype
    if array.dtype == object and len(array) and isinstance(array[0], np.ndarray):
        if isinstance(spec, tf.RaggedTensorSpec) or len({a.shape for a in array}) > 1:
            return tf.ragged.constant([a.tolist() for a in array], dtype=dtype)
        array = np.stack(array)
    if isinstance(spec, tf.RaggedTensorSpec):
        return tf.ragged.constant([np.asarray(a).tolist() for a in array], dtype=dtype)
    return tf.convert_to_tensor(array, dtype=dtype)


def tf_batch(batch: dict[str, np.ndarray], dtypes: Any = None) -> dict[str, Any]:
    """A NumPy batch as a dict of tensors, each of ``dtypes`` (one dtype, or one per column)."""
    if isinstance(dtypes, dict):
        return {name: to_tf_tensor(array, dtypes.get(name)) for name, array in batch.items()}
    return {name: to_tf_tensor(array, dtypes) for name, array in batch.items()}


def _check_columns(columns: Any, valid: list[str], argument: str) -> list[str]:
    names = [columns] if isinstance(columns, str) else columns
    if not isinstance(names, list) or not all(isinstance(c, str) for c in names):
        raise TypeError(
            f"to_tf: {argument} must be a column name or a list of them, got {columns!r}."
        )
    for name in names:
        if name not in valid:
            raise ValueError(
                f"You specified '{name}' in `{argument}`, but there's no column named "
                f"'{name}' in the dataset. Valid column names are: {valid}."
            )
    return names


def to_tf(
    iterator: Any,
    feature_columns: str | list[str],
    label_columns: str | list[str],
    *,
    additional_columns: str | list[str] | None,
    prefetch_batches: int,
    batch_size: int,
    drop_last: bool,
    local_shuffle_buffer_size: int | None,
    local_shuffle_seed: int | None,
    feature_type_spec: Any,
    label_type_spec: Any,
    additional_type_spec: Any,
) -> Any:
    """The work of ``to_tf`` on a DataIterator (see :meth:`Dataset.to_tf`)."""
    tf = _tf("to_tf")
    groups = [("feature_columns", feature_columns, feature_type_spec)]
    groups.append(("label_columns", label_columns, label_type_spec))
    if additional_columns is not None:
        groups.append(("additional_columns", additional_columns, additional_type_spec))
    schema = None
    if any(spec is None for _, _, spec in groups):
        found = iterator.schema()
        schema = getattr(found, "base_schema", found)
        if schema is None:
            raise ValueError("to_tf: the dataset's schema is unknown (it has no rows).")
    specs = []
    for argument, columns, spec in groups:
        if schema is not None:
            _check_columns(columns, schema.names, argument)
        specs.append(spec if spec is not None else type_spec(schema, columns))
    batches = iterator.iter_batches(
        prefetch_batches=prefetch_batches,
        batch_size=batch_size,
        batch_format="numpy",
        drop_last=drop_last,
        local_shuffle_buffer_size=local_shuffle_buffer_size,
        local_shuffle_seed=local_shuffle_seed,
    )

    def tensors(batch: dict[str, np.ndarray], columns: Any, spec: Any) -> Any:
        if isinstance(columns, str):
            return to_tf_tensor(batch[columns], spec=spec)
        return {name: to_tf_tensor(batch[name], spec=spec[name]) for name in columns}

    def generator() -> Iterator[tuple[Any, ...]]:
        for batch in batches:
            yield tuple(
                tensors(batch, columns, spec) for (_, columns, _), spec in zip(groups, specs)
            )

    dataset = tf.data.Dataset.from_generator(generator, output_signature=tuple(specs))
    options = tf.data.Options()
    # Sharding is shardflow's (streaming_split): tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.with_options(options)


def iter_tf_batches(iterator: Any, *, dtypes: Any, **batch_options: Any) -> Any:
    """The work of ``iter_tf_batches`` on a DataIterator: NumPy batches made tensors."""
    _tf("iter_tf_batches")
    batches = iterator.iter_batches(batch_format="numpy", **batch_options)
    return _Mapped(batches, lambda batch: tf_batch(batch, dtypes))


class _Mapped:
    """An iterable whose every ``iter()`` maps a new epoch of ``batches``."""

    def __init__(self, batches: Any, fn: Any):
        self._batches, self._fn = batches, fn

    def __iter__(self) -> Iterator[Any]:
        return map(self._fn, self._batches)


# -- from_tf ---------------------------------------------------------------------------------


class TFDatasource(Datasource):
    """The elements of a ``tf.data.Dataset``, read in order by one task in the driver."""

    def __init__(self, dataset: Any):
        self._dataset = dataset

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ReadTask]:
        return [ReadTask(_TFElements(self._dataset), BlockMetadata(None, None))]

    def get_name(self) -> str:
        return "FromTF"

    def reads_in_driver(self) -> bool:
        return True  # a tf.data.Dataset is a graph of this process's TensorFlow runtime


class _TFElements:
    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __call__(self) -> Iterator[pa.Table]:
        rows: list[dict[str, Any]] = []
        for element in self.dataset.as_numpy_iterator():
            rows.append(element if isinstance(element, dict) else {"item": element})
            if len(rows) == _ROWS_PER_BLOCK:
                yield rows_to_block(rows)
                rows = []
        if rows:
            yield rows_to_block(rows)


def from_tf(dataset: Any) -> Any:
    """Create a :class:`~shardflow.Dataset` from a `TensorFlow Dataset`.

    Elements that are dicts become rows (one column per key); other elements go in column
    ``item``, as in :func:`from_items` and Ray Data. Tensors become NumPy arrays (tensor
    columns), string tensors ``bytes``. Unlike Ray Data, which loads every element when
    ``from_tf`` is called, the elements are read when the dataset runs, by one streaming
    task in the driver, so a large TensorFlow dataset never sits in memory whole.

    Args:
        dataset: A ``tf.data.Dataset``.

    Returns:
        A lazy :class:`~shardflow.Dataset`.

    Examples:
        >>> import tensorflow as tf, shardflow as sf  # doctest: +SKIP
        >>> data = tf.data.Dataset.from_tensor_slices({"x": [1, 2, 3]})  # doctest: +SKIP
        >>> sf.from_tf(data).take_all()  # doctest: +SKIP
        [{'x': 1}, {'x': 2}, {'x': 3}]
    """
    tf = _tf("from_tf")
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"from_tf takes a tf.data.Dataset, got {type(dataset).__name__}.")
    from shardflow.engine.api.create import read_datasource

    return read_datasource(TFDatasource(dataset))
