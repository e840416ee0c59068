"""The consuming half of Dataset: execution, iteration, take, count, schema, aggregates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.engine.api.context import DataContext
from shardflow.engine.api.schema import Schema
from shardflow.engine.execution.arrow_memory import apply_memory_pool
from shardflow.engine.execution.backends.base import Backend
from shardflow.engine.execution.executor import StreamingExecutor
from shardflow.engine.execution.runtime import current_backend
from shardflow.engine.iteration.batches import iter_rows_from_blocks, validate_batch_size
from shardflow.engine.plan.logical import BlocksSource, LogicalPlan
from shardflow.engine.plan.metadata import plan_num_rows, plan_schema
from shardflow.engine.plan.optimizer import optimize
from shardflow.engine.plan.planner import ReadTaskCache, plan_physical
from shardflow.sdk.block import Block, block_to_batch, concat_blocks, validate_batch_format


class PreparedPlan:
    """One optimized plan with its read tasks, shared by metadata questions and the run.

    Read tasks are planned once per PreparedPlan, so count() or schema() that first look at
    metadata and then execute ask the datasource only once.
    """

    def __init__(self, plan: LogicalPlan):
        self.context = DataContext.get_current()
        # Before planning: the pool a read's first allocations come from is the one its
        # later ones are fastest in (see engine/execution/arrow_memory.py).
        apply_memory_pool(self.context.arrow_memory_pool)
        self.backend: Backend = current_backend(self.context)
        self.plan = optimize(plan)
        self.read_tasks = ReadTaskCache(self.context)

    def executor(self) -> StreamingExecutor:
        self.backend.refresh()  # nodes may have joined or died since the last execution
        physical = plan_physical(self.plan, self.backend, self.context, self.read_tasks)
        return StreamingExecutor(physical, self.backend, self.context)

    def known_num_rows(self) -> int | None:
        """The row count when metadata gives it without running anything, else None."""
        return plan_num_rows(self.plan, self.read_tasks)

    def known_schema(self) -> pa.Schema | None:
        """The schema when known without running a task, else None."""
        return plan_schema(self.plan, self.read_tasks, self.backend.get)


class ExecutionHandle:
    """Lets a consumer in one thread cancel an execution driven from another (a prefetching
    iterator whose user stopped, or pressed Ctrl-C)."""

    def __init__(self) -> None:
        self._executor: StreamingExecutor | None = None
        self._cancelled = False

    def attach(self, executor: StreamingExecutor) -> None:
        self._executor = executor
        if self._cancelled:
            executor.cancel()

    def cancel(self) -> None:
        self._cancelled = True
        if self._executor is not None:
            self._executor.cancel()


class ConsumptionMixin:
    """Methods that run the plan. Mixed into Dataset."""

    _plan: LogicalPlan

    # -- execution ----------------------------------------------------------------------

    def _execute(
        self,
        plan: LogicalPlan | None = None,
        prepared: PreparedPlan | None = None,
        handle: ExecutionHandle | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """Stream (reference, metadata) pairs of the output blocks."""
        prepared = prepared or PreparedPlan(plan or self._plan)
        executor = prepared.executor()
        self._run_index = getattr(self, "_run_index", -1) + 1
        if handle is not None:
            handle.attach(executor)
        self._last_stats = executor.stats
        yield from executor
        if prepared.context.enable_stats_summary_collection:
            from shardflow.engine.execution.stats_summary import record_finished_execution

            record_finished_execution(executor.stats, getattr(self, "_uuid", ""))

    def _iter_blocks(
        self,
        plan: LogicalPlan | None = None,
        prepared: PreparedPlan | None = None,
        handle: ExecutionHandle | None = None,
    ) -> Iterator[Block]:
        backend = current_backend()
        for ref, _ in self._execute(plan, prepared, handle):
            yield backend.get(ref)

    def _execute_blocks(self, plan: LogicalPlan | None = None) -> list[Block]:
        return list(self._iter_blocks(plan))

    # -- small results ------------------------------------------------------------------

    def take(self, limit: int = 20) -> list[dict[str, Any]]:
        """The first ``limit`` rows as dicts.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(100).take(2)
            [{'id': 0}, {'id': 1}]
        """
        return list(iter_rows_from_blocks(self._iter_blocks(self.limit(limit)._plan)))

    def take_all(self, limit: int | None = None) -> list[dict[str, Any]]:
        """All rows as dicts; raises ValueError when there are more than ``limit``."""
        plan = self._plan if limit is None else self.limit(limit + 1)._plan
        rows = list(iter_rows_from_blocks(self._iter_blocks(plan)))
        if limit is not None and len(rows) > limit:
            raise ValueError(
                f"The dataset has more than {limit} rows; raise the limit or use take()."
            )
        return rows

    def take_batch(self, batch_size: int = 20, *, batch_format: str | None = "default") -> Any:
        """The first ``batch_size`` rows as one batch.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10).take_batch(3)["id"].tolist()
            [0, 1, 2]
        """
        batch_size = validate_batch_size(batch_size, allow_none=False)
        batch_format = validate_batch_format(batch_format)
        block = concat_blocks(self._execute_blocks(self.limit(batch_size)._plan))
        return block_to_batch(block, batch_format, DataContext.get_current().pandas_conversion())

    def show(self, limit: int = 20) -> None:
        """Print the first ``limit`` rows."""
        for row in self.take(limit):
            print(row)

    # -- metadata -----------------------------------------------------------------------

    def count(self) -> int:
        """Number of rows; read from metadata when known, without reading the data.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(1234).count()
            1234
        """
        prepared = PreparedPlan(self._plan)
        known = prepared.known_num_rows()
        if known is not None:
            return known
        return sum(meta.num_rows or 0 for _, meta in self._execute(prepared=prepared))

    def _cheap_num_rows(self) -> int | None:
        """The row count when blocks in hand give it without asking a datasource, else None."""
        if not isinstance(self._plan.source, BlocksSource):
            return None
        return PreparedPlan(self._plan).known_num_rows()

    def _cheap_schema(self) -> pa.Schema | None:
        """The schema when known without running anything or asking a datasource, else None."""
        source = self._plan.source
        if not self._plan.ops and isinstance(source, BlocksSource) and source.metadata is None:
            nonempty = [b for b in source.blocks if b.num_columns]
            return nonempty[0].schema if nonempty else None
        return None

    def schema(self, fetch_if_missing: bool = True) -> Schema | None:
        """The schema of the output: its column names and their Arrow types.

        Known without running anything when the source tells it and the operations after
        it keep it computable (filters, projections, ``with_column``, sorts); otherwise
        the plan runs up to its first block, unless ``fetch_if_missing`` is False.

        Args:
            fetch_if_missing: When the schema is not known without running the plan, run it
                (True, the default) or return None (False).

        Returns:
            A :class:`~shardflow.Schema` (its ``base_schema`` is the ``pyarrow.Schema``), or
            None for a dataset without columns, or an unknown schema with
            ``fetch_if_missing=False``.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).schema()
            Column  Type
            ------  ----
            id      int64
            >>> sf.range(3).map(lambda r: r).schema(fetch_if_missing=False) is None
            True
        """
        if not isinstance(fetch_if_missing, bool):
            raise TypeError(f"fetch_if_missing must be a bool, got {fetch_if_missing!r}.")
        base = self._arrow_schema(fetch_if_missing)
        return None if base is None else Schema(base)

    def _arrow_schema(self, fetch_if_missing: bool = True) -> pa.Schema | None:
        """The output's ``pyarrow.Schema`` (what ``schema()`` wraps), for internal callers."""
        prepared = PreparedPlan(self._plan)
        schema = prepared.known_schema()
        if schema is not None or not fetch_if_missing:
            return schema
        for block in self._iter_blocks(prepared=prepared):
            if block.num_columns:
                return block.schema
        return None

    def columns(self, fetch_if_missing: bool = True) -> list[str] | None:
        """The column names.

        Args:
            fetch_if_missing: When the schema is not known without running the plan, run it
                (True, the default) or return None (False).

        Returns:
            The names, or None for a dataset without columns (or an unknown schema with
            ``fetch_if_missing=False``).

        Examples:
            >>> import shardflow as sf
            >>> sf.range(3).columns()
            ['id']
        """
        schema = self.schema(fetch_if_missing=fetch_if_missing)
        return None if schema is None else schema.names

    # -- whole results ------------------------------------------------------------------

    def materialize(self) -> Any:
        """Run the plan and keep the blocks in memory (the object store on Ray).

        Returns:
            A Dataset over the materialized blocks; consuming it does not re-run the plan.
        """
        from shardflow.engine.api.dataset import Dataset

        refs, metas = [], []
        for ref, meta in self._execute():
            refs.append(ref)
            metas.append(meta)
        ds = Dataset(LogicalPlan(BlocksSource(tuple(refs), "Materialized", tuple(metas))))
        ds._last_stats = self._last_stats
        ds._name = getattr(self, "_name", None)
        return ds

    def to_pandas(self, limit: int | None = None) -> Any:
        """All rows as one pandas DataFrame; ValueError when there are more than ``limit``."""
        plan = self._plan if limit is None else self.limit(limit + 1)._plan
        block = concat_blocks(self._execute_blocks(plan))
        if limit is not None and block.num_rows > limit:
            raise ValueError(f"The dataset has more than {limit} rows; raise the limit.")
        return block_to_batch(block, "pandas", DataContext.get_current().pandas_conversion())

    def to_arrow_refs(self) -> list[Any]:
        """References to the output blocks: ObjectRefs on Ray, the tables themselves locally."""
        backend = current_backend()
        return [backend.export_ref(ref) for ref, _ in self._execute()]

    def to_arrow(self) -> pa.Table:
        """All rows as one pyarrow Table."""
        return concat_blocks(self._execute_blocks())

    def stats(self) -> str:
        """Statistics of the last execution of this dataset, as a report.

        Per operator: its tasks, wall time and time in tasks, rows and bytes out, peak queued
        bytes, then min / max / mean over its tasks of their wall time, CPU time, rows and
        bytes out and the peak memory of their workers (exchanges by their map and reduce
        steps); spilled bytes, retries and skipped files where there were any; for
        ``iter_batches`` and its kin, how long the consumer waited for batches. The result is
        a ``str`` whose ``timeline(path)`` writes every task of the execution as a Chrome
        trace-event file (open it in https://ui.perfetto.dev or chrome://tracing).

        Returns:
            The report (a ``str``).

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(1000, override_num_blocks=4).map_batches(lambda b: b)
            >>> _ = ds.take_all()
            >>> print(ds.stats())  # doctest: +SKIP
            Execution on backend 'local': 0.031s wall, 1000 rows out
            Peak bytes in flight: 8.0 KiB (budget 6.0 GiB)
            Operator 1 ReadRange->MapBatches(<lambda>): 4 tasks, 0.024s wall, ...
                * Task wall time: 2.1ms min, 5.0ms max, 3.2ms mean, 12.8ms total
                ...
            >>> ds.stats().timeline("run.json")  # doctest: +SKIP
            'run.json'
        """
        from shardflow.engine.execution.stats import DatasetStats

        if self._last_stats is None:
            return DatasetStats("This dataset has not been executed yet.")
        return DatasetStats(self._last_stats.to_string(), self._last_stats)

    def get_stats_summary(self, detail: bool = False) -> Any:
        """The statistics of the last execution of this dataset, as data (Ray Data's
        ``DatasetStatsSummary``): per operator, min / max / mean / sum over its tasks of
        their wall time, CPU time, rows and bytes out. Before any execution, a summary
        without operators.

        Args:
            detail: Accepted for Ray Data's signature; shardflow's summary always holds
                every figure it has (Ray Data adds scheduling overheads from its state
                API).

        Returns:
            A ``DatasetStatsSummary`` (``to_string()`` gives the report of ``stats()``).

        Examples:
            >>> import shardflow as sf
            >>> ds = sf.range(10).map_batches(lambda b: b)
            >>> _ = ds.take_all()
            >>> ds.get_stats_summary().operators_stats[0].output_num_rows.sum
            10
        """
        if not isinstance(detail, bool):
            raise TypeError(f"get_stats_summary: detail must be a bool, got {detail!r}.")
        from shardflow.engine.execution.stats_summary import DatasetStatsSummary

        return DatasetStatsSummary.of(self._last_stats, getattr(self, "_uuid", ""))

    # -- display ------------------------------------------------------------------------

    def __repr__(self) -> str:
        from shardflow.engine.api.repr import dataset_repr

        return dataset_repr(self)

    def __str__(self) -> str:
        return repr(self)

    def __bool__(self) -> bool:
        return True  # never ask __len__

    def __len__(self) -> int:
        raise _NoLength(
            "Use `ds.count()` to compute the length of a distributed Dataset. "
            "This may be an expensive operation."
        )

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The rows, as ``iter_rows()`` (Ray Data's Dataset is not iterable itself)."""
        return iter(self.iter_rows())


class _NoLength(AttributeError, TypeError):
    """What ``len(ds)`` raises: an AttributeError, as in Ray Data, and a TypeError, which
    ``list(ds)`` takes to mean "no length known" before iterating the rows."""
