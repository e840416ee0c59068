"""Functions that create Datasets: ``range``, ``from_*`` and ``read_datasource``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from shardflow.engine.api.context import DataContext
from shardflow.engine.api.dataset import Dataset
from shardflow.engine.plan.logical import BlocksSource, LogicalPlan, ReadSource
from shardflow.sdk.block import numpy_batch_to_block, rows_to_block, to_block
from shardflow.sdk.datasource import Datasource
from shardflow.sdk.optional import require

if TYPE_CHECKING:
    import pandas


def _num_blocks(n_rows: int, parallelism: int, override_num_blocks: int | None) -> int:
    if override_num_blocks is not None:
        if (
            isinstance(override_num_blocks, bool)
            or not isinstance(override_num_blocks, int)
            or override_num_blocks < 1
        ):
            raise ValueError(
                f"override_num_blocks must be a positive int, got {override_num_blocks!r}."
            )
        wanted = override_num_blocks
    elif parallelism is not None and parallelism > 0:
        wanted = parallelism
    else:
        wanted = max(4, 2 * DataContext.get_current().effective_num_cpus())
    return max(1, min(wanted, n_rows))


def _resolve_parallelism(parallelism: int, override_num_blocks: int | None) -> int:
    if override_num_blocks is not None:
        if (
            isinstance(override_num_blocks, bool)
            or not isinstance(override_num_blocks, int)
            or override_num_blocks < 1
        ):
            raise ValueError(
                f"override_num_blocks must be a positive int, got {override_num_blocks!r}."
            )
        return override_num_blocks
    if not isinstance(parallelism, int) or (parallelism < 1 and parallelism != -1):
        raise ValueError(
            f"parallelism must be a positive int or -1 (automatic), got {parallelism!r}."
        )
    return parallelism


def range(
    n: int,
    *,
    parallelism: int = -1,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
) -> Dataset:
    """A dataset of the integers ``0 .. n-1`` in column ``id``.

    Args:
        n: Number of rows.
        parallelism: Deprecated spelling of ``override_num_blocks`` (as in Ray Data).
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Number of read tasks; automatic by default.

    Examples:
        >>> import shardflow as sf
        >>> sf.range(3).take_all()
        [{'id': 0}, {'id': 1}, {'id': 2}]
    """
    from shardflow.connectors.range import RangeDatasource

    return read_datasource(
        RangeDatasource(n),
        parallelism=parallelism,
        concurrency=concurrency,
        override_num_blocks=override_num_blocks,
    )


def range_tensor(
    n: int,
    *,
    shape: tuple[int, ...] = (1,),
    parallelism: int = -1,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
) -> Dataset:
    """A dataset of ``n`` tensors of ``shape`` in column ``data``; row i is filled with i.

    The column is a fixed-shape tensor column (Arrow's canonical ``fixed_shape_tensor``);
    NumPy batches give an array of shape ``(rows,) + shape``.

    Args:
        n: Number of rows.
        shape: The shape of each row's tensor.
        parallelism: Deprecated spelling of ``override_num_blocks`` (as in Ray Data).
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Number of read tasks; automatic by default.

    Returns:
        A Dataset of int64 tensors.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range_tensor(1000, shape=(2, 2))
        >>> ds.map_batches(lambda b: {"data": b["data"] * 2}).take(2)[1]["data"].tolist()
        [[2, 2], [2, 2]]
        >>> ds.take_batch(4)["data"].shape
        (4, 2, 2)
    """
    from shardflow.connectors.range import RangeDatasource

    source = RangeDatasource(n, column="data", tensor_shape=shape)
    return read_datasource(
        source,
        parallelism=parallelism,
        concurrency=concurrency,
        override_num_blocks=override_num_blocks,
    )


def from_torch(dataset: Any, local_read: bool = False) -> Dataset:
    """A dataset of the items of a PyTorch ``Dataset`` or ``IterableDataset``, in column ``item``.

    The items are read in order by one streaming read task, as in Ray Data. Items Arrow has a
    type for (numbers, strings) become plain columns; tensors become NumPy tensor columns;
    other values (tuples of tensors, dicts, images) are kept as Python objects.

    Args:
        dataset: A ``torch.utils.data.Dataset`` (map-style: ``__len__`` and ``__getitem__``)
            or ``IterableDataset``.
        local_read: Accepted for compatibility: the read runs where the driver is on the
            local backend; on Ray it asks for no CPU, as Ray Data's local reads do.

    Returns:
        A Dataset with one row per item.

    Examples:
        >>> import torch, shardflow as sf  # doctest: +SKIP
        >>> data = torch.utils.data.TensorDataset(torch.arange(4.0))  # doctest: +SKIP
        >>> sf.from_torch(data).count()  # doctest: +SKIP
        4
    """
    from shardflow.connectors.torch.datasource import TorchDatasource

    require("torch", "torch", "from_torch")
    if not isinstance(local_read, bool):
        raise TypeError(f"from_torch: local_read must be a bool, got {local_read!r}.")
    return read_datasource(TorchDatasource(dataset), override_num_blocks=1)


def _split_block(block: pa.Table, num_blocks: int) -> list[pa.Table]:
    if block.num_rows == 0:
        return [block]
    bounds = np.linspace(0, block.num_rows, num_blocks + 1, dtype=np.int64)
    return [
        block.slice(int(lo), int(hi - lo)) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo
    ]


def _from_blocks(blocks: list[pa.Table], name: str) -> Dataset:
    return Dataset(LogicalPlan(BlocksSource(tuple(blocks), name)))


def from_items(
    items: list[Any], *, parallelism: int = -1, override_num_blocks: int | None = None
) -> Dataset:
    """A dataset from a list of rows. Dicts become rows; other values go in column ``item``.

    ``items`` may also be a NumPy array: its rows (elements along the first axis) are the
    items. Values Arrow has no type for become a column of Python objects; torch tensors
    become NumPy arrays.

    Examples:
        >>> import shardflow as sf
        >>> sf.from_items([{"a": 1}, {"a": 2}]).count()
        2
        >>> sf.from_items([1, 2]).take_all()
        [{'item': 1}, {'item': 2}]
    """
    if isinstance(items, np.ndarray):
        items = list(items) if items.ndim else [items.item()]
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"from_items takes a list (or a NumPy array), got {type(items).__name__}.")
    if not items:
        return _from_blocks([], "FromItems")
    rows = [item if isinstance(item, dict) else {"item": item} for item in items]
    n = _num_blocks(len(rows), parallelism, override_num_blocks)
    bounds = np.linspace(0, len(rows), n + 1, dtype=np.int64)
    blocks = [
        rows_to_block(rows[int(lo) : int(hi)]) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo
    ]
    return _from_blocks(blocks, "FromItems")


def from_blocks(blocks: list[Any]) -> Dataset:
    """A dataset of the given blocks, one block each: pyarrow Tables or pandas DataFrames.

    Examples:
        >>> import pandas as pd, pyarrow as pa, shardflow as sf
        >>> sf.from_blocks([pa.table({"a": [1]}), pd.DataFrame({"a": [2]})]).take_all()
        [{'a': 1}, {'a': 2}]
    """
    if not isinstance(blocks, (list, tuple)):
        raise TypeError(f"from_blocks takes a list of blocks, got {type(blocks).__name__}.")
    converted = []
    for block in blocks:
        is_frame = type(block).__module__.startswith("pandas") and hasattr(block, "columns")
        if not (isinstance(block, pa.Table) or is_frame):
            raise TypeError(
                "from_blocks takes pyarrow Tables or pandas DataFrames, got "
                f"{type(block).__name__}."
            )
        converted.append(to_block(block))
    return _from_blocks(converted, "FromBlocks")


def from_daft(df: Any) -> Dataset:
    """A dataset from a Daft DataFrame (needs ``pip install daft``); runs the DataFrame.

    Examples:
        >>> import daft, shardflow as sf  # doctest: +SKIP
        >>> sf.from_daft(daft.from_pydict({"a": [1, 2]})).count()  # doctest: +SKIP
        2
    """
    if type(df).__module__.split(".")[0] != "daft" or not hasattr(df, "to_arrow"):
        raise TypeError(f"from_daft takes a daft.DataFrame, got {type(df).__name__}.")
    return _from_blocks([to_block(df.to_arrow())], "FromDaft")


def from_huggingface(
    dataset: Any, parallelism: int = -1, override_num_blocks: int | None = None
) -> Dataset:
    """A dataset from a Hugging Face ``datasets.Dataset`` or ``IterableDataset``.

    A ``Dataset`` is converted through its Arrow table (selections and shuffles applied);
    an ``IterableDataset`` is iterated in batches.

    Examples:
        >>> import datasets, shardflow as sf  # doctest: +SKIP
        >>> hf = datasets.Dataset.from_dict({"a": [1, 2, 3]})  # doctest: +SKIP
        >>> sf.from_huggingface(hf).count()  # doctest: +SKIP
        3
    """
    module = type(dataset).__module__.split(".")[0]
    if module != "datasets" or not hasattr(dataset, "with_format"):
        raise TypeError(
            "from_huggingface takes a datasets.Dataset or datasets.IterableDataset, got "
            f"{type(dataset).__name__}."
        )
    if hasattr(dataset, "num_rows") and hasattr(dataset, "__getitem__"):
        table = dataset.with_format("arrow")[:]
        table = to_block(table)
        n = _num_blocks(table.num_rows, parallelism, override_num_blocks)
        return _from_blocks(_split_block(table, n), "FromHuggingFace")
    batches = [to_block(b) for b in dataset.with_format("arrow").iter(batch_size=4096)]
    return _from_blocks(batches, "FromHuggingFace")


def from_pandas(
    dfs: pandas.DataFrame | list[pandas.DataFrame], *, override_num_blocks: int | None = None
) -> Dataset:
    """A dataset from one pandas DataFrame or a list of them (one block each).

    Examples:
        >>> import pandas as pd, shardflow as sf
        >>> sf.from_pandas(pd.DataFrame({"a": [1, 2, 3]})).sum("a")
        6
    """
    import pandas as pd

    dfs = [dfs] if isinstance(dfs, pd.DataFrame) else list(dfs)
    if not all(isinstance(df, pd.DataFrame) for df in dfs):
        raise TypeError("from_pandas takes a pandas.DataFrame or a list of them.")
    for df in dfs:
        duplicated = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
        if duplicated:
            raise ValueError(
                f"from_pandas: the DataFrame has duplicate column names {duplicated}; a "
                "dataset's columns need unique names. Rename them first (df.columns = [...])."
            )
    from shardflow.sdk.pandas_batches import pandas_to_block

    # Each column remembers its pandas dtype, so that to_pandas and pandas batches give the
    # frame back as it was (Ray Data keeps such frames as pandas blocks).
    blocks = [pandas_to_block(df, record_dtypes=True) for df in dfs]
    if override_num_blocks is not None:
        from shardflow.sdk.block import concat_blocks

        whole = concat_blocks(blocks)
        blocks = _split_block(whole, _num_blocks(whole.num_rows, -1, override_num_blocks))
    return _from_blocks(blocks, "FromPandas")


def from_numpy(
    ndarrays: np.ndarray | list[np.ndarray], *, override_num_blocks: int | None = None
) -> Dataset:
    """A dataset from NumPy arrays, in column ``data`` (multi-dimensional arrays become tensors).

    Examples:
        >>> import numpy as np, shardflow as sf
        >>> sf.from_numpy(np.zeros((4, 2, 2))).take_batch(4)["data"].shape
        (4, 2, 2)
    """
    arrays = [ndarrays] if isinstance(ndarrays, np.ndarray) else list(ndarrays)
    if not all(isinstance(a, np.ndarray) for a in arrays):
        raise TypeError("from_numpy takes a numpy.ndarray or a list of them.")
    blocks = [numpy_batch_to_block({"data": a}) for a in arrays]
    if override_num_blocks is not None and len(blocks) == 1:
        blocks = _split_block(blocks[0], _num_blocks(blocks[0].num_rows, -1, override_num_blocks))
    return _from_blocks(blocks, "FromNumpy")


def from_arrow(
    tables: pa.Table | list[pa.Table], *, override_num_blocks: int | None = None
) -> Dataset:
    """A dataset from one pyarrow Table or a list of them.

    Examples:
        >>> import pyarrow as pa, shardflow as sf
        >>> sf.from_arrow(pa.table({"x": [1, 2]})).count()
        2
    """
    tables = [tables] if isinstance(tables, (pa.Table, pa.RecordBatch)) else list(tables)
    blocks = [to_block(t) for t in tables]
    if override_num_blocks is not None and len(blocks) == 1:
        blocks = _split_block(blocks[0], _num_blocks(blocks[0].num_rows, -1, override_num_blocks))
    return _from_blocks(blocks, "FromArrow")


def read_datasource(
    datasource: Datasource | str,
    *,
    parallelism: int = -1,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    **read_args: Any,
) -> Dataset:
    """A dataset read through a Datasource, or through a registered connector by name.

    Args:
        datasource: A Datasource, or the name of a connector (registered in code or
            installed as a package with a ``shardflow.connectors`` entry point).
        parallelism: Requested number of read tasks; -1 chooses automatically.
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Same as ``parallelism`` (Ray Data's newer name).
        read_args: Arguments for the connector's Datasource when a name is given. With a
            Datasource object they go where Ray Data sends them: to its ``create_reader``
            (whose reader then plans the read tasks), or to its ``prepare_read`` for a
            datasource of Ray Data's older API. A datasource with neither does not take
            them, and passing them raises TypeError (Ray Data ignores them silently).

    Returns:
        A lazy Dataset; nothing is read until it is consumed.

    Examples:
        >>> import pyarrow as pa
        >>> import shardflow as sf
        >>> from shardflow.sdk import BlockMetadata, Datasource, ReadTask
        >>> class Repeat(Datasource):
        ...     def create_reader(self, value=0):
        ...         return _Reader(value)
        >>> class _Reader:
        ...     def __init__(self, value):
        ...         self.value = value
        ...     def estimate_inmemory_data_size(self):
        ...         return None
        ...     def get_read_tasks(self, parallelism):
        ...         table = pa.table({"v": [self.value] * 2})
        ...         return [ReadTask(lambda: [table], BlockMetadata(2, None))]
        >>> sf.read_datasource(Repeat(), value=7).take_all()
        [{'v': 7}, {'v': 7}]
    """
    if isinstance(datasource, str):
        from shardflow.sdk.registry import get_registry

        spec = get_registry().get(datasource)
        if spec.datasource is None:
            raise ValueError(
                f"Connector {datasource!r} (from {spec.package}) has no datasource; it can only write."
            )
        datasource = spec.datasource(**read_args)
    elif _has_method(datasource, "create_reader"):
        datasource = LegacyReaderSource(datasource, datasource.create_reader(**read_args))
    elif _has_method(datasource, "prepare_read") and not _plans_its_reads(datasource):
        datasource = LegacyReaderSource(datasource, None, read_args)
    elif read_args:
        raise TypeError(
            f"read_datasource got arguments {sorted(read_args)} that "
            f"{type(datasource).__name__} does not take: they go to a datasource's "
            "create_reader (or prepare_read), and it has neither. Pass them to the "
            "Datasource's constructor instead."
        )
    if not isinstance(datasource, Datasource) and not hasattr(datasource, "get_read_tasks"):
        raise TypeError(
            f"read_datasource needs a shardflow.sdk.Datasource, got {type(datasource).__name__}."
        )
    parallelism = _resolve_parallelism(parallelism, override_num_blocks)
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ValueError(f"concurrency must be a positive int or None, got {concurrency!r}.")
    return Dataset(LogicalPlan(ReadSource(datasource, parallelism, concurrency=concurrency)))


def _has_method(obj: Any, name: str) -> bool:
    return callable(getattr(type(obj), name, None))


def _plans_its_reads(datasource: Any) -> bool:
    """Whether the datasource implements get_read_tasks itself (Ray Data's current API)."""
    method = getattr(type(datasource), "get_read_tasks", None)
    return method is not None and method is not Datasource.get_read_tasks


class LegacyReaderSource(Datasource):
    """A datasource of Ray Data's older API: the read planned by the reader its
    ``create_reader(**read_args)`` made, or by its ``prepare_read(parallelism, **read_args)``."""

    def __init__(self, datasource: Any, reader: Any, read_args: dict | None = None):
        self._datasource, self._reader, self._read_args = datasource, reader, dict(read_args or {})

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[Any]:
        if self._reader is not None:
            return self._reader.get_read_tasks(parallelism)
        return self._datasource.prepare_read(parallelism, **self._read_args)

    def estimate_inmemory_data_size(self) -> int | None:
        source = self._reader if self._reader is not None else self._datasource
        estimate = getattr(source, "estimate_inmemory_data_size", None)
        try:
            return None if estimate is None else estimate()
        except NotImplementedError:
            return None

    def get_name(self) -> str:
        return self._datasource.get_name() if hasattr(self._datasource, "get_name") else "Legacy"
