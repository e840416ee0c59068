"""XShards: Orca's data-parallel collection of Python objects, on the shardflow engine.

An XShards is a lazy Dataset whose blocks are partitions (engine/xshards/encoding.py says how a
partition's elements are stored). ``transform_shard`` adds a map over partitions to the plan;
methods that return values (``collect``, ``num_partitions``, ``unique``, ``len``) run it, on
the local backend or on Ray like any Dataset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shardflow.engine.xshards.encoding import decode, short_type, type_name
from shardflow.engine.xshards.execution import (
    block_infos,
    blocks_dataset,
    materialize,
)
from shardflow.engine.xshards.stages import (
    FromDatasetStage,
    MapShards,
    ShardStage,
    ToDatasetStage,
    element_types,
    fn_name,
)


class XShards:
    """A collection of Python objects (shards) processed in parallel, as in Analytics Zoo /
    BigDL Orca, running on the shardflow engine (local or Ray backend).

    A shard is usually a pandas DataFrame, a numpy array or a dict of them. Create an
    XShards with :meth:`XShards.partition`, :func:`shardflow.xshards.read_csv` (and
    ``read_json``, ``read_parquet``), :meth:`XShards.load_pickle` or
    ``Dataset.to_xshards()``. Transformations are lazy; methods that return values run the
    plan.

    Examples:
        >>> import numpy as np
        >>> from shardflow.xshards import XShards
        >>> shards = XShards.partition(np.arange(6), num_shards=2)
        >>> shards.transform_shard(lambda x, k: x * k, 10).collect()
        [array([ 0, 10, 20]), array([30, 40, 50])]
    """

    def __init__(self, dataset: Any, num_partitions: int | None = None, *, _name: str = "XShards"):
        from shardflow.engine.api.dataset import Dataset

        if not isinstance(dataset, Dataset):
            raise TypeError(
                "XShards is made by XShards.partition, shardflow.xshards.read_csv/read_json/"
                "read_parquet, XShards.load_pickle or Dataset.to_xshards(); got "
                f"{type(dataset).__name__}."
            )
        self._lazy = dataset
        self._ds = dataset
        self._num = num_partitions
        self._cached: tuple | None = None
        self._name = _name

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def partition(data: Any, num_shards: int | None = None) -> XShards:
        """Split local in-memory data into an XShards.

        Args:
            data: An ndarray, or a list, tuple or dict of ndarrays, or a nested structure of
                lists, tuples and dicts with ndarrays as leaves. Every ndarray is split along
                its first dimension, which must be the same for all of them.
            num_shards: How many shards to make; by default one per CPU of the backend (at
                most one per item).

        Returns:
            An XShards whose every shard has the structure of ``data``.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> data = {"x": np.arange(8).reshape(4, 2), "y": np.arange(4)}
            >>> shards = XShards.partition(data, num_shards=2)
            >>> shards.collect()[1]["y"]
            array([2, 3])
        """
        from shardflow.engine.xshards.partition import partition_data

        return partition_data(data, num_shards)

    @classmethod
    def load_pickle(
        cls,
        path: str | list[str],
        minPartitions: int | None = None,
        *,
        storage_options: dict | None = None,
        filesystem: Any = None,
    ) -> XShards:
        """Load an XShards saved by :meth:`save_pickle`.

        Warning: loading a pickle can run arbitrary code chosen by whoever wrote the file.
        Load only files you trust, never files from an untrusted source.

        Args:
            path: The folder written by ``save_pickle`` (or files, globs, a list of them);
                local, ``s3://``, ``gs://`` or any fsspec path.
            minPartitions: The least number of partitions; files are split between their
                batches of elements to reach it where they hold enough batches.
            storage_options: fsspec options (credentials, endpoint) to reach ``path``.
            filesystem: An fsspec or pyarrow filesystem to read ``path`` with.

        Returns:
            An XShards with one partition per file (or more, see ``minPartitions``).

        Raises:
            FileNotFoundError: When ``path`` does not exist.
        """
        from shardflow.engine.xshards.pickle_io import load_pickle

        return load_pickle(path, minPartitions, storage_options, filesystem)

    @classmethod
    def _from_dataset(cls, dataset: Any) -> XShards:
        from shardflow.engine.api.context import DataContext

        context = DataContext.get_current()
        stage = FromDatasetStage(context.target_min_block_size, context.target_max_block_size)
        return cls(dataset._with(MapShards(stage)))

    def _derive(self, dataset: Any, num_partitions: int | None, name: str) -> XShards:
        return XShards(dataset, num_partitions, _name=name)

    def _map(self, stage: ShardStage) -> XShards:
        return self._derive(self._ds._with(MapShards(stage)), self._num, stage.name)

    # -- transformations (lazy) ---------------------------------------------------------

    def transform_shard(self, func: Callable[..., Any], *args: Any) -> XShards:
        """Apply ``func(shard, *args)`` to every shard, in parallel; lazy.

        On the local backend the function runs in worker processes (like ``Dataset.map``),
        on Ray in Ray tasks. Pass large read-only inputs as a :class:`SharedValue`, which is
        shipped once per worker rather than with every task.

        Args:
            func: Function from a shard (and ``args``) to the new shard.
            args: More arguments for ``func``.

        Returns:
            A new XShards with the same partitions.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> XShards.partition(np.arange(4), 2).transform_shard(np.sum).collect()
            [np.int64(1), np.int64(5)]
        """
        if not callable(func):
            raise TypeError(f"transform_shard needs a function, got {type(func).__name__}.")
        stage = ShardStage(func, args, f"transform_shard({fn_name(func)})", python_heavy=True)
        return self._map(stage)

    def __getitem__(self, key: Any) -> XShards:
        """Each shard's ``shard[key]`` (a column of DataFrame shards, a key of dict shards).

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> shards = sf.from_pandas(pd.DataFrame({"a": [1, 1, 2]})).to_xshards()
            >>> shards["a"].unique()
            array([1, 2])
        """
        return self._map(ShardStage(_select, (key,), f"getitem({key!r})"))

    def __iter__(self) -> Any:
        raise TypeError("An XShards is not iterable; use collect() to get its shards.")

    def repartition(self, num_partitions: int) -> XShards:
        """A new XShards with exactly ``num_partitions`` partitions; lazy.

        DataFrames, lists, ndarrays and dicts of ndarrays are concatenated in order and cut
        into partitions of equal size (a partition gets no shard when there is too little
        data); shards of other types are spread evenly, whole, over the partitions.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> shards = XShards.partition(np.arange(6), 3).repartition(2)
            >>> shards.num_partitions(), shards.collect()
            (2, [array([0, 1, 2]), array([3, 4, 5])])
        """
        from shardflow.engine.xshards.exchange import repartition

        return repartition(self, _positive_int(num_partitions, "num_partitions"))

    def partition_by(self, cols: str | Sequence[str], num_partitions: int | None = None) -> XShards:
        """Repartition shards of pandas DataFrames so that rows with equal values in ``cols``
        share a partition; lazy.

        Args:
            cols: A column name, or a list of them.
            num_partitions: Partitions of the result; by default as many as now. A
                partition that receives no row holds no shard.

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> df = pd.DataFrame({"k": [1, 2, 1, 2], "v": [1, 2, 3, 4]})
            >>> parts = sf.from_pandas(df).to_xshards().partition_by("k", 2).collect()
            >>> sorted(sorted(p["k"].unique().tolist()) for p in parts)
            [[1], [2]]
        """
        from shardflow.engine.xshards.exchange import partition_by

        if isinstance(cols, str):
            cols = [cols]
        valid = isinstance(cols, (list, tuple)) and cols and all(isinstance(c, str) for c in cols)
        if not valid:
            raise TypeError(f"partition_by needs a column name or a list of them, got {cols!r}.")
        cols = list(cols)
        if num_partitions is None:
            num_partitions = self.num_partitions()
        return partition_by(self, cols, _positive_int(num_partitions, "num_partitions"))

    def zip(self, other: XShards) -> XShards:
        """Pair this XShards' shards with ``other``'s: each shard becomes ``(mine, theirs)``.

        Both need the same number of partitions and of shards in each partition (as when one
        was made from the other by ``transform_shard``); lazy.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> x = XShards.partition(np.arange(4), 2)
            >>> x.zip(x.transform_shard(lambda a: -a)).collect()[0]
            (array([0, 1]), array([ 0, -1]))
        """
        from shardflow.engine.xshards.exchange import zip_shards

        if not isinstance(other, XShards):
            raise TypeError(f"zip needs another XShards, got {type(other).__name__}.")
        if self._num is not None and other._num is not None and self._num != other._num:
            raise ValueError(
                "The two XShards should have the same number of partitions; they have "
                f"{self._num} and {other._num}."
            )
        return zip_shards(self, other)

    def split(self) -> list[XShards]:
        """Split an XShards whose shards are tuples (or lists) of the same length ``n`` into
        ``n`` XShards, the i-th holding every shard's i-th item.

        Runs the plan once (and keeps its partitions) to check the shards.

        Raises:
            ValueError: When a shard is not a tuple or list, or their lengths differ.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> x, y = XShards.partition((np.arange(4), np.ones(4)), 2).split()
            >>> x.collect()
            [array([0, 1]), array([2, 3])]
        """
        infos = self._infos()
        length: int | None = None
        for index, info in enumerate(infos):
            for name, seq in zip(info.types, info.seqs):
                if seq is None:
                    raise ValueError(
                        "split() needs every shard to be a tuple or list (of the same length); "
                        f"partition {index} holds a {short_type(name)}."
                    )
                if length is None:
                    length = seq
                elif seq != length:
                    raise ValueError(
                        "Cannot split this XShards because its shards have different lengths: "
                        f"{length} and {seq} (partition {index})."
                    )
        if length is None:
            raise ValueError("split() found no shard to split: this XShards is empty.")
        return [self._map(ShardStage(_select, (i,), f"split[{i}]")) for i in range(length)]

    # -- results (run the plan) ---------------------------------------------------------

    def collect(self) -> list[Any]:
        """All shards, in partition order.

        Raises:
            TypeError: When shards differ in type (a ``transform_shard`` function returned
                different types for different shards).

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> XShards.partition(np.arange(3), 3).collect()
            [array([0]), array([1]), array([2])]
        """
        partitions = [decode(block) for block in self._ds._iter_blocks()]
        element_types(
            [(i, [type_name(e) for e in part]) for i, part in enumerate(partitions)], "collect()"
        )
        return [element for part in partitions for element in part]

    def num_partitions(self) -> int:
        """The number of partitions (runs the plan only when it does not say).

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> XShards.partition(np.arange(10), 4).num_partitions()
            4
        """
        if self._num is None:
            self.cache()
        return self._num

    def unique(self) -> np.ndarray:
        """The distinct values of shards of pandas Series, in order of first appearance.

        Raises:
            TypeError: When the shards are not Series (select a column first:
                ``shards["col"].unique()``).
        """
        stage = ShardStage(_unique_of_partition, (), "unique", per_element=False)
        results = self._map(stage).collect()
        found = [r for r in results if r[0] != "ok"]
        if found:
            raise TypeError(
                "unique() applies to XShards of pandas Series; these shards hold "
                f"{short_type(found[0][1])}. Select a column first: shards['col'].unique()."
            )
        import pandas as pd

        arrays = [r[1] for r in results]
        if not arrays:
            return np.array([])
        return pd.unique(np.concatenate(arrays, axis=0))

    def __len__(self) -> int:
        """The total length of all shards (rows of DataFrames, items of lists ...; 1 for a
        shard without a length)."""
        stage = ShardStage(_length_of, (), "len")
        return int(sum(self._map(stage).collect()))

    def save_pickle(
        self,
        path: str,
        batchSize: int = 10,
        *,
        storage_options: dict | None = None,
        filesystem: Any = None,
    ) -> XShards:
        """Save the shards as pickle files, one per partition, under the folder ``path``.

        Args:
            path: A folder that does not exist or is empty (local, ``s3://``, ...).
            batchSize: Shards pickled together in one batch of a file.
            storage_options: fsspec options (credentials, endpoint) to reach ``path``.
            filesystem: An fsspec or pyarrow filesystem to write ``path`` with.

        Returns:
            This XShards.
        """
        from shardflow.engine.xshards.pickle_io import save_pickle

        save_pickle(self, path, batchSize, storage_options, filesystem)
        return self

    def to_dataset(self) -> Any:
        """This XShards as a Dataset, without copying shards stored as Arrow data.

        DataFrame shards give their rows (the index is dropped, as ``from_pandas`` does),
        dicts of ndarrays their keys as columns, ndarrays a column ``data``.

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> shards = sf.from_pandas(pd.DataFrame({"a": [1, 2]})).to_xshards()
            >>> shards.transform_shard(lambda df: df.assign(b=df.a * 2)).to_dataset().take_all()
            [{'a': 1, 'b': 2}, {'a': 2, 'b': 4}]
        """
        return self._ds._with(MapShards(ToDatasetStage()))

    def to_ray(self) -> Any:
        """Put the partitions in Ray's object store (Ray backend only).

        Returns:
            A :class:`RayXShards` holding one object reference per partition (a list of its
            shards) and the address of the node that holds it.
        """
        from shardflow.engine.xshards.ray_shards import to_ray

        return to_ray(self)

    # -- caching ------------------------------------------------------------------------

    def cache(self) -> XShards:
        """Run the plan now and keep the partitions (in memory, or Ray's object store), so
        later uses do not run it again."""
        if self._cached is None:
            refs, metas = materialize(self._ds)
            self._cached = (refs, metas)
            self._num = len(refs)
            self._ds = blocks_dataset(refs, metas, self._name)
        return self

    compute = cache

    def uncache(self) -> XShards:
        """Forget the kept partitions; later uses run the plan again."""
        if self._cached is not None:
            self._cached = None
            self._ds = self._lazy
        return self

    def is_cached(self) -> bool:
        return self._cached is not None

    def _partitions(self) -> tuple:
        """(references, metadata) of the partitions: the kept ones, or a fresh run."""
        if self._cached is not None:
            return self._cached
        return materialize(self._ds)

    def _infos(self) -> list:
        refs, metas = self.cache()._cached
        return block_infos(refs, metas)

    def __repr__(self) -> str:
        count = "?" if self._num is None else self._num
        return f"XShards(num_partitions={count}, last={self._name})"


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _select(element: Any, key: Any) -> Any:
    if not hasattr(element, "__getitem__"):
        raise TypeError(
            f"No selection operation available for shards of type {type(element).__name__}."
        )
    try:
        return element[key]
    except (KeyError, IndexError) as exc:
        raise KeyError(
            f"Invalid key {key!r} for a shard of type {type(element).__name__}."
        ) from exc


def _unique_of_partition(elements: list[Any]) -> list[tuple]:
    import pandas as pd

    out = []
    for element in elements:
        if not isinstance(element, pd.Series):
            out.append(("type", type_name(element)))
        else:
            out.append(("ok", pd.unique(element.to_numpy())))
    return out


def _length_of(element: Any) -> int:
    return len(element) if hasattr(element, "__len__") else 1
