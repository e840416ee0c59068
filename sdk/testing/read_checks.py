"""Conformance checks for the read contract (Datasource and ReadTask)."""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.expressions import Expr, col
from shardflow.sdk.testing.checks import (
    READ,
    SkipCheck,
    accepts_row_limit,
    call_optional,
    check,
    import_shardflow,
    plan,
    run_task,
)
from shardflow.sdk.testing.compare import (
    assert_rows_included,
    assert_same_columns,
    assert_same_rows,
    concat,
    error_text,
)

_TASKS_FOR_ORDER_CHECKS = 4


def _read(tasks: list[Any], expected: pa.Table) -> pa.Table:
    return concat([block for task in tasks for block in run_task(task)], expected)


def _roundtrip(task: Any) -> Any:
    # The engine ships tasks with cloudpickle and workers load them with the standard loader.
    import cloudpickle

    return pickle.loads(cloudpickle.dumps(task))


@check(READ)
def check_read_matches_expected(suite: Any, tmp_path: Path) -> None:
    """Running every read task gives exactly the expected rows and columns, in any order."""
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    tasks = plan(source, _TASKS_FOR_ORDER_CHECKS)
    assert_same_rows(_read(tasks, expected), expected, "rows read", suite.check_types)


@check(READ)
def check_parallelism_gives_same_rows(suite: Any, tmp_path: Path) -> None:
    """Every parallelism asked for (suite.parallelisms) gives the same multiset of rows."""
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    for parallelism in suite.parallelisms:
        tasks = plan(source, parallelism)
        assert_same_rows(
            _read(tasks, expected),
            expected,
            f"rows read with parallelism={parallelism}",
            suite.check_types,
        )


@check(READ)
def check_read_tasks_picklable(suite: Any, tmp_path: Path) -> None:
    """Read tasks survive a cloudpickle round trip, and the copies read the same rows."""
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    copies = []
    for i, task in enumerate(plan(source, _TASKS_FOR_ORDER_CHECKS)):
        try:
            copies.append(_roundtrip(task))
        except Exception as exc:
            raise AssertionError(
                f"read task {i} cannot be pickled ({error_text(exc)}). Build read_fn from "
                "module-level functions and plain values (paths, options), not open files, "
                "clients or locks."
            ) from exc
    assert_same_rows(
        _read(copies, expected), expected, "rows read by unpickled tasks", suite.check_types
    )


@check(READ)
def check_read_tasks_run_in_another_process(suite: Any, tmp_path: Path) -> None:
    """Pickled read tasks run in a fresh Python process, as worker processes and Ray run them, and
    read the same rows.
    """
    if not getattr(suite, "check_in_subprocess", True):
        raise SkipCheck("check_in_subprocess is False on the suite")
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    import cloudpickle

    payload = cloudpickle.dumps(plan(source, _TASKS_FOR_ORDER_CHECKS))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=payload,
        capture_output=True,
        env=env,
        timeout=120,
    )
    if proc.returncode != 0:
        raise AssertionError(
            "running the pickled read tasks in another process failed:\n"
            + proc.stderr.decode(errors="replace")[-3000:]
        )
    reader = pa.ipc.open_stream(pa.py_buffer(proc.stdout))
    assert_same_rows(
        concat([reader.read_all()], expected),
        expected,
        "rows read in another process",
        suite.check_types,
    )


# The child leaves with os._exit once its rows are written: what is checked is the rows, and
# an interpreter's teardown beside the native threads of a decoding library (PyAV, Arrow) has
# aborted now and then ("terminate called without an active exception") after the rows were
# out.
_CHILD = """
import os, pickle, sys
import pyarrow as pa
tasks = pickle.loads(sys.stdin.buffer.read())
blocks = [b for t in tasks for b in t() if b.num_rows or b.num_columns]
table = pa.concat_tables(blocks, promote_options="permissive") if blocks else pa.table({})
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, table.schema) as writer:
    writer.write_table(table)
sys.stdout.buffer.write(sink.getvalue().to_pybytes())
sys.stdout.buffer.flush()
os._exit(0)
"""


