"""Input identity of resumable writes: position ranges, and Parquet read tasks that skip the row
groups an earlier run wrote however the rerun splits the file."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardflow.connectors.parquet import ParquetDatasource
from shardflow.sdk.file_reading import FileReadTask, FileUnit
from shardflow.sdk.input_identity import (
    DoneInputs,
    InputItem,
    InputPiece,
    OverlappingPiecesError,
    compare_listings,
    intersect,
    normalize,
    subtract,
    union,
)
from shardflow.sdk.retry import RetryConfig

ranges = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6).map(normalize)


def positions(rs):
    return {p for lo, hi in rs for p in range(lo, hi)}


@given(ranges, ranges)
def test_range_arithmetic_matches_sets_of_positions(a, b):
    assert positions(union(a, b)) == positions(a) | positions(b)
    assert positions(intersect(a, b)) == positions(a) & positions(b)
    assert positions(subtract(a, b)) == positions(a) - positions(b)
    for result in (union(a, b), intersect(a, b), subtract(a, b)):
        assert list(result) == sorted(result)
        assert all(lo < hi for lo, hi in result)
        assert all(x[1] < y[0] for x, y in zip(result, result[1:]))  # disjoint, not touching


def test_done_inputs_refuse_overlapping_claims_and_tell_what_is_left():
    item = InputItem("f.parquet", 99, "v1")
    done = DoneInputs()
    done.add(InputPiece(item, ((0, 40),)), "task a")
    with pytest.raises(OverlappingPiecesError, match="task b and task a both recorded"):
        done.add(InputPiece(item, ((30, 60),)), "task b")
    assert done.remaining(InputPiece(item, ((20, 70),))) == ((40, 70),)
    assert done.remaining(InputPiece(InputItem("f.parquet", 99, "v2"))) == ((0, 100),)


def test_listing_changes_name_the_files():
    before = [InputItem("a", 1, "1"), InputItem("b", 2, "1"), InputItem("c", 3, "1")]
    after = [InputItem("a", 1, "1"), InputItem("b", 2, "2"), InputItem("d", 4, "1")]
    change = compare_listings(before, after)
    assert (change.added, change.removed, change.changed) == (("d",), ("c",), ("b",))
    assert "1 added: d" in change.describe() and "1 removed: c" in change.describe()
    assert not compare_listings(before, before)


ROW_GROUPS = 12
ROWS_PER_GROUP = 7


@pytest.fixture(scope="module")
def parquet_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rg") / "f.parquet")
    table = pa.table({"id": pa.array(range(ROW_GROUPS * ROWS_PER_GROUP), pa.int64())})
    pq.write_table(table, path, row_group_size=ROWS_PER_GROUP)
    return path


def _tasks(path, bounds):
    """Read tasks over the byte ranges cut at ``bounds`` (as Parquet splits plan them)."""
    ds = ParquetDatasource(path)
    (unit,) = ds._file_units()
    size = unit.size
    cuts = [0] + sorted({int(b * size) for b in bounds if 0 < int(b * size) <= size}) + [size + 1]
    units = [
        FileUnit(unit.path, hi - lo, (), (lo, hi), unit.version, size)
        for lo, hi in zip(cuts, cuts[1:])
        if hi > lo
    ]
    return ds, [FileReadTask(ds, [u], RetryConfig(), 0) for u in units]


def _ids(task):
    return [i for block in task() for i in block.column("id").to_pylist()]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=st.lists(st.floats(0.01, 0.99), max_size=8),
    done_mask=st.lists(st.booleans(), min_size=9, max_size=9),
    second=st.lists(st.floats(0.01, 0.99), max_size=8),
)
def test_a_rerun_split_differently_reads_exactly_the_row_groups_not_written(
    parquet_file, first, done_mask, second
):
    """Run 1 splits the file at ``first`` and finishes the tasks of ``done_mask``; run 2
    splits it at ``second`` and skips what run 1 recorded: together they read every row
    exactly once."""
    _, run1 = _tasks(parquet_file, first)
    done, written = DoneInputs(), []
    for n, (task, finished) in enumerate(zip(run1, done_mask)):
        if finished:
            for piece in task.input_pieces():
                done.add(piece, f"task {n}")
            written += _ids(task)
    _, run2 = _tasks(parquet_file, second)
    rest = []
    for task in run2:
        left = task.remaining(done)
        if left is not None:
            rest += _ids(left)
    assert sorted(written + rest) == list(range(ROW_GROUPS * ROWS_PER_GROUP))


def test_a_task_wholly_done_is_dropped_and_a_mixed_one_keeps_its_other_files(tmp_path):
    for name in ("a", "b"):
        pq.write_table(pa.table({"id": [1, 2]}), str(tmp_path / f"{name}.parquet"))
    ds = ParquetDatasource(str(tmp_path))
    a, b = ds._file_units()
    task = FileReadTask(ds, [a, b], RetryConfig(), 0)
    done = DoneInputs()
    done.add(FileReadTask(ds, [a], RetryConfig(), 0).input_pieces()[0], "a")
    left = task.remaining(done)
    assert [u.path for u in left.units] == [b.path]
    done.add(FileReadTask(ds, [b], RetryConfig(), 0).input_pieces()[0], "b")
    assert task.remaining(done) is None
    assert FileReadTask(ds, [a], RetryConfig(), 0).remaining(DoneInputs()) is not None
