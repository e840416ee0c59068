"""The optimizer: operator fusion, and limit/projection/predicate pushdown into reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.operators.limit import LimitOperator
from shardflow.engine.execution.operators.map import MapOperator
from shardflow.engine.execution.runtime import current_backend
from shardflow.engine.plan.logical import FilterExpr
from shardflow.engine.plan.optimizer import optimize
from shardflow.engine.plan.planner import plan_physical
from shardflow.sdk.expressions import Expr


def plus_one(row):
    return {"id": row["id"] + 1}


def times_two(batch):
    return {"id": batch["id"] * 2}


def _physical(ds, backend_name="local"):
    """The operators that appear in stats (the plan's input operators do not)."""
    context = DataContext.get_current()
    return plan_physical(optimize(ds._plan), current_backend(context), context).shown()


def _operator_lines(stats: str) -> list[str]:
    return [line for line in stats.splitlines() if line.startswith("Operator ")]


# -- fusion ------------------------------------------------------------------------------


def test_consecutive_map_like_ops_fuse_into_one_operator(backend):
    ds = (
        sf.range(100, override_num_blocks=4)
        .map(plus_one)
        .map_batches(times_two, batch_size=8)
        .filter(sf.col("id") > 10)
        .flat_map(lambda r: [r])
        .add_column("neg", lambda df: -df["id"])
        .select_columns(["id", "neg"])
        .rename_columns({"neg": "minus"})
        .drop_columns(["minus"])
    )
    operators = _physical(ds, backend)
    assert len(operators) == 1
    assert isinstance(operators[0], MapOperator)
    assert len(operators[0].transform.stages) == 8

    rows = ds.take_all()
    assert rows == [{"id": (i + 1) * 2} for i in range(100) if (i + 1) * 2 > 10]
    lines = _operator_lines(ds.stats())
    assert len(lines) == 1
    for name in (
        "ReadRange",
        "Map(plus_one)",
        "MapBatches(times_two)",
        "Filter",
        "FlatMap",
        "AddColumn(neg)",
        "SelectColumns",
        "RenameColumns",
        "DropColumns",
    ):
        assert name in lines[0]
    assert "4 tasks" in lines[0]


def test_limit_splits_fusion(backend):
    ds = sf.range(100, override_num_blocks=4).map(plus_one).limit(10).map_batches(times_two)
    kinds = [type(op) for op in _physical(ds, backend)]
    assert kinds == [MapOperator, LimitOperator, MapOperator]
    assert [r["id"] for r in ds.take_all()] == [(i + 1) * 2 for i in range(10)]
    assert len(_operator_lines(ds.stats())) == 3


def test_in_memory_source_without_ops_needs_no_operator():
    ds = sf.from_items([{"a": 1}])
    assert _physical(ds) == []


# -- limit pushdown ----------------------------------------------------------------------


class LimitRecordingDatasource(sf.Datasource):
    """``num_tasks`` tasks of ``rows_per_task`` rows; remembers the limits it was given."""

    def __init__(self, num_tasks: int = 10, rows_per_task: int = 100):
        self.num_tasks = num_tasks
        self.rows_per_task = rows_per_task
        self.limits_seen: list[int | None] = []

    def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
        self.limits_seen.append(per_task_row_limit)
        rows = self.rows_per_task
        tasks = []
        for t in range(self.num_tasks):

            def read_fn(t=t):
                for lo in range(0, rows, 10):
                    start = t * rows + lo
                    yield pa.table({"id": np.arange(start, start + 10)})

            tasks.append(
                sf.ReadTask(
                    read_fn,
                    sf.BlockMetadata(num_rows=rows, size_bytes=8 * rows),
                    per_task_row_limit=per_task_row_limit,
                )
            )
        return tasks


def test_limit_is_pushed_into_the_read(backend):
    source = LimitRecordingDatasource()
    ds = sf.read_datasource(source).limit(15)
    assert ds.take_all() == [{"id": i} for i in range(15)]
    assert source.limits_seen == [15]
    read_op = ds._last_stats.operators[0]
    assert read_op.tasks == 1  # the first task holds 15 rows: the other nine never run
    assert read_op.rows_out == 15  # and it stopped reading after 15 rows


def test_limit_is_pushed_past_row_preserving_ops(backend):
    source = LimitRecordingDatasource()
    ds = sf.read_datasource(source).map(plus_one).select_columns(["id"]).limit(150)
    assert [r["id"] for r in ds.take_all()] == list(range(1, 151))
    assert source.limits_seen == [150]
    assert ds._last_stats.operators[0].tasks == 2


def test_limit_is_not_pushed_past_ops_that_change_row_count(backend):
    source = LimitRecordingDatasource(num_tasks=3, rows_per_task=20)
    ds = sf.read_datasource(source).filter(sf.col("id") % 2 == 1).limit(5)
    assert [r["id"] for r in ds.take_all()] == [1, 3, 5, 7, 9]
    assert source.limits_seen == [None]
    source = LimitRecordingDatasource(num_tasks=3, rows_per_task=20)
    ds = sf.read_datasource(source).map_batches(lambda b: {"id": np.repeat(b["id"], 2)}).limit(5)
    assert [r["id"] for r in ds.take_all()] == [0, 0, 1, 1, 2]
    assert source.limits_seen == [None]


def test_range_limit_reads_only_what_it_needs(backend):
    ds = sf.range(10**9, override_num_blocks=1000).limit(3)
    assert ds.take_all() == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert ds._last_stats.operators[0].tasks == 1


# -- projection and predicate pushdown ---------------------------------------------------

TABLE = pa.table(
    {
        "a": np.arange(40),
        "b": np.arange(40) * 10,
        "c": np.array(["x", "y", "z", "w"] * 10),
    }
)
PUSHDOWN_LOG: list[tuple] = []


class PushdownDatasource(sf.Datasource):
    """Declares projection and predicate pushdown and logs what it receives.

    ``honor_predicate=False`` ignores the pushed predicate, like a source that can only prune
    by statistics; ``exact`` says whether it claims to filter rows exactly.
    """

    def __init__(
        self,
        projection: dict[str, str] | None = None,
        predicate: Expr | None = None,
        exact: bool = False,
        honor_predicate: bool = True,
    ):
        self.projection = projection
        self.predicate = predicate
        self.exact = exact
        self.honor_predicate = honor_predicate

    def _copy(self, **changes) -> PushdownDatasource:
        args = {
            "projection": self.projection,
            "predicate": self.predicate,
            "exact": self.exact,
            "honor_predicate": self.honor_predicate,
        }
        args.update(changes)
        return PushdownDatasource(**args)

    def supports_projection_pushdown(self) -> bool:
        return True

    def get_projection_map(self) -> dict[str, str] | None:
        return self.projection

    def apply_projection(self, projection_map):
        PUSHDOWN_LOG.append(("projection", dict(projection_map)))
        return self._copy(projection=dict(projection_map))

    def supports_predicate_pushdown(self) -> bool:
        return True

    def get_current_predicate(self) -> Expr | None:
        return self.predicate

    def apply_predicate(self, predicate_expr):
        PUSHDOWN_LOG.append(("predicate", repr(predicate_expr)))
        combined = predicate_expr if self.predicate is None else self.predicate & predicate_expr
        return self._copy(predicate=combined)

    def is_predicate_pushdown_exact(self) -> bool:
        return self.exact

    def get_read_tasks(self, parallelism, **kwargs):
        projection, predicate, honor = self.projection, self.predicate, self.honor_predicate

        def read_fn(lo, hi):
            table = TABLE.slice(lo, hi - lo)
            if honor and predicate is not None:
                table = table.filter(predicate.to_pyarrow())
            if projection is not None:
                table = table.select(list(projection)).rename_columns(list(projection.values()))
            yield table

        return [
            sf.ReadTask(
                lambda lo=lo: read_fn(lo, lo + 10), sf.BlockMetadata(num_rows=None, size_bytes=None)
            )
            for lo in range(0, 40, 10)
        ]


@pytest.fixture
def pushdown_log():
    PUSHDOWN_LOG.clear()
    yield PUSHDOWN_LOG
    PUSHDOWN_LOG.clear()


def _oracle():
    return TABLE.to_pandas()


def _filters_left(ds) -> int:
    return sum(isinstance(op, FilterExpr) for op in optimize(ds._plan).ops)


def test_projection_and_predicate_reach_the_source(backend, pushdown_log):
    ds = (
        sf.read_datasource(PushdownDatasource())
        .filter(sf.col("a") >= 25)
        .select_columns(["a", "c"])
        .rename_columns({"c": "letter"})
    )
    df = _oracle()
    expected = df[df.a >= 25][["a", "c"]].rename(columns={"c": "letter"}).reset_index(drop=True)
    pd.testing.assert_frame_equal(ds.to_pandas(), expected, check_dtype=False)
    assert ("predicate", "(col('a') >= 25)") in pushdown_log
    assert ("projection", {"a": "a", "c": "letter"}) in pushdown_log


def test_non_exact_predicate_is_applied_again(backend, pushdown_log):
    source = PushdownDatasource(honor_predicate=False)
    ds = sf.read_datasource(source).filter((sf.col("b") < 100) | (sf.col("c") == "w"))
    df = _oracle()
    expected = df[(df.b < 100) | (df.c == "w")].reset_index(drop=True)
    pd.testing.assert_frame_equal(ds.to_pandas(), expected, check_dtype=False)
    assert any(kind == "predicate" for kind, _ in pushdown_log)
    assert _filters_left(ds) == 1


def test_exact_predicate_is_not_applied_again(backend, pushdown_log):
    honest = sf.read_datasource(PushdownDatasource(exact=True)).filter(sf.col("a") < 5)
    assert _filters_left(honest) == 0
    assert [r["a"] for r in honest.take_all()] == [0, 1, 2, 3, 4]
    # a source that claims exactness is trusted: the engine adds no filter of its own
    lying = sf.read_datasource(PushdownDatasource(exact=True, honor_predicate=False))
    assert lying.filter(sf.col("a") < 5).count() == 40


def test_projection_keeps_columns_a_reapplied_filter_needs(backend, pushdown_log):
    source = PushdownDatasource(honor_predicate=False)
    ds = sf.read_datasource(source).filter(sf.col("a") > 35).select_columns(["b"])
    assert ds.take_all() == [{"b": 360}, {"b": 370}, {"b": 380}, {"b": 390}]


def test_filters_after_other_ops_are_not_pushed(backend, pushdown_log):
    ds = (
        sf.read_datasource(PushdownDatasource())
        .map_batches(lambda b: {"a": b["a"] * 2})
        .filter(sf.col("a") > 70)
    )
    assert [r["a"] for r in ds.take_all()] == [72, 74, 76, 78]
    assert not any(kind == "predicate" for kind, _ in pushdown_log)


def test_optimized_plan_computes_the_same_rows():
    ds = (
        sf.read_datasource(PushdownDatasource(honor_predicate=False))
        .filter(sf.col("a") % 3 == 0)
        .select_columns(["a", "b"])
        .rename_columns({"b": "bee"})
        .limit(6)
    )
    df = _oracle()
    expected = df[df.a % 3 == 0][["a", "b"]].rename(columns={"b": "bee"}).head(6)
    expected = expected.reset_index(drop=True)
    pd.testing.assert_frame_equal(ds.to_pandas(), expected, check_dtype=False)
