"""Conformance checks for the write contract (Datasink): round trips and all-or-nothing."""

from __future__ import annotations

import functools
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.datasink import TaskContext, WriteResult
from shardflow.sdk.testing.checks import (
    WRITE,
    SkipCheck,
    call_optional,
    check,
    files_under,
    import_shardflow,
)
from shardflow.sdk.testing.compare import assert_same_rows, concat, error_text


class InjectedWriteError(RuntimeError):
    """The failure the kit injects into a write to check that nothing is left behind."""


def _split(table: pa.Table, parts: int) -> list[pa.Table]:
    step = -(-table.num_rows // parts) if table.num_rows else 0
    if not step:
        return [table.slice(0, 0)]
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


def _sink(suite: Any, tmp_path: Path) -> Any:
    return call_optional(suite.make_datasink, "make_datasink", tmp_path)


def _pickle_roundtrip(obj: Any) -> Any:
    import cloudpickle  # what the engine ships tasks with

    return pickle.loads(cloudpickle.dumps(obj))


def _worker_copy(sink: Any) -> Any:
    try:
        return _pickle_roundtrip(sink)
    except Exception as exc:
        raise AssertionError(
            f"the datasink cannot be pickled after on_write_start ({error_text(exc)}); write tasks "
            "receive a pickled copy, so keep clients out of its state or recreate them lazily."
        ) from exc


def _visible(suite: Any, tmp_path: Path) -> pa.Table | None:
    """What read_back sees now; None when it finds nothing to read (it raised)."""
    try:
        table = suite.read_back(tmp_path)
    except NotImplementedError:
        raise SkipCheck("the suite does not define read_back") from None
    except Exception:
        return None
    return table


def _rows(table: pa.Table | None) -> int:
    return 0 if table is None else table.num_rows


def _write_tasks(sink: Any, tasks: list[list[pa.Table]], write_uuid: str) -> list[Any]:
    worker = _worker_copy(sink)
    returns = []
    for i, blocks in enumerate(tasks):
        result = worker.write(
            iter(blocks), TaskContext(task_idx=i, op_name="Write", write_uuid=write_uuid)
        )
        try:
            returns.append(_pickle_roundtrip(result))
        except Exception as exc:
            raise AssertionError(
                f"write task {i} returned an unpicklable value: {error_text(exc)}"
            ) from exc
    return returns


@check(WRITE)
def check_write_round_trip(suite: Any, tmp_path: Path) -> None:
    """Blocks written by several tasks (an empty block among them) stay invisible until
    on_write_complete, then read back equal.
    """
    expected = suite.expected_table()
    sink = _sink(suite, tmp_path)
    sink.on_write_start(expected.schema)
    blocks = _split(expected, 5)
    tasks = [blocks[0:2], blocks[2:3] + [expected.slice(0, 0)], blocks[3:]]
    returns = _write_tasks(sink, tasks, uuid.uuid4().hex)
    early = _visible(suite, tmp_path)
    if _rows(early):
        raise AssertionError(
            f"{_rows(early)} rows were visible before on_write_complete; stage the output and make "
            "it visible only in on_write_complete (the commit)."
        )
    sink.on_write_complete(WriteResult(expected.num_rows, expected.nbytes, returns))
    got = _visible(suite, tmp_path)
    if got is None:
        suite.read_back(tmp_path)  # raise read_back's own error
    assert_same_rows(
        concat([got], expected), expected, "rows read back after the write", suite.check_types
    )


@check(WRITE)
def check_write_through_shardflow(suite: Any, tmp_path: Path) -> None:
    """Dataset.write_datasink writes every row exactly once."""
    sf = import_shardflow()
    expected = suite.expected_table()
    sink = _sink(suite, tmp_path)
    sf.from_arrow(_split(expected, 3)).write_datasink(sink)
    got = suite.read_back(tmp_path)
    assert_same_rows(
        concat([got], expected), expected, "rows read back after write_datasink", suite.check_types
    )


def _blocks_then_fail(blocks: list[pa.Table]) -> Iterator[pa.Table]:
    yield from blocks
    raise InjectedWriteError("injected failure in the middle of a write task")


def _failed_write(suite: Any, sink: Any, expected: pa.Table) -> None:
    try:
        sink.on_write_start(expected.schema)
    except Exception:
        return  # refusing to start (e.g. the destination exists) also leaves it unchanged
    blocks = _split(expected, 4)
    worker = _worker_copy(sink)
    worker.write(iter(blocks[:2]), TaskContext(task_idx=0, write_uuid="kit"))
    try:
        worker.write(_blocks_then_fail(blocks[2:]), TaskContext(task_idx=1, write_uuid="kit"))
    except InjectedWriteError as exc:
        sink.on_write_failed(exc)
        return
    except Exception as exc:
        sink.on_write_failed(exc)
        if not isinstance(exc.__cause__ or exc.__context__, InjectedWriteError):
            raise AssertionError(
                f"write raised {error_text(exc)} instead of the input's error"
            ) from exc
        return
    raise AssertionError(
        "write() swallowed the error raised by its input blocks; let it propagate."
    )


def _state(suite: Any, tmp_path: Path) -> tuple[list[str], pa.Table | None]:
    return files_under(tmp_path), _visible(suite, tmp_path)


def _assert_unchanged(
    suite: Any,
    before: tuple[list[str], pa.Table | None],
    after: tuple[list[str], pa.Table | None],
    what: str,
) -> None:
    (files_before, table_before), (files_after, table_after) = before, after
    if files_after != files_before:
        extra = sorted(set(files_after) - set(files_before))
        gone = sorted(set(files_before) - set(files_after))
        raise AssertionError(
            f"{what}: files changed; left behind {extra}, removed {gone}. "
            "on_write_failed must delete what the write staged."
        )
    if table_before is None or table_after is None:
        if _rows(table_before) != _rows(table_after):
            raise AssertionError(
                f"{what}: read_back saw {_rows(table_after)} rows, before {_rows(table_before)}."
            )
        return
    assert_same_rows(table_after, table_before, f"{what}: rows read back", suite.check_types)


@check(WRITE)
def check_failed_write_leaves_nothing(suite: Any, tmp_path: Path) -> None:
    """A write task failing midway (write lets its input's error propagate), then on_write_failed,
    leaves the destination as it was.
    """
    expected = suite.expected_table()
    if expected.num_rows < 2:
        raise SkipCheck("expected_table() needs at least 2 rows")
    sink = _sink(suite, tmp_path)
    before = _state(suite, tmp_path)
    _failed_write(suite, sink, expected)
    _assert_unchanged(suite, before, _state(suite, tmp_path), "after a failed write")


@check(WRITE)
def check_failed_write_keeps_existing_data(suite: Any, tmp_path: Path) -> None:
    """A failed write over committed data leaves that data exactly as it was."""
    sf = import_shardflow()
    expected = suite.expected_table()
    if expected.num_rows < 2:
        raise SkipCheck("expected_table() needs at least 2 rows")
    sf.from_arrow(_split(expected, 2)).write_datasink(_sink(suite, tmp_path))
    before = _state(suite, tmp_path)
    _failed_write(suite, _sink(suite, tmp_path), expected)
    _assert_unchanged(
        suite, before, _state(suite, tmp_path), "after a failed write over existing data"
    )


def _fail_on_size(rows: int, batch: pa.Table) -> pa.Table:
    if batch.num_rows == rows:
        raise InjectedWriteError(f"injected failure on the block of {rows} rows")
    return batch


@check(WRITE)
def check_failed_pipeline_write_leaves_nothing(suite: Any, tmp_path: Path) -> None:
    """When a task of Dataset.write_datasink fails, its error reaches the caller and the
    destination is left as it was.
    """
    sf = import_shardflow()
    expected = suite.expected_table()
    if expected.num_rows < 3:
        raise SkipCheck("expected_table() needs at least 3 rows")
    # The failing block is the only one of its size, so other tasks write before it fails.
    rest = expected.slice(1)
    blocks = [
        rest.slice(0, (rest.num_rows + 1) // 2),
        rest.slice((rest.num_rows + 1) // 2),
        expected.slice(0, 1),
    ]
    sink = _sink(suite, tmp_path)
    before = _state(suite, tmp_path)
    dataset = sf.from_arrow(blocks).map_batches(
        functools.partial(_fail_on_size, 1), batch_size=None, batch_format="pyarrow"
    )
    try:
        dataset.write_datasink(sink)
    except Exception as exc:
        if "injected failure" not in error_text(exc):
            raise AssertionError(f"the write failed with another error: {error_text(exc)}") from exc
    else:
        raise AssertionError("the write succeeded although one of its tasks failed.")
    _assert_unchanged(suite, before, _state(suite, tmp_path), "after a failed write_datasink")


@check(WRITE)
def check_write_of_no_rows(suite: Any, tmp_path: Path) -> None:
    """Write tasks given no blocks, or only empty ones, succeed and commit no rows."""
    expected = suite.expected_table()
    sink = _sink(suite, tmp_path)
    sink.on_write_start(expected.schema)
    returns = _write_tasks(sink, [[], [expected.slice(0, 0)]], uuid.uuid4().hex)
    sink.on_write_complete(WriteResult(0, 0, returns))
    got = _visible(suite, tmp_path)
    if _rows(got):
        raise AssertionError(f"writing no rows made {_rows(got)} rows visible.")
