"""The XShards operations on shards of pandas DataFrames and Series (Orca's ``unique``,
``max_values``, ``select``, ``sort_values``, ``group_by``, ...), written once over the few
primitives each backend provides: ``_collect_map`` (a function over the partitions, results
to the driver), ``_element_facts`` (types and lengths of the shards), ``_map_keep_parent``,
and ``_sort_values`` / ``_group_by`` where the backend has its own exchange.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shardflow.engine.xshards.encoding import DATAFRAME, short_type, type_name
from shardflow.engine.xshards.errors import XShardsTypeError, XShardsValueError
from shardflow.engine.xshards.stages import ShardStage

SERIES = "pandas.core.series.Series"


class FrameOps:
    """DataFrame operations of XShards. Mixed into XShards."""

    # Provided by each backend.
    _collect_map: Callable[..., list[Any]]
    _element_facts: Callable[..., list[Any]]
    num_partitions: Callable[..., int]
    collect: Callable[..., list[Any]]
    to_dataset: Callable[..., Any]

    def _map_keep_parent(self, fn: Callable[..., Any], args: tuple, name: str) -> Any:
        raise NotImplementedError

    def _class_name(self) -> str | None:
        """The type of the first shard (Orca's ``_get_class_name``), None when empty."""
        for info in self._element_facts():
            if info.types:
                return info.types[0]
        return None

    def _require_frames(self, what: str) -> None:
        found = self._class_name()
        if found not in (DATAFRAME, None):
            raise XShardsTypeError(
                f"Currently only support {what} on XShards of Pandas DataFrame; these shards "
                f"hold {short_type(found)}."
            )

    # -- reductions -------------------------------------------------------------------

    def unique(self) -> np.ndarray:
        """The distinct values of shards of pandas Series, in order of first appearance.

        Raises:
            XShardsTypeError: "Currently only support unique() on XShards of Pandas Series"
                when the shards are not Series (select a column first:
                ``shards["col"].unique()``).
        """
        import pandas as pd

        results = self._collect_map(ShardStage(_unique_of, (), "unique"))
        found = [r for r in results if r[0] != "ok"]
        if found:
            raise XShardsTypeError(
                "Currently only support unique() on XShards of Pandas Series; these shards "
                f"hold {short_type(found[0][1])}. Select a column first: shards['col'].unique()."
            )
        arrays = [r[1] for r in results]
        if not arrays:
            return np.array([])
        return pd.unique(np.concatenate(arrays, axis=0))

    def __len__(self) -> int:
        """The total length of all shards (rows of DataFrames, items of lists ...; 1 for a
        shard without a length)."""
        return int(sum(self._collect_map(ShardStage(_length_of, (), "len"))))

    def max_values(self, col_name: str) -> Any:
        """The largest value of column ``col_name`` over shards of pandas DataFrames.

        Raises:
            XShardsTypeError: When the shards are not DataFrames.

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> shards = sf.from_pandas(pd.DataFrame({"a": [3, 9, 4]})).to_xshards()
            >>> int(shards.max_values("a"))
            9
        """
        if not isinstance(col_name, str):
            raise XShardsTypeError(f"col_name must be a column name, got {col_name!r}.")
        self._require_frames("max()")
        values = self._collect_map(ShardStage(_column_max, (col_name,), "max_values"))
        values = [v for v in values if v is not None]
        return max(values) if values else None

    def concat_to_pdf(self, axis: int = 0) -> Any:
        """All DataFrame shards concatenated into one pandas DataFrame (on the driver)."""
        import pandas as pd

        self._require_frames("concat_to_pdf()")
        return pd.concat(self.collect(), axis=axis)

    def first(self) -> Any:
        """The first shard."""
        shards = self.take(1)
        if not shards:
            raise XShardsValueError("first() found no shard: this XShards is empty.")
        return shards[0]

    def take(self, n: int) -> list[Any]:
        """The first ``n`` shards, in partition order."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise XShardsValueError(f"n must be a non-negative int, got {n!r}.")
        return self.collect()[:n]

    def head(self, n: int = 5) -> Any:
        """The first ``n`` rows of the first shard (Orca's ``head``)."""
        return self.first().head(n)

    def get_schema(self) -> dict[str, Any] | None:
        """``{"columns": ..., "dtypes": ...}`` of the first DataFrame shard, None for shards
        of other types."""
        if self._class_name() != DATAFRAME:
            return None
        first = self.first()
        return {"columns": [str(c) for c in first.columns], "dtypes": first.dtypes}

    # -- maps that keep the parent cached (as Orca's) ------------------------------------

    def select(self, cols: str | list[str]) -> Any:
        """The columns ``cols`` of every DataFrame shard.

        Raises:
            XShardsKeyError: When a column does not exist (when the result runs).
        """
        columns = [cols] if isinstance(cols, str) else cols
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise XShardsTypeError(f"cols should be str or list, got {cols!r}.")
        self._require_frames("select()")
        return self._map_keep_parent(_select_columns, (columns,), "select")

    def sample(
        self,
        frac: float,
        replace: bool = False,
        weights: Any = None,
        random_state: Any = None,
    ) -> Any:
        """A sample of every DataFrame shard (``DataFrame.sample`` on each)."""
        if not isinstance(frac, (int, float)) or frac < 0:
            raise XShardsValueError(f"frac must be a non-negative number, got {frac!r}.")
        self._require_frames("sample()")
        return self._map_keep_parent(
            _sample_frame, (frac, replace, weights, random_state), "sample"
        )

    # -- exchanges --------------------------------------------------------------------

    def sort_values(
        self, col_names: str | list[str] | None = None, ascending: bool | list[bool] = True
    ) -> Any:
        """The rows of the DataFrame shards sorted by ``col_names`` across partitions.

        The result has as many partitions as this XShards (fewer on Spark when some would be
        empty), each one DataFrame with a fresh index; nulls sort last.

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> df = pd.DataFrame({"a": [3, 1, 2, 5]})
            >>> shards = sf.from_pandas(df).repartition(2).to_xshards()
            >>> pd.concat(shards.sort_values("a").collect())["a"].tolist()
            [1, 2, 3, 5]
        """
        from shardflow.engine.xshards.shards import column_list

        keys = column_list(col_names, "sort_values")
        flags = [ascending] * len(keys) if isinstance(ascending, bool) else ascending
        if not isinstance(flags, list) or len(flags) != len(keys):
            raise XShardsValueError(
                f"ascending must be a bool or a list of one bool per column, got {ascending!r}."
            )
        self._require_frames("sort()")
        return self._sort_values(keys, [bool(f) for f in flags])

    def group_by(
        self,
        columns: str | list[str] | None = None,
        agg: str | list[str] | dict[str, Any] = "count",
        join: bool = False,
    ) -> Any:
        """Group the rows of the DataFrame shards by ``columns`` and aggregate the others.

        Args:
            columns: A column or a list of them; empty (the default) aggregates all rows.
            agg: An aggregate function (``"count"``, ``"sum"``, ``"min"``, ``"max"``,
                ``"avg"`` / ``"mean"``, ``"stddev"``, ``"variance"``, ``"stddev_pop"``,
                ``"var_pop"``, ``"skewness"``, ``"kurtosis"``, ``"first"``, ``"last"``,
                ``"collect_list"``, ``"collect_set"``, ``"sumDistinct"``, ...) applied to
                every other column, a list of them, or a dict from a column to one function
                or a list of them.
            join: Join the results to every row (on ``columns``) instead of one row per group.

        Returns:
            An XShards of DataFrames with the key columns and one column per aggregation,
            named as Spark names them (``"sum(price)"``, ``"avg(price)"`` for ``"mean"``).

        Examples:
            >>> import pandas as pd
            >>> import shardflow as sf
            >>> df = pd.DataFrame({"k": [1, 2, 1], "v": [1.0, 2.0, 4.0]})
            >>> out = sf.from_pandas(df).to_xshards().group_by("k", agg="sum").concat_to_pdf()
            >>> out.sort_values("k")["sum(v)"].tolist()
            [5.0, 2.0]
        """
        from shardflow.engine.xshards.aggregation import parse_agg

        keys = [] if columns is None else [columns] if isinstance(columns, str) else columns
        if not isinstance(keys, list) or not all(isinstance(c, str) for c in keys):
            raise XShardsTypeError(f"columns should be str or a list of str, got {columns!r}.")
        if join and not keys:
            raise XShardsValueError("columns can not be empty if join is True")
        self._require_frames("group_by()")
        schema = self.get_schema()
        pairs = parse_agg(agg, keys, [] if schema is None else schema["columns"])
        return self._group_by(keys, pairs, bool(join))

    def _sort_values(self, keys: list[str], ascending: list[bool]) -> Any:
        from shardflow.engine.xshards.shards import XShards

        num = self.num_partitions()
        ordered = self.to_dataset().sort(keys, descending=[not a for a in ascending])
        return XShards._from_dataset(ordered).repartition(num)

    def _group_by(self, keys: list[str], pairs: list[tuple[str, str]], join: bool) -> Any:
        import pandas as pd

        from shardflow.engine.xshards.aggregation import GroupAggregator
        from shardflow.engine.xshards.shards import XShards

        num = self.num_partitions()
        grouped = self.to_dataset().groupby(keys or None)
        result = grouped.map_groups(GroupAggregator(keys, pairs), batch_format="pandas")
        shards = XShards._from_dataset(result).repartition(num)
        if not join:
            return shards
        table = pd.concat(shards.collect(), ignore_index=True)
        return self._map_keep_parent(join_frame, (table, keys), "group_by(join)")

    def to_spark_df(self) -> Any:
        """This XShards of DataFrames as a Spark DataFrame (Spark backend only)."""
        raise XShardsTypeError(
            "to_spark_df needs XShards on Spark: call init_orca_context(backend='spark') "
            "before making them."
        )


def _unique_of(element: Any) -> tuple:
    import pandas as pd

    if not isinstance(element, pd.Series):
        return ("type", type_name(element))
    return ("ok", pd.unique(element.to_numpy()))


def _length_of(element: Any) -> int:
    return len(element) if hasattr(element, "__len__") else 1


def _column_max(element: Any, col_name: str) -> Any:
    column = element[col_name]
    return column.max() if len(column) else None


def _select_columns(element: Any, columns: list[str]) -> Any:
    from shardflow.engine.xshards.errors import XShardsKeyError

    missing = [c for c in columns if c not in element.columns]
    if missing:
        raise XShardsKeyError(
            f"{missing[0]} in cols does not exist in SparkXShards; its columns are "
            f"{list(element.columns)}."
        )
    return element[columns]


def _sample_frame(element: Any, frac: float, replace: bool, weights: Any, seed: Any) -> Any:
    return element.sample(frac=frac, replace=replace, weights=weights, random_state=seed)


def join_frame(element: Any, table: Any, keys: list[str]) -> Any:
    return element.merge(table, on=keys, how="left")