@check(READ)
def check_read_tasks_independent(suite: Any, tmp_path: Path) -> None:
    """Tasks give the same rows run in any order (reversed, shuffled) and when run again."""
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    tasks = plan(source, _TASKS_FOR_ORDER_CHECKS)
    first = [concat(run_task(t), expected) for t in tasks]
    order = list(range(len(tasks)))
    shuffled = order[:]
    random.Random(0).shuffle(shuffled)
    for label, indices in (("reversed", order[::-1]), ("shuffled", shuffled), ("again", order)):
        for i in indices:
            again = concat(run_task(_roundtrip(tasks[i])), expected)
            assert_same_rows(again, first[i], f"task {i} run {label}", suite.check_types)


@check(READ)
def check_metadata_consistent(suite: Any, tmp_path: Path) -> None:
    """num_rows, when given, equals the rows read; size_bytes and estimate_inmemory_data_size() are
    within suite.size_bytes_factor of the size in memory; input_files is a list of str.
    """
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    tasks = plan(source, _TASKS_FOR_ORDER_CHECKS)
    total_bytes = 0
    for i, task in enumerate(tasks):
        meta = task.metadata
        table = concat(run_task(task), expected)
        total_bytes += table.nbytes
        if meta.num_rows is not None and meta.num_rows != table.num_rows:
            raise AssertionError(
                f"read task {i} declares num_rows={meta.num_rows} but yielded {table.num_rows} "
                "rows; "
                "the engine answers count() from this metadata. Give None when unsure."
            )
        if meta.size_bytes is not None:
            _check_size(suite, meta.size_bytes, table.nbytes, f"read task {i}'s size_bytes")
        if meta.input_files is not None and not all(isinstance(f, str) for f in meta.input_files):
            raise AssertionError(
                f"read task {i}'s input_files must be a list of str, got {meta.input_files!r}."
            )
    estimate = source.estimate_inmemory_data_size()
    if estimate is not None:
        _check_size(suite, estimate, total_bytes, "estimate_inmemory_data_size()")


def _check_size(suite: Any, declared: int, actual: int, what: str) -> None:
    factor, slack = suite.size_bytes_factor, suite.size_bytes_slack
    if declared < 0 or declared > actual * factor + slack or declared < actual / factor - slack:
        raise AssertionError(
            f"{what} is {declared} but the data read takes {actual} bytes in memory, more than a "
            f"factor of {factor} apart (plus {slack} bytes). Give an estimate closer to the "
            "in-memory size, or None when unknown."
        )


@check(READ)
def check_schema_stable(suite: Any, tmp_path: Path) -> None:
    """Every block with columns, of every task, has one schema (metadata aside), equal to
    ReadTask.schema when that is given.
    """
    source = suite.make_datasource(tmp_path)
    seen = None
    for i, task in enumerate(plan(source, _TASKS_FOR_ORDER_CHECKS)):
        for block in run_task(task):
            if block.num_columns == 0 and block.num_rows == 0:
                continue
            schema = block.schema.remove_metadata()
            if task.schema is not None and not _same_fields(schema, task.schema):
                raise AssertionError(
                    f"read task {i} declares schema {_fields(task.schema)} but yielded "
                    f"{_fields(schema)}."
                )
            if seen is not None and not _same_fields(schema, seen):
                raise AssertionError(
                    f"read task {i} yielded schema {_fields(schema)}, another block had "
                    f"{_fields(seen)}; "
                    "every block of a source must share one schema."
                )
            seen = schema


def _same_fields(a: pa.Schema, b: pa.Schema) -> bool:
    return a.names == b.names and all(x.type.equals(y.type) for x, y in zip(a, b))


