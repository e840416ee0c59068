"""Errors: user exceptions reach the caller once, named and with their traceback; bad
arguments are refused early; failures and early stops never hang."""

from __future__ import annotations

import os
import time
import uuid

import numpy as np
import pytest

import shardflow as sf


def divide_row_by_zero(row):
    return {"x": row["id"] / 0}


def divide_batch_by_zero(batch):
    if batch["id"][0] >= 0:
        raise ZeroDivisionError("batch division by zero")
    return batch


def filter_divides_by_zero(row):
    return 1 // (row["id"] - row["id"]) > 0


def flat_map_divides_by_zero(row):
    return [{"x": 1 / (row["id"] * 0)}]


def fail_on_first_block(batch, folder):
    """Records each call; the task that sees row 0 fails, the others are slow."""
    with open(os.path.join(folder, uuid.uuid4().hex), "w"):
        pass
    if batch["id"][0] == 0:
        raise ValueError("bad record 0")
    time.sleep(0.3)
    return batch


def kill_worker(row):
    os._exit(1)


class CustomError(Exception):
    pass


def raise_custom(batch):
    raise CustomError("custom failure")


UDF_CASES = [
    ("map", lambda ds: ds.map(divide_row_by_zero), "Map(divide_row_by_zero)"),
    (
        "map_batches",
        lambda ds: ds.map_batches(divide_batch_by_zero),
        "MapBatches(divide_batch_by_zero)",
    ),
    ("filter", lambda ds: ds.filter(filter_divides_by_zero), "Filter(filter_divides_by_zero)"),
    (
        "flat_map",
        lambda ds: ds.flat_map(flat_map_divides_by_zero),
        "FlatMap(flat_map_divides_by_zero)",
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("label, build, operator", UDF_CASES, ids=[c[0] for c in UDF_CASES])
def test_user_exception_reaches_caller(backend, label, build, operator):
    ds = build(sf.range(100, override_num_blocks=4))
    with pytest.raises(ZeroDivisionError) as info:
        ds.take_all()
    error = info.value
    assert isinstance(error, sf.UserCodeError)
    message = str(error)
    assert operator in message
    # the user's traceback, with the function's frame
    assert "Traceback" in message
    assert f"in {operator.split('(')[1].rstrip(')')}" in message
    assert error.operator and operator in error.operator
    assert f"in {operator.split('(')[1].rstrip(')')}" in error.user_traceback
    # one exception, not a group of them
    assert not hasattr(error, "exceptions")


@pytest.mark.timeout(60)
def test_user_exception_of_custom_type(backend):
    with pytest.raises(CustomError, match="custom failure") as info:
        sf.range(10).map_batches(raise_custom).take_all()
    assert "MapBatches(raise_custom)" in str(info.value)


@pytest.mark.timeout(60)
def test_error_through_every_consumer(backend):
    ds = sf.range(20).map_batches(divide_batch_by_zero)
    for consume in (
        lambda: ds.take(1),
        lambda: ds.count(),
        lambda: ds.sum("id"),
        lambda: ds.to_pandas(),
        lambda: ds.materialize(),
        lambda: list(ds.iter_batches(batch_size=5, prefetch_batches=2)),
        lambda: list(ds.iter_rows()),
    ):
        with pytest.raises(ZeroDivisionError):
            consume()


# -- argument validation -----------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [0, -5])
def test_batch_size_must_be_positive(batch_size):
    ds = sf.range(10)
    with pytest.raises(ValueError, match="batch_size"):
        ds.map_batches(lambda b: b, batch_size=batch_size)
    with pytest.raises(ValueError, match="batch_size"):
        ds.iter_batches(batch_size=batch_size)
    with pytest.raises(ValueError, match="batch_size"):
        ds.take_batch(batch_size)


def test_batch_size_must_be_an_int():
    with pytest.raises(TypeError, match="batch_size"):
        sf.range(10).map_batches(lambda b: b, batch_size="big")
    with pytest.raises(TypeError, match="batch_size"):
        sf.range(10).iter_batches(batch_size=2.5)


def test_unknown_batch_format():
    ds = sf.range(10)
    with pytest.raises(ValueError, match="batch_format"):
        ds.map_batches(lambda b: b, batch_format="polars")
    with pytest.raises(ValueError, match="batch_format"):
        ds.iter_batches(batch_format="arrow")
    with pytest.raises(ValueError, match="batch_format"):
        ds.take_batch(3, batch_format="dict")
    with pytest.raises(ValueError, match="batch_format"):
        ds.add_column("x", lambda d: d, batch_format="torch")


def test_negative_limit():
    with pytest.raises(ValueError, match="limit"):
        sf.range(10).limit(-1)
    with pytest.raises(TypeError, match="limit"):
        sf.range(10).limit(2.0)


@pytest.mark.parametrize("method", ["map", "map_batches", "flat_map"])
def test_fn_must_be_callable(method):
    with pytest.raises(TypeError, match=method):
        getattr(sf.range(3), method)(42)


def test_filter_fn_must_be_callable():
    # ValueError, as Ray Data raises (a string belongs in expr=)
    with pytest.raises(ValueError, match="fn must be a function"):
        sf.range(3).filter(42)
    with pytest.raises(ValueError, match="expr="):
        sf.range(3).filter(fn="id > 1")


def test_add_column_validation():
    with pytest.raises(ValueError, match="must be callable"):  # Ray Data's type
        sf.range(3).add_column("x", "not callable")
    with pytest.raises(TypeError, match="column name"):
        sf.range(3).add_column("", lambda d: d)


def test_filter_needs_exactly_one_of_fn_and_expr():
    with pytest.raises(ValueError, match="exactly one"):
        sf.range(3).filter()
    with pytest.raises(ValueError, match="exactly one"):
        sf.range(3).filter(lambda r: True, expr=sf.col("id") > 1)


@pytest.mark.timeout(60)
def test_unknown_columns(backend):
    ds = sf.from_items([{"a": 1, "b": 2}])
    with pytest.raises(ValueError, match="nope"):
        ds.select_columns(["a", "nope"]).take_all()
    with pytest.raises(ValueError, match="nope"):
        ds.drop_columns(["nope"]).take_all()
    with pytest.raises(ValueError, match="nope"):
        ds.rename_columns({"nope": "x"}).take_all()
    with pytest.raises(ValueError, match="nope"):
        ds.filter(sf.col("nope") > 1).take_all()


def test_column_argument_types():
    # the exception types of Ray Data
    with pytest.raises(ValueError, match="strings"):
        sf.range(3).select_columns([1, 2])
    with pytest.raises(TypeError, match="list"):
        sf.range(3).select_columns(("id",))
    with pytest.raises(ValueError, match="duplicate"):
        sf.range(3).select_columns(["id", "id"])
    with pytest.raises(ValueError, match="duplicate"):
        sf.from_items([{"a": 1, "b": 2}]).rename_columns({"a": "x", "b": "x"})
    with pytest.raises(ValueError, match="strings"):
        sf.range(3).rename_columns({"id": 3})
    with pytest.raises(ValueError, match="length match"):
        sf.range(3).rename_columns(["a", "b"])
    with pytest.raises(TypeError):
        sf.range(3).rename_columns("a")


def test_bad_udf_output_is_explained(backend):
    # ValueError naming the operator, as Ray Data raises
    with pytest.raises(ValueError, match="MapBatches"):
        sf.range(3).map_batches(lambda b: [1, 2, 3]).take_all()
    with pytest.raises(ValueError, match=r"Map\(<lambda>\).*dict"):
        sf.range(3).map(lambda r: r["id"]).take_all()
    with pytest.raises(TypeError, match="FlatMap"):
        sf.range(3).flat_map(lambda r: 5).take_all()
    with pytest.raises(ValueError, match="FlatMap"):
        sf.range(3).flat_map(lambda r: r).take_all()


# -- cancellation, early stop, crashes ---------------------------------------------------


@pytest.mark.timeout(60)
def test_failure_cancels_outstanding_work(backend, tmp_path):
    ds = sf.range(100 * 50, override_num_blocks=100).map_batches(
        fail_on_first_block, fn_args=(str(tmp_path),), batch_size=None
    )
    with pytest.raises(ValueError, match="bad record 0"):
        ds.take_all()
    time.sleep(0.5)  # anything still running would leave more files
    calls = len(os.listdir(tmp_path))
    assert calls < 20, f"{calls} of 100 tasks ran after the first one failed"
    # the backend is healthy afterwards
    assert sf.range(10).map_batches(lambda b: b).count() == 10


@pytest.mark.timeout(60)
def test_early_stop_of_iteration_returns_promptly(backend):
    # a billion rows: reading them all would take far longer than the test's timeout
    ds = sf.range(10**9, override_num_blocks=200).map_batches(lambda b: {"id": b["id"] * 2})
    for batch in ds.iter_batches(batch_size=100):
        np.testing.assert_array_equal(batch["id"], np.arange(100) * 2)
        break
    iterator = iter(ds.iter_rows())
    assert next(iterator) == {"id": 0}
    del iterator
    assert sf.range(5).take_all() == [{"id": i} for i in range(5)]


@pytest.mark.timeout(60)
def test_early_stop_with_prefetch(backend):
    ds = sf.range(10**8, override_num_blocks=100)
    batches = ds.iter_batches(batch_size=10, prefetch_batches=4)
    first = next(iter(batches))
    batches.close()
    np.testing.assert_array_equal(first["id"], np.arange(10))


@pytest.mark.timeout(60)
def test_worker_process_crash_is_reported(fresh_context):
    from shardflow.engine.execution.backends.base import PROCESS
    from shardflow.engine.plan.optimizer import optimize
    from shardflow.engine.plan.planner import plan_physical

    sf.init(backend="local")
    fresh_context.num_cpus = 2
    ds = sf.range(20, override_num_blocks=2).map(kill_worker)
    # os._exit in this process would end the test session: make sure it runs in a worker
    from shardflow.engine.execution.runtime import current_backend

    physical = plan_physical(optimize(ds._plan), current_backend(fresh_context), fresh_context)
    assert [op.kind for op in physical.shown()] == [PROCESS]
    with pytest.raises(sf.WorkerCrashedError) as info:
        ds.take_all()
    message = str(info.value)
    assert "Map(kill_worker)" in message
    assert "worker process" in message and "died" in message
    assert "exit code" not in message or "exit code 1" in message
    # the pool replaces the dead worker
    assert [r["x"] for r in sf.range(3).map(lambda r: {"x": r["id"]}).take_all()] == [0, 1, 2]


class ContextOnlyError(Exception):
    """An exception whose constructor refuses a message, as Ray's ActorDiedError does."""

    def __init__(self, context: dict):
        assert isinstance(context, dict)
        super().__init__(context)

    def __reduce__(self):
        return (ContextOnlyError, self.args)


def test_an_error_whose_type_refuses_a_message_is_raised_with_it_as_the_cause():
    from shardflow.engine.execution.errors import TaskFailure, UserCodeError

    original = ContextOnlyError({"actor": "gone"})
    raised = TaskFailure("MapBatches(f)", original).to_exception()
    assert isinstance(raised, UserCodeError)
    assert isinstance(raised.__cause__, ContextOnlyError)
    assert raised.__cause__.args == ({"actor": "gone"},)
    assert "ContextOnlyError" in str(raised) and "MapBatches(f)" in str(raised)
