"""XShards: Orca's data-parallel collection of Python objects, on the shardflow engine.

An XShards is a lazy Dataset whose blocks are partitions (engine/xshards/encoding.py says how a
partition's elements are stored). ``transform_shard`` adds a map over partitions to the plan;
methods that return values (``collect``, ``num_partitions``, ``unique``, ``len``) run it, on
the local backend or on Ray like any Dataset. On Spark (``init_orca_context(backend="spark")``)
the same class runs over an RDD (engine/xshards/spark/).

Caching follows Orca: every XShards is marked to keep its partitions once they are computed
(``is_cached()``), and an XShards derived from it (``transform_shard``, ``repartition``, ...)
unmarks it unless the user called ``cache()`` or ``to_lazy()``. Unlike Orca, nothing runs when
an XShards is made (Orca's eager mode, ``OrcaContext._eager_mode = True``, computes each one
at once): a derived XShards starts from the partitions its parent had computed when it was
derived, and releases them once it has computed its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from shardflow.engine.xshards.encoding import BlockInfo, decode, type_name
from shardflow.engine.xshards.errors import XShardsTypeError, XShardsValueError
from shardflow.engine.xshards.execution import (
    block_infos,
    blocks_dataset,
    materialize,
)
from shardflow.engine.xshards.frame_ops import FrameOps
from shardflow.engine.xshards.stages import (
    FromDatasetStage,
    MapShards,
    ShardStage,
    ToDatasetStage,
    element_types,
    fn_name,
    select_key,
)

Build = Callable[[list[Any]], Any]


def _is_rdd(value: Any) -> bool:
    return type(value).__module__.startswith("pyspark") and hasattr(value, "mapPartitions")


class XShards(FrameOps):
    """A collection of Python objects (shards) processed in parallel, as in Analytics Zoo /
    BigDL Orca, running on the shardflow engine (local or Ray backend) or on Spark.

    A shard is usually a pandas DataFrame, a numpy array or a dict of them. Create an
    XShards with :meth:`XShards.partition`, :func:`shardflow.xshards.read_csv` (and
    ``read_json``, ``read_parquet``), :meth:`XShards.load_pickle`, ``Dataset.to_xshards()``
    or, on Spark, ``XShards(rdd)``. Transformations are lazy; methods that return values run
    the plan.

    Examples:
        >>> import numpy as np
        >>> from shardflow.xshards import XShards
        >>> shards = XShards.partition(np.arange(6), num_shards=2)
        >>> shards.transform_shard(lambda x, k: x * k, 10).collect()
        [array([ 0, 10, 20]), array([30, 40, 50])]
    """

    def __new__(cls, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if cls is XShards and _is_rdd(data):
            from shardflow.engine.xshards.spark.shards import SparkBackedXShards

            return object.__new__(SparkBackedXShards)
        return object.__new__(cls)

    def __init__(
        self,
        dataset: Any,
        num_partitions: int | None = None,
        *,
        _name: str = "XShards",
        transient: bool = False,
    ):
        from shardflow.engine.api.dataset import Dataset

        if not isinstance(dataset, Dataset):
            raise TypeError(
                "XShards is made by XShards.partition, shardflow.xshards.read_csv/read_json/"
                "read_parquet, XShards.load_pickle, Dataset.to_xshards() or, on Spark, "
                f"XShards(rdd); got {type(dataset).__name__}."
            )
        self._setup(lambda bases: dataset, [], num_partitions, _name, False, transient)

    def _setup(
        self,
        build: Build,
        parents: list[Any],
        num: int | None,
        name: str,
        lazy: bool,
        transient: bool,
    ) -> None:
        self._build = build
        self._parents = [[parent._snapshot(), parent] for parent in parents]
        self._num = num
        self._name = name
        self._lazy_mode = lazy or transient
        self._marked = not self._lazy_mode
        self._user_caching = False
        self._blocks: tuple[list[Any], list[Any]] | None = None
        self._built: Any = None

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def partition(data: Any, num_shards: int | None = None) -> XShards:
        """Split local in-memory data into an XShards (on Spark: an RDD, one shard per slice).

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
        return XShards(dataset._with(MapShards(stage)))

    # -- lineage and caching ------------------------------------------------------------

    def _snapshot(self) -> Any:
        """The Dataset of this XShards' computed partitions, or None when none are kept."""
        if self._blocks is None:
            return None
        return blocks_dataset(*self._blocks, self._name)

    def _lineage(self) -> Any:
        """The plan that computes this XShards from its sources, ignoring every cache."""
        return self._build([parent._lineage() for _, parent in self._parents])

    @property
    def _ds(self) -> Any:
        """The Dataset to run now: the kept partitions, or the plan over the partitions the
        parents had when this XShards was derived (their plans where they had none)."""
        if self._blocks is not None:
            return blocks_dataset(*self._blocks, self._name)
        if self._built is None:
            bases = [snap if snap is not None else p._lineage() for snap, p in self._parents]
            self._built = self._build(bases)
        return self._built

    def _partitions(self) -> tuple[list[Any], list[Any]]:
        """(references, metadata) of the partitions: the kept ones, or a fresh run (kept
        when this XShards is marked cached)."""
        if self._blocks is not None:
            return self._blocks
        refs, metas = materialize(self._ds)
        self._num = len(refs)
        if self._marked:
            self._blocks = (refs, metas)
            self._built = None
            for pair in self._parents:
                pair[0] = None  # the parents' partitions are no longer needed
        return refs, metas

    def _derive(
        self,
        build: Build,
        num: int | None,
        name: str,
        others: Sequence[XShards] = (),
        *,
        transient: bool = False,
        uncache_parents: bool = True,
    ) -> XShards:
        parents = [self, *others]
        child = object.__new__(XShards)
        child._setup(build, parents, num, name, self._lazy_mode, transient)
        if uncache_parents and not transient:
            for parent in parents:
                parent._uncache_unless_user()
        return child._eager()

    def _eager(self) -> XShards:
        from shardflow.engine.xshards.orca_context import OrcaContext

        if OrcaContext._eager_mode and self._marked:
            self.compute()
        return self

    def _map(self, stage: ShardStage, transient: bool = False) -> XShards:
        return self._derive(
            lambda bases: bases[0]._with(MapShards(stage)),
            self._num,
            stage.name,
            transient=transient,
        )

    def _map_keep_parent(self, fn: Callable[..., Any], args: tuple, name: str) -> XShards:
        stage = ShardStage(fn, args, name, python_heavy=True)
        return self._derive(
            lambda bases: bases[0]._with(MapShards(stage)),
            self._num,
            name,
            uncache_parents=False,
        )

    def cache(self) -> XShards:
        """Keep the partitions once they are computed (Orca's ``cache``: lazy, as Spark's).

        A cached XShards is computed once; XShards derived from it later do not unmark it.
        Call :meth:`compute` to compute it now.
        """
        self._user_caching = True
        self._marked = True
        return self

    def uncache(self) -> XShards:
        """Forget the kept partitions; later uses run the plan again."""
        self._user_caching = False
        self._marked = False
        self._blocks = None
        self._built = None
        return self

    def _release_to(self, children: list[Any]) -> None:
        self._uncache_unless_user()

    def _uncache_unless_user(self) -> None:
        if not self._user_caching:
            self.uncache()

    def is_cached(self) -> bool:
        """Whether the partitions are kept once computed (Orca's meaning: True for a new
        XShards until an XShards is derived from it, or after ``cache()``)."""
        return self._marked

    def compute(self) -> XShards:
        """Compute the partitions now (and keep them when this XShards is cached)."""
        self._partitions()
        return self

    def to_lazy(self) -> XShards:
        """Make later operations lazy, as Orca's ``to_lazy``: XShards derived from this one
        are not cached, and deriving them does not uncache this one.

        Returns:
            This XShards.
        """
        self._lazy_mode = True
        self._user_caching = True
        return self

    # -- transformations (lazy) ---------------------------------------------------------

    def transform_shard(self, func: Callable[..., Any], *args: Any) -> XShards:
        """Apply ``func(shard, *args)`` to every shard, in parallel; lazy.

        On the local backend the function runs in worker processes (like ``Dataset.map``),
        on Ray in Ray tasks, on Spark in Spark tasks. Pass large read-only inputs as a
        :class:`SharedValue`, which is shipped once per worker rather than with every task.

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

        The result is not cached, and this XShards stays cached (as in Orca).

        Raises:
            XShardsKeyError: "Invalid key for this XShards" when a shard has no such key
                (also a ``KeyError`` and a ``RuntimeError``), when the result runs.
            XShardsTypeError: "No selection operation available for this XShards" when a
                shard cannot be indexed.

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> shards = sf.from_pandas(pd.DataFrame({"a": [1, 1, 2]})).to_xshards()
            >>> shards["a"].unique()
            array([1, 2])
        """
        return self._map(ShardStage(select_key, (key,), f"getitem({key!r})"), transient=True)

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

        num = positive_int(num_partitions, "num_partitions")
        return self._derive(lambda bases: repartition(bases[0], num), num, "Repartition")

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

        columns = column_list(cols, "partition_by")
        num = self.num_partitions() if num_partitions is None else num_partitions
        num = positive_int(num, "num_partitions")
        return self._derive(lambda bases: partition_by(bases[0], columns, num), num, "PartitionBy")

    def zip(self, other: XShards) -> XShards:
        """Pair this XShards' shards with ``other``'s: each shard becomes ``(mine, theirs)``.

        Both need the same number of partitions and of shards in each partition (as when one
        was made from the other by ``transform_shard``). Both are computed now to check that,
        as Orca does (and kept, when they are cached).

        Raises:
            XShardsTypeError: When ``other`` is not an XShards.
            XShardsValueError: When the partitions or their shard counts differ.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> x = XShards.partition(np.arange(4), 2)
            >>> x.zip(x.transform_shard(lambda a: -a)).collect()[0]
            (array([0, 1]), array([ 0, -1]))
        """
        from shardflow.engine.xshards.exchange import check_zip_counts, zip_shards

        if not isinstance(other, XShards):
            raise XShardsTypeError(
                f"other should be a SparkXShards (an XShards); got {type(other).__name__}."
            )
        if type(other) is not type(self):
            raise XShardsTypeError(
                "other should be a SparkXShards on the same backend: one XShards runs on "
                "Spark and the other does not."
            )
        check_zip_counts(self._shard_counts(), other._shard_counts())
        return self._derive(lambda bases: zip_shards(bases[0], bases[1]), self._num, "Zip", [other])

    def split(self) -> list[XShards]:
        """Split an XShards whose shards are tuples (or lists) of the same length ``n`` into
        ``n`` XShards, the i-th holding every shard's i-th item.

        Runs the plan once (and keeps its partitions) to check the shards. As in Orca, an
        XShards whose shards are not tuples or lists (or have one item) is returned alone:
        ``[self]``.

        Raises:
            XShardsValueError: When shards have different lengths.

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> x, y = XShards.partition((np.arange(4), np.ones(4)), 2).split()
            >>> x.collect()
            [array([0, 1]), array([2, 3])]
        """
        lengths = [
            (index, 1 if seq is None else seq)
            for index, info in enumerate(self._element_facts())
            for seq in info.seqs
        ]
        for index, length in lengths:
            if length != lengths[0][1]:
                raise XShardsValueError(
                    "Cannot split this XShards because its partitions have different split "
                    f"length: {lengths[0][1]} and {length} (partition {index})."
                )
        if not lengths or lengths[0][1] <= 1:
            return [self]
        parts = [self._select_item(i) for i in range(lengths[0][1])]
        self._release_to(parts)  # after every part took this XShards' partitions
        return parts

    def _select_item(self, index: int) -> XShards:
        stage = ShardStage(select_key, (index,), f"split[{index}]")
        return self._derive(
            lambda bases: bases[0]._with(MapShards(stage)),
            self._num,
            stage.name,
            uncache_parents=False,
        )

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
        return [element for part in self.get_partitions() for element in part]

    def get_partitions(self) -> list[list[Any]]:
        """Every partition's list of shards, in partition order (Spark's ``glom()``).

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> [len(p) for p in XShards.partition(np.arange(3), 3).get_partitions()]
            [1, 1, 1]
        """
        refs, metas = self._partitions()
        partitions = [decode(block) for block in blocks_dataset(refs, metas, "Get")._iter_blocks()]
        element_types(
            [(i, [type_name(e) for e in part]) for i, part in enumerate(partitions)], "collect()"
        )
        return partitions

    def num_partitions(self) -> int:
        """The number of partitions (runs the plan only when it does not say).

        Examples:
            >>> import numpy as np
            >>> from shardflow.xshards import XShards
            >>> XShards.partition(np.arange(10), 4).num_partitions()
            4
        """
        if self._num is None:
            self._partitions()
        assert self._num is not None
        return self._num

    def _element_facts(self) -> list[BlockInfo]:
        """Type, length and item count of every shard, per partition (no data is read)."""
        refs, metas = self._partitions()
        return block_infos(refs, metas)

    def _shard_counts(self) -> list[int]:
        return [info.count for info in self._element_facts()]

    def _collect_map(self, stage: ShardStage) -> list[Any]:
        """The outputs of ``stage`` over this XShards' partitions, in order, without making a
        new XShards (a cached XShards is computed and kept first, as Spark's actions do)."""
        if self._marked:
            self._partitions()
        dataset = self._ds._with(MapShards(stage))
        return [element for block in dataset._iter_blocks() for element in decode(block)]

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
        """Put the partitions in Ray's object store (Ray backend, or Spark with Ray started).

        Returns:
            A :class:`RayXShards` holding one object reference per partition (a list of its
            shards) and the address of the node that holds it.
        """
        from shardflow.engine.xshards.ray_shards import to_ray

        return to_ray(self)

    def __repr__(self) -> str:
        count = "?" if self._num is None else self._num
        return f"XShards(num_partitions={count}, last={self._name})"


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise XShardsValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def column_list(cols: Any, what: str) -> list[str]:
    """``cols`` as a list of column names (one name or a list of them)."""
    if isinstance(cols, str):
        cols = [cols]
    valid = isinstance(cols, (list, tuple)) and cols and all(isinstance(c, str) for c in cols)
    if not valid:
        raise XShardsTypeError(f"{what} needs a column name or a list of them, got {cols!r}.")
    return list(cols)
