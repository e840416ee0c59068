"""The Dataset: a lazy, immutable plan with Ray Data's API.

Transformations return a new Dataset and run nothing; consumption (iteration, ``take``,
``count``, writes, ...) optimizes the plan and runs it on the current backend.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, List, Optional, Union


from shardflow.engine.consumption import ConsumptionMixin
from shardflow.engine.dataset_aggregate import AggregateMixin
from shardflow.engine.dataset_exchange import ExchangeMixin
from shardflow.engine.dataset_info import DatasetInfoMixin
from shardflow.engine.dataset_iteration import IterationMixin
from shardflow.engine.dataset_split import SplitMixin
from shardflow.engine.dataset_map import MapMixin
from shardflow.engine.file_api import FileWriteMixin
from shardflow.engine.iceberg_api import IcebergWriteMixin
from shardflow.engine.xshards.dataset_mixin import XShardsMixin
from shardflow.engine.logical import AddColumn, Limit, LogicalPlan, Project, Write
from shardflow.sdk.block import validate_batch_format
from shardflow.sdk.datasink import Datasink


def _check_fn(fn: Any, method: str) -> None:
    if not callable(fn):
        raise TypeError(f"{method} needs a function (or a callable class); got {type(fn).__name__}.")


def _check_columns(cols: Any, method: str) -> List[str]:
    if isinstance(cols, str):
        cols = [cols]
    cols = list(cols)
    if not all(isinstance(c, str) for c in cols):
        raise TypeError(f"{method} takes column names (strings); got {cols!r}.")
    if len(set(cols)) != len(cols):
        raise ValueError(f"{method} got duplicate column names: {cols!r}.")
    return cols


class Dataset(
    MapMixin, AggregateMixin, ExchangeMixin, SplitMixin, IterationMixin, ConsumptionMixin,
    FileWriteMixin, DatasetInfoMixin, XShardsMixin, IcebergWriteMixin,
):
    """A distributed-style collection of rows, stored as Arrow blocks and computed lazily.

    Create one with ``sf.range``, ``sf.from_items``, ``sf.read_datasource`` and friends.

    Examples:
        >>> import shardflow as sf
        >>> ds = sf.range(10).map_batches(lambda b: {"id": b["id"] * 2})
        >>> ds.filter(sf.col("id") > 10).take_all()
        [{'id': 12}, {'id': 14}, {'id': 16}, {'id': 18}]
    """

    def __init__(self, plan: LogicalPlan):
        self._plan = plan
        self._last_stats = None

    def _with(self, op: Any) -> "Dataset":
        return Dataset(self._plan.with_op(op))

    # -- transformations ----------------------------------------------------------------

    def add_column(self, col: str, fn: Callable[[Any], Any], *, batch_format: Optional[str] = "pandas") -> "Dataset":
        """Add (or replace) column ``col`` computed by ``fn`` from each batch.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).add_column("double", lambda df: df["id"] * 2).take(2)
            [{'id': 0, 'double': 0}, {'id': 1, 'double': 2}]
        """
        if not isinstance(col, str) or not col:
            raise TypeError(f"add_column needs a column name, got {col!r}.")
        _check_fn(fn, "add_column")
        batch_format = validate_batch_format(batch_format)
        return self._with(AddColumn(col, fn, batch_format))

    def select_columns(self, cols: Union[str, List[str]]) -> "Dataset":
        """Keep only ``cols``, in that order.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1, "b": 2}]).select_columns(["b"]).take_all()
            [{'b': 2}]
        """
        cols = _check_columns(cols, "select_columns")
        return self._with(Project(select=tuple(cols)))

    def drop_columns(self, cols: Union[str, List[str]]) -> "Dataset":
        """Remove ``cols``.

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1, "b": 2}]).drop_columns(["b"]).take_all()
            [{'a': 1}]
        """
        cols = _check_columns(cols, "drop_columns")
        return self._with(Project(drop=tuple(cols)))

    def rename_columns(self, names: Union[Dict[str, str], List[str]]) -> "Dataset":
        """Rename columns with a mapping ``{old: new}`` (or a full list of new names).

        Examples:
            >>> import shardflow as sf
            >>> sf.from_items([{"a": 1}]).rename_columns({"a": "x"}).take_all()
            [{'x': 1}]
        """
        if isinstance(names, (list, tuple)):
            new_names = _check_columns(names, "rename_columns")
            schema = self.schema()
            if schema is None or len(schema.names) != len(new_names):
                raise ValueError(
                    f"rename_columns with a list needs one new name per column; the dataset has "
                    f"{None if schema is None else schema.names}."
                )
            names = dict(zip(schema.names, new_names))
        if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            raise TypeError("rename_columns takes a dict of {old name: new name} or a list of new names.")
        if len(set(names.values())) != len(names):
            raise ValueError(f"rename_columns would give two columns the same name: {names!r}.")
        return self._with(Project(rename=dict(names)))

    def limit(self, limit: int) -> "Dataset":
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
        self, datasink: Union[Datasink, str], *, resume: bool = False, **write_args: Any
    ) -> None:
        """Write the dataset through a Datasink (or a registered connector's name).

        All-or-nothing: when any write task fails, ``on_write_failed`` is called and the
        error is raised; ``on_write_complete`` (the commit) runs only when all succeeded.

        Args:
            datasink: A Datasink, or the name of a registered connector with a datasink.
            resume: Make the write resumable: tasks record what they staged, and a rerun
                after a failure or a killed driver skips the tasks already done and gives the
                same output as an uninterrupted run (file sinks support it; the write must run
                in the same tasks as the read). A shardflow extension.
            write_args: Arguments for the connector's datasink when a name is given.
        """
        if isinstance(datasink, str):
            from shardflow.sdk.registry import get_registry

            spec = get_registry().get(datasink)
            if spec.datasink is None:
                raise ValueError(f"Connector {datasink!r} (from {spec.package}) has no datasink; it can only read.")
            datasink = spec.datasink(**write_args)
        elif write_args:
            raise TypeError(f"write arguments {sorted(write_args)} apply only when the datasink is given by name.")
        if not isinstance(datasink, Datasink):
            raise TypeError(f"write_datasink needs a shardflow.sdk.Datasink, got {type(datasink).__name__}.")
        from shardflow.engine.transforms import decode_write_returns
        from shardflow.sdk.datasink import WriteResult

        if resume:
            if not getattr(datasink, "supports_resume", False):
                raise ValueError(f"{type(datasink).__name__} does not support resume=True.")
            datasink.enable_resume()
        datasink.on_write_start(self._cheap_schema())
        done = datasink.resumed_tasks() if resume else {}
        write_uuid = datasink.write_id if resume else uuid.uuid4().hex
        try:
            write = Write(datasink, write_uuid, frozenset(done), resumable=resume)
            outputs = self._execute_blocks(self._plan.with_op(write))
            returns, rows, size = decode_write_returns(outputs)
        except BaseException as exc:
            datasink.on_write_failed(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            raise
        for index in sorted(done):  # what earlier runs of a resumed write staged
            returns.append(done[index]["files"])
            rows += done[index]["rows"]
            size += done[index]["bytes"]
        datasink.on_write_complete(WriteResult(num_rows=rows, size_bytes=size, write_returns=returns))

    write_datasource = write_datasink