def _fields(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"


@check(READ)
def check_empty_source_reads_empty(suite: Any, tmp_path: Path) -> None:
    """A source over empty input (make_empty_datasource) yields no rows, and shardflow reads it as
    an empty dataset.
    """
    source = call_optional(suite.make_empty_datasource, "make_empty_datasource", tmp_path)
    tasks = plan(source, _TASKS_FOR_ORDER_CHECKS)
    rows = sum(b.num_rows for t in tasks for b in run_task(t))
    if rows:
        raise AssertionError(f"the empty source yielded {rows} rows.")
    sf = import_shardflow()
    dataset = sf.read_datasource(source)
    if dataset.count() != 0 or dataset.take_all() != []:
        raise AssertionError("shardflow read rows from the empty source.")


@check(READ)
def check_projection_pushdown(suite: Any, tmp_path: Path) -> None:
    """apply_projection returns a copy whose get_projection_map() is the map and whose tasks yield
    exactly those columns, renamed, in the map's order; the original is unchanged.
    """
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    if not source.supports_projection_pushdown():
        raise SkipCheck("the source does not declare projection pushdown")
    names = expected.column_names
    maps = [{names[0]: names[0]}, {names[0]: f"{names[0]}_renamed"}]
    if len(names) > 1:
        maps.append({names[-1]: names[-1], names[0]: names[0]})
    before = source.get_projection_map()
    for projection in maps:
        projected = source.apply_projection(projection)
        if source.get_projection_map() != before:
            raise AssertionError(
                "apply_projection changed the source it was called on; return a copy."
            )
        if projected.get_projection_map() != projection:
            raise AssertionError(
                f"after apply_projection({projection}), get_projection_map() returned "
                f"{projected.get_projection_map()}."
            )
        oracle = expected.select(list(projection)).rename_columns(list(projection.values()))
        got = _read(plan(projected, _TASKS_FOR_ORDER_CHECKS), oracle)
        assert_same_rows(
            got, oracle, f"rows read after apply_projection({projection})", suite.check_types
        )
    assert_same_rows(
        _read(plan(source, 2), expected),
        expected,
        "rows read from the source after apply_projection",
        suite.check_types,
    )


def default_predicates(expected: pa.Table) -> list[Expr]:
    """Predicates over the first numeric and the first string column of ``expected``."""
    numeric: list[Expr] = []
    text: list[Expr] = []
    for field in expected.schema:
        values = [v for v in expected.column(field.name).to_pylist() if v is not None]
        if not values:
            continue
        if not numeric and (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)):
            numeric.append(col(field.name) >= sorted(values)[len(values) // 2])
        elif not text and pa.types.is_string(field.type):
            text.append(col(field.name) == values[0])
    return numeric + text


@check(READ)
def check_predicate_pushdown(suite: Any, tmp_path: Path) -> None:
    """apply_predicate returns a copy (the original unchanged, get_current_predicate() set) that
    yields every matching row and only rows of the data; only matching rows when declared exact.
    """
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    if not source.supports_predicate_pushdown():
        raise SkipCheck("the source does not declare predicate pushdown")
    predicates = suite.predicates()
    if not predicates:
        raise SkipCheck("no predicates: define predicates() on the suite")
    exact = source.is_predicate_pushdown_exact()
    chains = [[p] for p in predicates] + ([predicates[:2]] if len(predicates) > 1 else [])
    for chain in chains:
        filtered, oracle = source, expected
        for predicate in chain:
            filtered = filtered.apply_predicate(predicate)
            oracle = oracle.filter(predicate.to_pyarrow())
        if source.get_current_predicate() is not None:
            raise AssertionError(
                "apply_predicate changed the source it was called on; return a copy."
            )
        if filtered.get_current_predicate() is None:
            raise AssertionError("after apply_predicate, get_current_predicate() returned None.")
        got = _read(plan(filtered, _TASKS_FOR_ORDER_CHECKS), expected)
        what = f"rows read with predicate {' & '.join(map(repr, chain))}"
        if exact:
            assert_same_rows(got, oracle, what + " (declared exact)", suite.check_types)
        else:
            assert_same_columns(got, expected, what, suite.check_types)
            assert_rows_included(got, oracle, what)
            assert_rows_included(expected, got, what + " (rows that are not in the data)")


@check(READ)
def check_limit_pushdown(suite: Any, tmp_path: Path) -> None:
    """With per_task_row_limit=n a task yields first the first n rows it yields without it (all
    when fewer), and may stop there or yield more; a plan of other tasks yields only rows of the
    data, at least n in all.
    """
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    if not accepts_row_limit(source):
        raise SkipCheck("get_read_tasks does not take per_task_row_limit")
    full = [concat(run_task(t), expected) for t in plan(source, _TASKS_FOR_ORDER_CHECKS)]
    for limit in (0, 1, 3):
        limited = plan(source, _TASKS_FOR_ORDER_CHECKS, per_task_row_limit=limit)
        what = f"per_task_row_limit={limit}"
        if len(limited) != len(full):
            # Another plan: the engine's limit then takes the first rows of its tasks.
            got = concat([b for task in limited for b in _head(run_task(task), limit)], expected)
            assert_rows_included(expected, got, f"rows read with {what}")
            need = min(limit, expected.num_rows)
            if got.num_rows < need:
                raise AssertionError(
                    f"with {what} the {len(limited)} tasks yielded {got.num_rows} rows in all; "
                    f"the engine's limit needs {need}."
                )
            continue
        for i, task in enumerate(limited):
            got = concat(run_task(task), expected)
            want = full[i].slice(0, limit)
            if got.slice(0, want.num_rows).to_pylist() != want.to_pylist():
                raise AssertionError(
                    f"task {i} with {what} yielded {got.slice(0, limit).to_pylist()} first, not "
                    f"the first rows it yields without the limit, {want.to_pylist()}. A task may "
                    "stop after the limit (or not), but must not skip or reorder rows."
                )


def _head(blocks: list[pa.Table], rows: int) -> list[pa.Table]:
    """The first ``rows`` rows of ``blocks`` (what the engine keeps of a task)."""
    kept: list[pa.Table] = []
    for block in blocks:
        if rows <= 0:
            break
        kept.append(block.slice(0, rows))
        rows -= kept[-1].num_rows
    return kept


@check(READ)
def check_bad_input_names_source(suite: Any, tmp_path: Path) -> None:
    """Reading bad input (make_bad_datasource) raises an error that names the source (one of
    bad_source_mentions()).
    """
    try:
        source = call_optional(suite.make_bad_datasource, "make_bad_datasource", tmp_path)
        for task in plan(source, _TASKS_FOR_ORDER_CHECKS):
            run_task(task)
    except SkipCheck:
        raise
    except Exception as exc:
        text = error_text(exc)
        mentions = suite.bad_source_mentions(tmp_path)
        if mentions and not any(m in text for m in mentions):
            raise AssertionError(
                f"the error for bad input does not name the source (expected one of "
                f"{mentions}): {text}"
            ) from exc
        return
    raise AssertionError(
        "reading the bad source succeeded; it must raise an error naming the source."
    )


@check(READ)
def check_pipeline_through_shardflow(suite: Any, tmp_path: Path) -> None:
    """shardflow reads the source right: to_arrow, count, select_columns, filter(expr=...), filter
    then select_columns, and limit(n) giving n rows of the data.
    """
    sf = import_shardflow()
    source, expected = suite.make_datasource(tmp_path), suite.expected_table()
    dataset = sf.read_datasource(source)
    assert_same_rows(
        concat([dataset.to_arrow()], expected),
        expected,
        "sf.read_datasource(...).to_arrow()",
        suite.check_types,
    )
    if dataset.count() != expected.num_rows:
        raise AssertionError(f"count() gave {dataset.count()}, expected {expected.num_rows}.")
    first = expected.column_names[0]
    got = sf.read_datasource(source).select_columns([first]).to_arrow()
    assert_same_rows(
        concat([got], expected.select([first])),
        expected.select([first]),
        f"select_columns([{first!r}])",
        suite.check_types,
    )
    for predicate in suite.predicates()[:2]:
        oracle = expected.filter(predicate.to_pyarrow())
        got = concat([sf.read_datasource(source).filter(expr=predicate).to_arrow()], expected)
        assert_same_rows(got, oracle, f"filter(expr={predicate!r})", suite.check_types)
        # filter then select: both may be pushed into the source together
        needed = sorted(predicate.referenced_columns())
        kept = needed + [c for c in expected.column_names if c not in needed][:1]
        got = sf.read_datasource(source).filter(expr=predicate).select_columns(kept).to_arrow()
        assert_same_rows(
            concat([got], oracle.select(kept)),
            oracle.select(kept),
            f"filter(expr={predicate!r}).select_columns({kept})",
            suite.check_types,
        )
    limit = min(3, expected.num_rows)
    rows = sf.read_datasource(source).limit(limit).to_arrow()
    if rows.num_rows != limit:
        raise AssertionError(f"limit({limit}) gave {rows.num_rows} rows.")
    assert_rows_included(expected, concat([rows], expected), f"limit({limit})")
