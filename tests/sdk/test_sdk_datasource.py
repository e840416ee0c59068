"""ReadTask and the Datasource base class."""

from __future__ import annotations

import dataclasses
import functools
import pickle

import cloudpickle
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shardflow.sdk import BlockMetadata, Datasource, ReadTask
from shardflow.sdk.expressions import col
from shardflow.sdk.pushdowns import Pushdowns


def read_blocks(start: int, rows_per_block: int, num_blocks: int):
    """Module-level read function, so that plain pickle can send it by reference."""
    for i in range(num_blocks):
        lo = start + i * rows_per_block
        yield pa.table({"x": np.arange(lo, lo + rows_per_block, dtype=np.int64)})


def _task(start=0, rows_per_block=10, num_blocks=3, limit=None) -> ReadTask:
    n = rows_per_block * num_blocks
    return ReadTask(
        functools.partial(read_blocks, start, rows_per_block, num_blocks),
        BlockMetadata(num_rows=n, size_bytes=8 * n),
        pa.schema([("x", pa.int64())]),
        limit,
    )


def _rows(task: ReadTask) -> list:
    return [v for block in task() for v in block.column("x").to_pylist()]


def test_read_task_yields_blocks_with_metadata():
    task = _task(start=5)
    blocks = list(task())
    assert [b.num_rows for b in blocks] == [10, 10, 10]
    assert _rows(task) == list(range(5, 35))
    assert task.metadata.num_rows == 30
    assert task.schema == pa.schema([("x", pa.int64())])
    assert task.per_task_row_limit is None
    assert "num_rows=30" in repr(task)


def test_read_task_pickles_module_function_by_reference():
    task = _task(start=100)
    payload = pickle.dumps(task)
    assert b"read_blocks" in payload  # sent by reference, not by value
    again = pickle.loads(payload)
    assert _rows(again) == _rows(task)
    assert again.metadata == task.metadata


def test_read_task_cloudpickles_closures():
    offset = 7

    def read_fn():
        return [pd.DataFrame({"x": np.arange(3) + offset})]

    task = ReadTask(read_fn, BlockMetadata(num_rows=3, size_bytes=24))
    again = cloudpickle.loads(cloudpickle.dumps(task))
    assert _rows(again) == [7, 8, 9]


@pytest.mark.parametrize(
    "limit, expected_blocks",
    # A limit of 0 still yields one empty block: the schema is known (as in Ray Data).
    [(0, [0]), (5, [5]), (10, [10]), (15, [10, 5]), (30, [10, 10, 10]), (100, [10, 10, 10])],
)
def test_per_task_row_limit(limit, expected_blocks):
    task = _task(limit=limit)
    assert [b.num_rows for b in task()] == expected_blocks
    assert _rows(task) == list(range(sum(expected_blocks)))


def test_row_limit_stops_reading_early():
    pulled = []

    def read_fn():
        for i in range(100):
            pulled.append(i)
            yield {"x": np.arange(i * 10, i * 10 + 10)}

    task = ReadTask(read_fn, BlockMetadata(num_rows=1000, size_bytes=8000), per_task_row_limit=25)
    assert sum(b.num_rows for b in task()) == 25
    assert len(pulled) == 3


def test_with_row_limit_takes_smaller_and_caps_metadata():
    task = _task(limit=20)
    assert task.with_row_limit(None) is task
    smaller = task.with_row_limit(12)
    assert smaller.per_task_row_limit == 12
    assert smaller.metadata.num_rows == 12
    assert task.with_row_limit(25).per_task_row_limit == 20
    assert _rows(smaller) == list(range(12))


def test_read_task_accepts_pandas_and_dicts():
    task = ReadTask(
        lambda: [pd.DataFrame({"x": [1, 2]}), {"x": np.array([3])}, pa.table({"x": [4]})],
        BlockMetadata(num_rows=4, size_bytes=None),
    )
    assert all(isinstance(b, pa.Table) for b in task())
    assert _rows(task) == [1, 2, 3, 4]


def test_read_task_validates_arguments():
    with pytest.raises(TypeError, match="callable"):
        ReadTask("not a function", BlockMetadata(1, 1))
    with pytest.raises(ValueError, match="per_task_row_limit"):
        ReadTask(list, BlockMetadata(1, 1), per_task_row_limit=-1)


def test_datasource_defaults():
    class MyDatasource(Datasource):
        pass

    source = MyDatasource()
    assert source.get_name() == "My"
    assert source.estimate_inmemory_data_size() is None
    assert not source.supports_projection_pushdown()
    assert not source.supports_predicate_pushdown()
    assert source.get_projection_map() is None
    assert source.get_current_predicate() is None
    assert not source.is_predicate_pushdown_exact()
    assert source.pushdowns == Pushdowns()
    with pytest.raises(NotImplementedError):
        source.get_read_tasks(1)
    with pytest.raises(TypeError, match="engine expression"):
        source.apply_predicate(None)


def test_default_pushdowns_accumulate_on_copies():
    class MyDatasource(Datasource):
        def __init__(self):
            self.planned = "cache"

    source = MyDatasource()
    projected = source.apply_projection({"a": "a", "b": "out"})
    filtered = projected.apply_predicate(col("a") > 1).apply_predicate(col("b").is_null())
    limited = filtered.apply_limit(10).apply_limit(20)
    assert source.pushdowns.is_empty() and source.get_projection_map() is None
    assert type(limited) is MyDatasource and limited.planned == "cache"
    assert limited.get_projection_map() == {"a": "a", "b": "out"}
    assert limited.pushdowns.columns == ("a", "b")
    assert limited.pushdowns.output_names == ("a", "out")
    assert repr(limited.get_current_predicate()) == "((col('a') > 1) & col('b').is_null())"
    assert limited.pushdowns.limit == 10
    assert limited.effective_pushdowns(per_task_row_limit=3).limit == 3
    assert limited.pushdowns.filter_columns() == {"a", "b"}
    assert projected.get_current_predicate() is None  # earlier copies are unchanged
    assert limited.apply_projection(None).pushdowns.columns is None


def test_pushdowns_validate_and_compare():
    with pytest.raises(TypeError, match="source column"):
        Pushdowns().with_projection(["a"])
    with pytest.raises(ValueError, match="same name"):
        Pushdowns().with_projection({"a": "x", "b": "x"})
    with pytest.raises(ValueError, match="limit"):
        Pushdowns(limit=-1)
    with pytest.raises(TypeError, match="engine expression"):
        Pushdowns(filter="x > 1")
    a = Pushdowns(filter=col("x") > 1, limit=3)
    same = Pushdowns(filter=col("x") > 1, limit=3)
    assert a == same and hash(a) == hash(same)
    assert a != a.with_limit(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.limit = 4
