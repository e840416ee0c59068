"""The Dataset: a lazy, immutable plan with Ray Data's API.

Transformations return a new Dataset and run nothing; consumption (iteration, ``take``,
``count``, writes, ...) optimizes the plan and runs it on the current backend.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from shardflow.engine.api.consumption import ConsumptionMixin
from shardflow.engine.api.context import DataContext
from shardflow.engine.api.delta import DeltaWriteMixin
from shardflow.engine.api.error_boundary import public_methods_at_boundary
from shardflow.engine.api.exchanges import ExchangeMixin
from shardflow.engine.api.explain import ExplainMixin
from shardflow.engine.api.expressions import ExpressionsMixin
from shardflow.engine.api.file_writes import FileWriteMixin
from shardflow.engine.api.grouped_data import AggregateMixin
from shardflow.engine.api.iceberg import IcebergWriteMixin
from shardflow.engine.api.info import DatasetInfoMixin
from shardflow.engine.api.interop.methods import InteropMixin
from shardflow.engine.api.iteration import IterationMixin
from shardflow.engine.api.lance import LanceWriteMixin
from shardflow.engine.api.map import MapMixin
from shardflow.engine.api.mix import MixMixin
from shardflow.engine.api.object_refs import ObjectRefsMixin
from shardflow.engine.api.orc import ORCWriteMixin
from shardflow.engine.api.split import SplitMixin
from shardflow.engine.api.sql import SQLWriteMixin
from shardflow.engine.api.summary import SummaryMixin
from shardflow.engine.api.tfrecords import TFRecordsWriteMixin
from shardflow.engine.api.webdataset import WebDatasetWriteMixin
from shardflow.engine.execution.errors import ColumnNotFoundError
from shardflow.engine.execution.stages.columns import check_rename
from shardflow.engine.plan.logical import AddColumn, Limit, LogicalPlan, Project, Write
from shardflow.engine.xshards.dataset_mixin import XShardsMixin
from shardflow.sdk.datasink import Datasink

ADD_COLUMN_FORMATS = ("pandas", "pyarrow", "numpy")


def _check_fn(fn: Any, method: str) -> None:
    if not callable(fn):
        raise TypeError(
            f"{method} needs a function (or a callable class); got {type(fn).__name__}."
        )


@public_methods_at_boundary
class Dataset(
    ExpressionsMixin,
    MapMixin,
    AggregateMixin,
    ExchangeMixin,
    MixMixin,
    SummaryMixin,
    SplitMixin,
    IterationMixin,
    ConsumptionMixin,
    FileWriteMixin,
    DatasetInfoMixin,
    XShardsMixin,
    IcebergWriteMixin,
    LanceWriteMixin,
    SQLWriteMixin,
    DeltaWriteMixin,
    WebDatasetWriteMixin,
    TFRecordsWriteMixin,
    ORCWriteMixin,
    InteropMixin,
    ObjectRefsMixin,
    ExplainMixin,
):
    """A distributed-style collection of rows, stored as Arrow blocks and computed lazily.

    Create one with ``sf.range``, ``sf.from_items``, ``sf.read_datasource`` and friends.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range(10).map_batches(lambda b: {"id": b["id"] * 2})
        >>> ds.filter(sf.col("id") > 10).take_all()
        [{'id': 12}, {'id': 14}, {'id': 16}, {'id': 18}]
    """

    def __init__(self, plan: LogicalPlan, context: DataContext | None = None):
        self._plan = plan
        self._last_stats = None
        self._name: str | None = None
        self._context = context if context is not None else DataContext.get_current()
        self._uuid = uuid.uuid4().hex
        self._run_index = -1  # counts this dataset's executions, as in Ray Data

    def _with(self, op: Any) -> Dataset:
        derived = Dataset(self._plan.with_op(op), self._context)
        derived._name = self._name
        return derived

    @property
    def name(self) -> str | None:
        """The name given with :meth:`set_name` (kept by datasets derived from this one)."""
        return self._name

    @property
    def context(self) -> DataContext:
        """The DataContext that was current when this dataset (or the one it derives from)
        was created.

        Unlike Ray Data, which gives each new dataset a copy, this is the context object
        itself: settings changed on it apply to every execution that runs under it, as
        executions take their settings from ``DataContext.get_current()``.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).context is sf.DataContext.get_current()
            True
        """
        return self._context

    def get_dataset_id(self) -> str:
        """The dataset's id: its name (or ``"dataset"``), a unique id, and how many times it
        ran before (``-1`` before its first execution), joined by ``_`` as in Ray Data.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(3)
            >>> ds.get_dataset_id().endswith("_-1")
            True
            >>> _ = ds.take_all()
            >>> ds.get_dataset_id().endswith("_0")
            True
        """
        return f"{self._name or 'dataset'}_{self._uuid}_{self._run_index}"

    @staticmethod
    def copy(ds: Dataset, _deep_copy: bool = False, _as: type | None = None) -> Dataset:
        """A new Dataset over the same plan, name, context and last statistics, as Ray
        Data's ``Dataset.copy(ds)`` (a static method). It gets an id of its own.

        Args:
            ds: The dataset to copy.
            _deep_copy: Give the copy a copy of the context instead of the same one.
            _as: The class of the copy (a subclass of Dataset); by default ``ds``'s.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(3)
            >>> sf.Dataset.copy(ds).take_all() == ds.take_all()
            True
        """
        if not isinstance(ds, Dataset):
            raise TypeError(f"Dataset.copy takes a Dataset, got {type(ds).__name__}.")
        cls = _as or type(ds)
        if not (isinstance(cls, type) and issubclass(cls, Dataset)):
            raise TypeError(f"Dataset.copy: _as must be a subclass of Dataset, got {cls!r}.")
        context = ds._context.copy() if _deep_copy else ds._context
        copied = cls(ds._plan, context)
        copied._name = ds._name
        copied._last_stats = ds._last_stats
        return copied

    def set_name(self, name: str | None) -> None:
        """Name the dataset; the name shows in its repr and in datasets derived from it.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(3)
            >>> ds.set_name("ids")
            >>> ds.map(lambda r: r).name
            'ids'
        """
        if name is not None and not isinstance(name, str):
            raise TypeError(f"set_name takes a string (or None), got {type(name).__name__}.")
        self._name = name

    # -- transformations ----------------------------------------------------------------

    def add_column(
        self, col: str, fn: Callable[[Any], Any], *, batch_format: str | None = "pandas"
    ) -> Dataset:
        """Add (or replace) column ``col`` with the values ``fn`` computes from each batch.

        Args:
            col: Name of the column; an existing column of that name is replaced in place.
            fn: Function from a batch (in ``batch_format``) to the column's values: a pandas
                Series, list or scalar for ``"pandas"``, a ``pyarrow.Array`` for
                ``"pyarrow"``, a ``numpy.ndarray`` for ``"numpy"``.
            batch_format: ``"pandas"`` (the default), ``"pyarrow"`` or ``"numpy"``.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).add_column("double", lambda df: df["id"] * 2).take(2)
            [{'id': 0, 'double': 0}, {'id': 1, 'double': 2}]
        """
        if not isinstance(col, str) or not col:
            raise TypeError(f"add_column needs a column name, got {col!r}.")
        if batch_format not in ADD_COLUMN_FORMATS:
            raise ValueError(
                f"batch_format argument must be one of {list(ADD_COLUMN_FORMATS)}, got: {batch_format!r}"
            )
        if not callable(fn):
            raise ValueError(f"`fn` must be callable, got {fn!r}")
        return self._with(AddColumn(col, fn, batch_format))

    def select_columns(self, cols: str | list[str]) -> Dataset:
        """Keep only ``cols``, in that order.

        Args:
            cols: A column name or a list of unique column names.

        Raises:
            TypeError: when ``cols`` is neither a string nor a list.
            ValueError: for names that are not strings, or a name given twice; a name that
                is not a column raises ``ColumnNotFoundError`` (a ValueError) when the
                dataset runs.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1, "b": 2}]).select_columns(["b"]).take_all()
            [{'b': 2}]
        """
        if isinstance(cols, str):
            cols = [cols]
        elif not isinstance(cols, list):
            raise TypeError("select_columns requires 'cols' to be a string or a list of strings.")
        if not all(isinstance(c, str) for c in cols):
            raise ValueError("select_columns requires all elements of 'cols' to be strings.")
        if len(set(cols)) != len(cols):
            raise ValueError(
                f"select_columns expected unique column names, got duplicate column names: {cols}"
            )
        return self._with(Project(select=tuple(cols)))

    def drop_columns(self, cols: str | list[str]) -> Dataset:
        """Remove ``cols``. Dropping every column leaves an empty dataset, as in Ray Data.

        Args:
            cols: A column name or a list of unique column names; an empty list changes
                nothing.

        Raises:
            ValueError: for a name given twice.
            KeyError: (``ColumnNotFoundError``, also a ValueError) for a name that is not a
                column: at the call when the schema is known without running anything, else
                when the dataset runs.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1, "b": 2}]).drop_columns(["b"]).take_all()
            [{'a': 1}]
        """
        cols = [cols] if isinstance(cols, str) else list(cols)
        if not cols:
            return self
        if not all(isinstance(c, str) for c in cols):
            raise TypeError(f"drop_columns takes column names (strings); got {cols!r}.")
        if len(set(cols)) != len(cols):
            raise ValueError(f"drop_columns expects unique column names, got: {cols}")
        schema = self._static_schema()
        if schema is not None:
            missing = [c for c in cols if c not in schema.names]
            if missing:
                raise ColumnNotFoundError(
                    f"drop_columns: column(s) not found in dataset schema: {missing}. "
                    f"Available columns: {schema.names}"
                )
            keep = [c for c in schema.names if c not in cols]
            if keep:  # a known schema keeps the row count known, as a select
                return self._with(Project(select=tuple(keep)))
        return self._with(Project(drop=tuple(cols)))

    def rename_columns(self, names: dict[str, str] | list[str]) -> Dataset:
        """Rename columns with a mapping ``{old: new}``, or a list of new names for all.

        Raises:
            TypeError: when ``names`` is neither a dict nor a list.
            ValueError: for an empty mapping or list, names that are not strings, a new
                name given twice, a list whose length is not the number of columns, and a
                new name that is already a column not being renamed (Ray Data would drop
                that column silently): at the call when the schema is known without running
                anything, else when the dataset runs.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1}]).rename_columns({"a": "x"}).take_all()
            [{'x': 1}]
        """
        if isinstance(names, dict):
            if not names:
                raise ValueError("rename_columns received 'names' with no entries.")
            if len(set(names.values())) != len(names):
                raise ValueError(
                    f"rename_columns received duplicate values in the 'names': {names}"
                )
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
                raise ValueError(
                    "rename_columns requires both keys and values in the 'names' to be strings."
                )
            mapping = dict(names)
        elif isinstance(names, list):
            if not names:
                raise ValueError("rename_columns requires 'names' with at least one column name.")
            if len(set(names)) != len(names):
                raise ValueError(
                    f"rename_columns received duplicate values in the 'names': {names}"
                )
            if not all(isinstance(c, str) for c in names):
                raise ValueError(
                    "rename_columns requires all elements in the 'names' to be strings."
                )
            current = self.columns() or []
            if len(current) != len(names):
                raise ValueError(
                    f"rename_columns requires 'names': {names} length match current schema "
                    f"names: {current}."
                )
            mapping = dict(zip(current, names))
        else:
            raise TypeError(
                "rename_columns expected names to be either List[str] or Dict[str, str], got "
                f"{type(names)}."
            )
        schema = self._static_schema()
        if schema is not None:
            check_rename(mapping, schema.names, "rename_columns")
        return self._with(Project(rename=mapping))

    def _static_schema(self) -> pa.Schema | None:
        """The schema when the data in hand tells it (no datasource is asked), else None."""
        from shardflow.engine.plan.logical import BlocksSource
        from shardflow.engine.plan.metadata import plan_schema

        if not isinstance(self._plan.source, BlocksSource):
            return None
        from shardflow.engine.execution.runtime import current_backend

        return plan_schema(self._plan, None, current_backend().get)

    def limit(self, limit: int) -> Dataset:
        """Keep only the first ``limit`` rows.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(1000).limit(3).take_all()
            [{'id': 0}, {'id': 1}, {'id': 2}]
        """
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, got {limit!r}.")
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}.")
        return self._with(Limit(limit))

    # -- writes -------------------------------------------------------------------------

    def write_datasink(
        self, datasink: Datasink | str, *, resume: bool = False, **write_args: Any
    ) -> None:
        """Write the dataset through a Datasink (or a registered connector's name).

        All-or-nothing: when any write task fails, ``on_write_failed`` is called and the
        error is raised; ``on_write_complete`` (the commit) runs only when all succeeded.

        Args:
            datasink: A Datasink, or the name of a registered connector with a datasink.
            resume: Make the write resumable: each task records the files it staged and the
                input it read (files with their size and version, and byte ranges), and a
                rerun after a failure or a killed driver skips exactly that input, however it
                splits its inputs into tasks, and gives the same output as an uninterrupted
                run. A rerun whose plan or inputs changed refuses, naming the change (file
                sinks support it; the source must be files or ``sf.range``, and the write must
                run in the same tasks as the read). A shardflow extension.
            write_args: Arguments for the connector's datasink when a name is given.
        """
        if isinstance(datasink, str):
            from shardflow.sdk.registry import get_registry

            spec = get_registry().get(datasink)
            if spec.datasink is None:
                raise ValueError(
                    f"Connector {datasink!r} (from {spec.package}) has no datasink; it can only read."
                )
            datasink = spec.datasink(**write_args)
        elif write_args:
            raise TypeError(
                f"write arguments {sorted(write_args)} apply only when the datasink is given by name."
            )
        if not isinstance(datasink, Datasink):
            raise TypeError(
                f"write_datasink needs a shardflow.sdk.Datasink, got {type(datasink).__name__}."
            )
        from shardflow.engine.execution.stages.transforms import decode_write_returns
        from shardflow.sdk.datasink import WriteResult

        bind = getattr(datasink, "bind_write", None)
        if resume and (bind is None or not getattr(datasink, "supports_resume", False)):
            raise ValueError(f"{type(datasink).__name__} does not support resume=True.")
        if bind is not None:
            from shardflow.engine.plan.write_identity import write_identity

            identity, listing = write_identity(self._plan, datasink, resume)
            bind(identity, listing, resume)
        use_context_retry = getattr(datasink, "use_context_retry", None)
        if use_context_retry is not None:  # file sinks: DataContext.retry, retried_io_errors
            from shardflow.engine.api.context import DataContext
            from shardflow.sdk.retry import RetryConfig

            use_context_retry(RetryConfig.from_data_context(DataContext.get_current()))
        datasink.on_write_start(self._cheap_schema())
        if getattr(datasink, "already_committed", False):
            return  # an interrupted run of this same write was committed just now
        state = datasink.resume_state() if resume else None
        write_uuid = getattr(datasink, "write_id", "") or uuid.uuid4().hex
        try:
            write = Write(datasink, write_uuid, state.done if state else None, resumable=resume)
            outputs = self._execute_blocks(self._plan.with_op(write))
            returns, rows, size = decode_write_returns(outputs)
        except BaseException as exc:
            datasink.on_write_failed(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            raise
        if state is not None:  # what earlier runs of a resumed write staged
            returns.extend(state.returns)
            rows += state.rows
            size += state.size_bytes
        datasink.on_write_complete(
            WriteResult(num_rows=rows, size_bytes=size, write_returns=returns)
        )

    write_datasource = write_datasink
