"""Datasets from and to Ray ObjectRefs: ``from_arrow_refs``, ``from_pandas_refs``,
``from_numpy_refs``, ``Dataset.to_pandas_refs`` and ``Dataset.to_numpy_refs``.

On the Ray backend they take and return ObjectRefs as Ray Data does: blocks stay in Ray's
object store, and conversions run in Ray tasks, one per block. On the local backend there
is no object store: ``to_*_refs`` return the objects themselves (as ``to_arrow_refs``
does), and ``from_*_refs`` take those objects as well as ObjectRefs (fetched with
``ray.get``), so that code round-tripping through refs runs on both backends. Ray is
imported only when an ObjectRef is given or the Ray backend is in use.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import BlockMetadata

_REMOTE: dict[str, Any] = {}


def _is_object_ref(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "ObjectRef" and cls.__module__.startswith("ray")


def _on_ray() -> bool:
    from shardflow.engine.execution.runtime import current_backend

    return current_backend().name == "ray"


def _remote(fn: Any, num_returns: int = 1) -> Any:
    """``fn`` as a Ray remote function (made once per process)."""
    key = f"{fn.__name__}/{num_returns}"
    if key not in _REMOTE:
        from shardflow.sdk.optional import require

        ray = require("ray", "ray", "Datasets from ObjectRefs")
        _REMOTE[key] = ray.remote(num_returns=num_returns)(fn)
    return _REMOTE[key]


def _as_list(values: Any, kind: type | tuple[type, ...], function: str, what: str) -> list[Any]:
    if _is_object_ref(values) or isinstance(values, kind):
        return [values]
    if isinstance(values, list):
        for value in values:
            if not (_is_object_ref(value) or isinstance(value, kind)):
                raise ValueError(
                    f"{function}: expected a list of Ray object refs (or of {what}), got a "
                    f"list containing {type(value)}."
                )
        return values
    raise ValueError(
        f"{function}: expected a Ray object ref or a list of Ray object refs (or of {what}), "
        f"got {type(values)}."
    )


def _metadata(block: pa.Table) -> BlockMetadata:
    return BlockMetadata(num_rows=block.num_rows, size_bytes=block.nbytes)


def _arrow_to_block(table: Any) -> tuple[pa.Table, BlockMetadata]:
    from shardflow.engine.execution.refs import for_ray
    from shardflow.sdk.block import to_block

    block = to_block(table)
    return for_ray(block), _metadata(block)


def _pandas_to_block(df: Any) -> tuple[pa.Table, BlockMetadata]:
    from shardflow.engine.execution.refs import for_ray
    from shardflow.sdk.pandas_batches import pandas_to_block

    block = pandas_to_block(df, record_dtypes=True)
    return for_ray(block), _metadata(block)


def _numpy_to_block(array: np.ndarray) -> tuple[pa.Table, BlockMetadata]:
    from shardflow.engine.execution.refs import for_ray
    from shardflow.sdk.block import numpy_batch_to_block

    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy_refs: the object is a {type(array).__name__}, not an ndarray.")
    block = numpy_batch_to_block({"data": array})
    return for_ray(block), _metadata(block)


def _from_refs(items: list[Any], convert: Any, name: str) -> Any:
    """A materialized dataset of ``convert(item)`` for each item: in Ray tasks on the Ray
    backend (blocks stay in the object store), else on the driver."""
    from shardflow.engine.api.dataset import Dataset
    from shardflow.engine.execution.refs import RayRef, _from_ray
    from shardflow.engine.plan.logical import BlocksSource, LogicalPlan

    if _on_ray():
        import ray

        remote = _remote(convert, num_returns=2)
        pairs = [remote.remote(item if _is_object_ref(item) else ray.put(item)) for item in items]
        metas = ray.get([meta for _, meta in pairs])
        blocks: list[Any] = [RayRef(block) for block, _ in pairs]
    else:
        values = list(items)
        refs = [i for i, v in enumerate(values) if _is_object_ref(v)]
        if refs:
            import ray

            for i, value in zip(refs, ray.get([values[i] for i in refs])):
                values[i] = value
        converted = [convert(value) for value in values]
        blocks = [_from_ray(block) for block, _ in converted]
        metas = [meta for _, meta in converted]
    return Dataset(LogicalPlan(BlocksSource(tuple(blocks), name, tuple(metas))))


def from_arrow_refs(tables: Any) -> Any:
    """A dataset from Ray ObjectRefs of pyarrow Tables, as in Ray Data.

    Args:
        tables: An ObjectRef of a ``pyarrow.Table`` or a list of them. On the local backend
            the tables themselves (what ``Dataset.to_arrow_refs`` returns there) are taken
            too.

    Returns:
        A materialized Dataset with one block per table; on the Ray backend the blocks stay
        in Ray's object store.

    Raises:
        ValueError: when ``tables`` holds something else.

    Examples:
        >>> import ray, shardflow as sf  # doctest: +SKIP
        >>> sf.init(backend="ray")  # doctest: +SKIP
        >>> sf.from_arrow_refs([ray.put(pa.table({"x": [1, 2]}))]).take_all()  # doctest: +SKIP
        [{'x': 1}, {'x': 2}]
    """
    items = _as_list(tables, (pa.Table, pa.RecordBatch), "from_arrow_refs", "pyarrow Tables")
    return _from_refs(items, _arrow_to_block, "FromArrow")


def from_pandas_refs(dfs: Any) -> Any:
    """A dataset from Ray ObjectRefs of pandas DataFrames, as in Ray Data.

    Args:
        dfs: An ObjectRef of a ``pandas.DataFrame`` or a list of them. On the local backend
            the DataFrames themselves (what ``Dataset.to_pandas_refs`` returns there) are
            taken too.

    Returns:
        A materialized Dataset with one block per DataFrame, converted in Ray tasks on the
        Ray backend; the DataFrames' dtypes come back from ``to_pandas`` as they were.

    Raises:
        ValueError: when ``dfs`` holds something else.

    Examples:
        >>> import pandas as pd, ray, shardflow as sf  # doctest: +SKIP
        >>> sf.from_pandas_refs(ray.put(pd.DataFrame({"a": [1, 2]}))).count()  # doctest: +SKIP
        2
    """
    import pandas as pd

    items = _as_list(dfs, pd.DataFrame, "from_pandas_refs", "pandas DataFrames")
    return _from_refs(items, _pandas_to_block, "FromPandas")


def from_numpy_refs(ndarrays: Any) -> Any:
    """A dataset from Ray ObjectRefs of NumPy ndarrays, in column ``data``, as in Ray Data.

    Args:
        ndarrays: An ObjectRef of a ``numpy.ndarray`` or a list of them. On the local
            backend the arrays themselves are taken too.

    Returns:
        A materialized Dataset with one block per array (an array of more than one
        dimension becomes a tensor column).

    Raises:
        ValueError: when ``ndarrays`` holds something else.

    Examples:
        >>> import numpy as np, ray, shardflow as sf  # doctest: +SKIP
        >>> sf.from_numpy_refs([ray.put(np.arange(3))]).take_all()  # doctest: +SKIP
        [{'data': 0}, {'data': 1}, {'data': 2}]
    """
    items = _as_list(ndarrays, np.ndarray, "from_numpy_refs", "NumPy ndarrays")
    return _from_refs(items, _numpy_to_block, "FromNumpy")


def _block_to_pandas(block: Any, conversion: Any) -> Any:
    from shardflow.engine.execution.refs import _from_ray
    from shardflow.sdk.block import block_to_batch

    return block_to_batch(_from_ray(block), "pandas", conversion)


def _block_to_numpy(block: Any, column: str | list[str] | None) -> Any:
    from shardflow.engine.execution.refs import _from_ray
    from shardflow.sdk.block import block_to_batch

    table = _from_ray(block)
    if column is None:
        return block_to_batch(table, "numpy")
    names = [column] if isinstance(column, str) else list(column)
    missing = [c for c in names if c not in table.column_names]
    if missing:
        raise KeyError(
            f"to_numpy_refs: column(s) {missing} not in the dataset; its columns are "
            f"{table.column_names}."
        )
    batch = block_to_batch(table.select(names), "numpy")
    return batch[column] if isinstance(column, str) else batch


class ObjectRefsMixin:
    """``to_pandas_refs`` and ``to_numpy_refs`` of Dataset."""

    def _per_block(self, fn: Any, *args: Any) -> list[Any]:
        from shardflow.engine.execution.refs import RayRef
        from shardflow.engine.execution.runtime import current_backend

        backend = current_backend()
        outputs = list(self._execute())  # type: ignore[attr-defined]
        if backend.name != "ray":
            return [fn(backend.get(ref), *args) for ref, _ in outputs]
        remote = _remote(fn)
        results = []
        for ref, _ in outputs:
            if isinstance(ref, RayRef):
                results.append(remote.remote(ref.object_ref, *args))
            else:  # a slice of a block: cut on the driver
                results.append(remote.remote(backend.export_ref(ref), *args))
        return results

    def to_pandas_refs(self) -> list[Any]:
        """One pandas DataFrame per output block: ObjectRefs on the Ray backend (each made
        by a Ray task where the block is), the DataFrames themselves on the local backend.

        Returns:
            A list of ``ObjectRef[pandas.DataFrame]`` (Ray) or of DataFrames (local).

        Examples:
            >>> import shardflow as sf
            >>> [len(df) for df in sf.range(10, override_num_blocks=2).to_pandas_refs()]
            [5, 5]
        """
        from shardflow.engine.api.context import current_pandas_conversion

        return self._per_block(_block_to_pandas, current_pandas_conversion())

    def to_numpy_refs(self, *, column: str | list[str] | None = None) -> list[Any]:
        """One NumPy batch per output block: ObjectRefs on the Ray backend (each made by a
        Ray task), the batches themselves on the local backend.

        Args:
            column: One column (each item is then an ndarray), a list of columns, or None
                for all (each item is then a dict of ndarrays).

        Returns:
            A list of ``ObjectRef`` (Ray) or of ndarrays / dicts of ndarrays (local).

        Examples:
            >>> import shardflow as sf
            >>> sf.range(4, override_num_blocks=2).to_numpy_refs(column="id")[1]
            array([2, 3])
        """
        if column is not None and not (
            isinstance(column, str)
            or (isinstance(column, list) and all(isinstance(c, str) for c in column))
        ):
            raise TypeError(
                f"to_numpy_refs: column must be a column name or a list, got {column!r}."
            )
        return self._per_block(_block_to_numpy, column)
