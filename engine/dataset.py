"""The Dataset: a lazy, immutable plan with Ray Data's API.

Transformations return a new Dataset and run nothing; consumption (iteration, ``take``,
``count``, writes, ...) optimizes the plan and runs it on the current backend.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple, Union


from shardflow.engine.consumption import ConsumptionMixin
from shardflow.engine.dataset_aggregate import AggregateMixin
from shardflow.engine.dataset_exchange import ExchangeMixin
from shardflow.engine.dataset_info import DatasetInfoMixin
from shardflow.engine.dataset_iteration import IterationMixin
from shardflow.engine.dataset_split import SplitMixin
from shardflow.engine.file_api import FileWriteMixin
from shardflow.engine.iceberg_api import IcebergWriteMixin
from shardflow.engine.xshards.dataset_mixin import XShardsMixin
from shardflow.engine.logical import (
    AddColumn,
    FilterExpr,
    FilterRows,
    FlatMap,
    Limit,
    LogicalPlan,
    MapBatches,
    MapRows,
    Project,
    UDFCall,
    Write,
)
from shardflow.engine.iteration import validate_batch_size
from shardflow.sdk.block import validate_batch_format
from shardflow.sdk.datasink import Datasink
from shardflow.sdk.expressions import Expr

DEFAULT_BATCH_SIZE = 1024


def _udf(fn: Any, fn_args: Any, fn_kwargs: Any, ctor_args: Any, ctor_kwargs: Any) -> UDFCall:
    for name, value, kinds in (
        ("fn_args", fn_args, (list, tuple)),
        ("fn_constructor_args", ctor_args, (list, tuple)),
        ("fn_kwargs", fn_kwargs, (dict,)),
        ("fn_constructor_kwargs", ctor_kwargs, (dict,)),
    ):
        if value is not None and not isinstance(value, kinds):
            wanted = "a dict" if dict in kinds else "a list or tuple"
            raise TypeError(f"{name} must be {wanted}, got {type(value).__name__}: {value!r}.")
    if (ctor_args or ctor_kwargs) and not isinstance(fn, type):
        raise ValueError(
            "fn_constructor_args and fn_constructor_kwargs can only be given when fn is a "
            f"callable class, but got: {fn!r}."
        )
    return UDFCall(fn, tuple(fn_args or ()), dict(fn_kwargs or {}), tuple(ctor_args or ()), dict(ctor_kwargs or {}))


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
    AggregateMixin, ExchangeMixin, SplitMixin, IterationMixin, ConsumptionMixin, FileWriteMixin,
    DatasetInfoMixin, XShardsMixin, IcebergWriteMixin,
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

    def map(
        self,
        fn: Callable[[Dict[str, Any]], Dict[str, Any]],
        *,
        fn_args: Optional[Tuple[Any, ...]] = None,
        fn_kwargs: Optional[Dict[str, Any]] = None,
        fn_constructor_args: Optional[Tuple[Any, ...]] = None,
        fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
    ) -> "Dataset":
        """Apply ``fn`` to each row (a dict), producing one row (a dict) per input row.

        On the local backend row functions run in worker processes, so pure-Python code
        uses every core; prefer ``map_batches`` for vectorized work.

        Args:
            fn: Function, or callable class (instantiated once per task), from row to row.
            fn_args: Extra positional arguments for ``fn``.
            fn_kwargs: Extra keyword arguments for ``fn``.
            fn_constructor_args: Constructor arguments when ``fn`` is a class.
            fn_constructor_kwargs: Constructor keyword arguments when ``fn`` is a class.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).map(lambda row: {"sq": row["id"] ** 2}).take_all()
            [{'sq': 0}, {'sq': 1}, {'sq': 4}]
        """
        _check_fn(fn, "map")
        return self._with(MapRows(_udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)))

    def map_batches(
        self,
        fn: Callable[[Any], Any],
        *,
        batch_size: Union[int, None, str] = None,
        batch_format: Optional[str] = "default",
        zero_copy_batch: bool = True,
        fn_args: Optional[Tuple[Any, ...]] = None,
        fn_kwargs: Optional[Dict[str, Any]] = None,
        fn_constructor_args: Optional[Tuple[Any, ...]] = None,
        fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
    ) -> "Dataset":
        """Apply ``fn`` to batches of rows.

        Args:
            fn: Function, or callable class (instantiated once per task), taking a batch and
                returning a batch (or a generator of batches).
            batch_size: Rows per batch; None (the default) passes whole blocks; ``"auto"``
                picks a size from the row width (about 8 MiB per batch).
            batch_format: ``"numpy"`` (dict of arrays; also ``"default"``), ``"pandas"`` or
                ``"pyarrow"``.
            zero_copy_batch: Give ``fn`` read-only views of the block's memory where the
                conversion allows (the default, as in Ray Data); False gives writable copies.
            fn_args: Extra positional arguments for ``fn``.
            fn_kwargs: Extra keyword arguments for ``fn``.
            fn_constructor_args: Constructor arguments when ``fn`` is a class.
            fn_constructor_kwargs: Constructor keyword arguments when ``fn`` is a class.

        Returns:
            A new Dataset.

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(4).map_batches(lambda b: {"x": b["id"] + 1}, batch_size=2)
            >>> ds.take_all()
            [{'x': 1}, {'x': 2}, {'x': 3}, {'x': 4}]
        """
        _check_fn(fn, "map_batches")
        if batch_size == "default":
            batch_size = DEFAULT_BATCH_SIZE
        if batch_size != "auto":
            batch_size = validate_batch_size(batch_size)
        batch_format = validate_batch_format(batch_format)
        udf = _udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)
        return self._with(MapBatches(udf, batch_size, batch_format, zero_copy_batch))

    def flat_map(
        self,
        fn: Callable[[Dict[str, Any]], List[Dict[str, Any]]],
        *,
        fn_args: Optional[Tuple[Any, ...]] = None,
        fn_kwargs: Optional[Dict[str, Any]] = None,
        fn_constructor_args: Optional[Tuple[Any, ...]] = None,
        fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
    ) -> "Dataset":
        """Apply ``fn`` to each row, producing any number of rows (a list of dicts).

        Examples:
            >>> import shardflow as sf
            >>> sf.range(2).flat_map(lambda r: [r, r]).take_all()
            [{'id': 0}, {'id': 0}, {'id': 1}, {'id': 1}]
        """
        _check_fn(fn, "flat_map")
        return self._with(FlatMap(_udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)))

    def filter(
        self,
        fn: Union[Callable[[Dict[str, Any]], bool], Expr, None] = None,
        expr: Union[Expr, str, None] = None,
        *,
        fn_args: Optional[Tuple[Any, ...]] = None,
        fn_kwargs: Optional[Dict[str, Any]] = None,
        fn_constructor_args: Optional[Tuple[Any, ...]] = None,
        fn_constructor_kwargs: Optional[Dict[str, Any]] = None,
    ) -> "Dataset":
        """Keep the rows for which ``fn`` returns True, or where ``expr`` holds.

        An expression (``sf.col("x") > 0``, or the string ``"x > 0"``) is evaluated by Arrow
        in bulk and can be pushed into readers that support it; a function is called once per
        row.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(5).filter(lambda r: r["id"] % 2 == 0).take_all()
            [{'id': 0}, {'id': 2}, {'id': 4}]
            >>> sf.range(5).filter(expr=sf.col("id") > 2).count()
            2
        """
        if isinstance(fn, Expr):
            fn, expr = None, fn
        if (fn is None) == (expr is None):
            raise ValueError("filter needs exactly one of fn (a function) or expr (an expression such as sf.col('x') > 0).")
        if isinstance(expr, str):
            from shardflow.sdk.expressions import parse_expr

            expr = parse_expr(expr)
        if expr is not None:
            if not isinstance(expr, Expr):
                raise TypeError(f"expr must be an expression built with sf.col(...); got {type(expr).__name__}.")
            return self._with(FilterExpr(expr))
        _check_fn(fn, "filter")
        return self._with(FilterRows(_udf(fn, fn_args, fn_kwargs, fn_constructor_args, fn_constructor_kwargs)))

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
