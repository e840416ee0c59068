"""The conformance kit catches each broken contract, and passes correct connectors.

Sources here serve a known table from memory (or parquet files written under tmp_path);
each has one deliberate defect. The oracle is the kit's verdict per check.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardflow.sdk import BlockMetadata, Datasink, Datasource, ReadTask
from shardflow.sdk.testing import (
    CHECKS,
    ConnectorConformance,
    DatasinkConformance,
    DatasourceConformance,
    assert_same_rows,
    run_conformance,
)

TABLE = pa.table(
    {
        "id": pa.array(np.arange(40), pa.int64()),
        "name": pa.array([f"n{i % 4}" if i % 9 else None for i in range(40)], pa.string()),
        "score": pa.array(np.arange(40) / 8, pa.float64()),
    }
)

_DRIVER_ONLY: dict[str, pa.Table] = {}


def _slice_reader(table: pa.Table, lo: int, hi: int):
    return lambda: [table.slice(lo, hi - lo)]


def _read_driver_state(key: str) -> list[pa.Table]:
    return [_DRIVER_ONLY[key]]


class TableSource(Datasource):
    """Serves a table in ``n_tasks`` slices; ``defect`` breaks one contract on purpose."""

    def __init__(
        self,
        table: pa.Table = TABLE,
        n_tasks: int = 4,
        defect: str | None = None,
        projection: dict[str, str] | None = None,
        predicate=None,
    ):
        self.table, self.n_tasks, self.defect = table, n_tasks, defect
        self.projection, self.predicate = projection, predicate

    def _table(self) -> pa.Table:
        table = self.table
        if self.predicate is not None and self.defect != "predicate_lies":
            table = table.filter(self.predicate.to_pyarrow())
        if self.projection is not None:
            names = list(self.projection.values())
            if self.defect == "projection_ignores_rename":
                names = list(self.projection)
            table = table.select(list(self.projection)).rename_columns(names)
        return table

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, **kwargs
    ) -> list[ReadTask]:
        table = self._table()
        if table.num_rows == 0:
            return []
        bounds = np.linspace(0, table.num_rows, self.n_tasks + 1, dtype=np.int64)
        tasks = []
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            lo, hi = int(lo), int(hi)
            part = table.slice(lo, hi - lo)
            if self.defect == "schema_drift" and i == 1:
                part = part.set_column(0, "id", part.column("id").cast(pa.float64()))
            if self.defect == "limit_wrong_rows" and per_task_row_limit is not None:
                part = part.slice(max(0, part.num_rows - per_task_row_limit))
            read_fn = _slice_reader(part, 0, part.num_rows)
            if self.defect == "unpicklable":
                lock = threading.Lock()
                read_fn = lambda part=part, lock=lock: [part]  # noqa: E731
            elif self.defect == "driver_state":
                key = uuid.uuid4().hex
                _DRIVER_ONLY[key] = part
                read_fn = functools.partial(_read_driver_state, key)
            elif self.defect == "runs_once":
                once = iter([part])
                read_fn = lambda once=once: list(once)  # noqa: E731
            rows = part.num_rows + (1 if self.defect == "wrong_num_rows" else 0)
            size = 10**12 if self.defect == "huge_size" else part.nbytes
            limit = None if self.defect == "limit_wrong_rows" else per_task_row_limit
            tasks.append(ReadTask(read_fn, BlockMetadata(rows, size), None, limit))
        return tasks

    def supports_projection_pushdown(self) -> bool:
        return True

    def get_projection_map(self):
        return self.projection

    def apply_projection(self, projection_map):
        if self.defect == "projection_mutates":
            self.projection = projection_map
            return self
        return TableSource(self.table, self.n_tasks, self.defect, projection_map, self.predicate)

    def supports_predicate_pushdown(self) -> bool:
        return True

    def get_current_predicate(self):
        return self.predicate

    def apply_predicate(self, predicate_expr):
        new = predicate_expr if self.predicate is None else self.predicate & predicate_expr
        return TableSource(self.table, self.n_tasks, self.defect, self.projection, new)

    def is_predicate_pushdown_exact(self) -> bool:
        return self.defect != "predicate_inexact"


class BadSource(Datasource):
    def __init__(self, message: str):
        self.message = message

    def get_read_tasks(self, parallelism: int, **kwargs) -> list[ReadTask]:
        message = self.message

        def fail():
            raise ValueError(message)

        return [ReadTask(fail, BlockMetadata(None, None))]


def suite_for(defect: str | None = None, bad_message: str = "broken.bin: bad magic") -> type:
    class Suite(DatasourceConformance):
        check_in_subprocess = defect in ("driver_state", None)

        def make_datasource(self, tmp_path):
            return TableSource(defect=defect)

        def expected_table(self):
            return TABLE

        def make_empty_datasource(self, tmp_path):
            return TableSource(TABLE.slice(0, 0))

        def make_bad_datasource(self, tmp_path):
            return BadSource(bad_message)

        def bad_source_mentions(self, tmp_path):
            return ["broken.bin"]

    Suite.__name__ = f"Suite[{defect}]"
    return Suite


def _statuses(suite, checks=None) -> dict[str, str]:
    report = run_conformance(suite, checks=checks)
    return {r.name: r.status for r in report.results}


def test_a_correct_source_passes_every_read_check():
    report = run_conformance(suite_for(None))
    assert report.ok, report.format()
    assert {r.name for r in report.results} == {c.name for c in CHECKS if c.kind == "read"}
    assert all(r.status == "passed" for r in report.results), report.format()


@pytest.mark.parametrize(
    "defect, failing",
    [
        ("unpicklable", "read_tasks_picklable"),
        ("driver_state", "read_tasks_run_in_another_process"),
        ("runs_once", "read_tasks_independent"),
        ("wrong_num_rows", "metadata_consistent"),
        ("huge_size", "metadata_consistent"),
        ("schema_drift", "schema_stable"),
        ("projection_ignores_rename", "projection_pushdown"),
        ("projection_mutates", "projection_pushdown"),
        ("predicate_lies", "predicate_pushdown"),
        ("limit_wrong_rows", "limit_pushdown"),
    ],
)
def test_each_defect_fails_its_check(defect, failing):
    statuses = _statuses(suite_for(defect), checks=[failing, "read_matches_expected"])
    assert statuses[failing] == "failed"
    if defect not in ("wrong_num_rows", "schema_drift"):
        assert statuses["read_matches_expected"] == "passed"


def test_an_inexact_predicate_source_may_return_extra_rows():
    class Inexact(suite_for("predicate_inexact")):
        pass

    # Declared inexact and filtering exactly is allowed; the engine filters again.
    assert _statuses(Inexact, ["predicate_pushdown"]) == {"predicate_pushdown": "passed"}


def test_errors_must_name_the_source():
    statuses = _statuses(suite_for(None, bad_message="bad magic"), ["bad_input_names_source"])
    assert statuses == {"bad_input_names_source": "failed"}

    class Silent(suite_for(None)):
        def make_bad_datasource(self, tmp_path):
            return TableSource()

    report = run_conformance(Silent, ["bad_input_names_source"])
    assert not report.ok and "succeeded" in report.results[0].message


def test_failure_messages_say_what_differs():
    report = run_conformance(suite_for("wrong_num_rows"), ["metadata_consistent"])
    message = report.results[0].message
    assert "num_rows=11" in message and "10 rows" in message
    text = report.format()
    assert "FAIL metadata_consistent" in text and "0 passed, 1 failed, 0 skipped" in text


def test_optional_hooks_skip_their_checks():
    class Minimal(DatasourceConformance):
        check_in_subprocess = False

        def make_datasource(self, tmp_path):
            return TableSource()

        def expected_table(self):
            return TABLE

    statuses = _statuses(Minimal)
    assert statuses["empty_source_reads_empty"] == "skipped"
    assert statuses["bad_input_names_source"] == "skipped"
    assert statuses["read_tasks_run_in_another_process"] == "skipped"
    assert statuses["read_matches_expected"] == "passed"


def test_run_conformance_validates_its_arguments():
    with pytest.raises(TypeError, match="not a conformance suite"):
        run_conformance(object)
    with pytest.raises(ValueError, match="Unknown check"):
        run_conformance(suite_for(None), checks=["no_such_check"])


def test_assert_same_rows_ignores_order_but_not_duplicates():
    shuffled = TABLE.take(np.random.default_rng(0).permutation(TABLE.num_rows))
    assert_same_rows(shuffled, TABLE, "shuffled")
    doubled = pa.concat_tables([TABLE.slice(0, 1), TABLE.slice(0, TABLE.num_rows - 1)])
    with pytest.raises(AssertionError, match="Missing 1"):
        assert_same_rows(doubled, TABLE, "doubled")
    with pytest.raises(AssertionError, match="type"):
        assert_same_rows(TABLE.cast(TABLE.schema.set(0, pa.field("id", pa.int32()))), TABLE, "cast")


# -- sinks ------------------------------------------------------------------------------------


class ParquetFolderSink(Datasink):
    """Stages one hidden parquet file per task; ``defect`` breaks one contract on purpose."""

    def __init__(self, folder: Path, defect: str | None = None):
        self.folder, self.defect, self.write_id = folder, defect, None

    def on_write_start(self, schema=None) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.write_id = uuid.uuid4().hex

    def write(self, blocks, ctx):
        visible = self.defect == "no_staging"
        name = f"part-{self.write_id}-{ctx.task_idx}.parquet"
        path = self.folder / (name if visible else f".{name}")
        tables = []
        try:
            for block in blocks:
                tables.append(block)
        except Exception:
            if self.defect == "swallows_errors":
                return None
            raise
        finally:
            tables = [t for t in tables if t.num_rows]
            if tables:
                pq.write_table(pa.concat_tables(tables), path)
        return str(path) if tables else None

    def on_write_complete(self, write_result) -> None:
        for staged in write_result.write_returns:
            if staged and self.defect != "no_staging":
                os.replace(
                    staged, os.path.join(os.path.dirname(staged), os.path.basename(staged)[1:])
                )

    def on_write_failed(self, error) -> None:
        if self.defect in ("keeps_staged", "no_staging"):
            return
        for path in self.folder.glob(f".part-{self.write_id}-*"):
            path.unlink()


def sink_suite(defect: str | None = None) -> type:
    class Suite(DatasinkConformance):
        def make_datasink(self, tmp_path):
            return ParquetFolderSink(tmp_path / "out", defect)

        def read_back(self, tmp_path):
            files = sorted(
                p for p in (tmp_path / "out").glob("*.parquet") if not p.name.startswith(".")
            )
            if not files:
                raise FileNotFoundError(f"{tmp_path / 'out'}: no parquet files")
            return pa.concat_tables([pq.read_table(f) for f in files])

        def expected_table(self):
            return TABLE

    return Suite


def test_a_correct_sink_passes_every_write_check():
    report = run_conformance(sink_suite(None))
    assert report.ok, report.format()
    assert {r.name for r in report.results} == {c.name for c in CHECKS if c.kind == "write"}
    assert all(r.status == "passed" for r in report.results), report.format()


@pytest.mark.parametrize(
    "defect, failing, words",
    [
        ("no_staging", "write_round_trip", "visible before on_write_complete"),
        ("no_staging", "failed_write_leaves_nothing", "left behind"),
        ("keeps_staged", "failed_write_leaves_nothing", "left behind"),
        ("keeps_staged", "failed_pipeline_write_leaves_nothing", "left behind"),
        ("keeps_staged", "failed_write_keeps_existing_data", "left behind"),
        ("swallows_errors", "failed_write_leaves_nothing", "swallowed"),
    ],
)
def test_each_sink_defect_fails_its_check(defect, failing, words):
    report = run_conformance(sink_suite(defect), checks=[failing])
    assert report.results[0].status == "failed", report.format()
    assert words in report.results[0].message


def test_connector_suite_runs_both_kinds():
    class Both(ConnectorConformance, sink_suite(None), suite_for(None)):
        check_in_subprocess = False

    kinds = {c.name: c.kind for c in CHECKS}
    report = run_conformance(Both)
    assert report.ok, report.format()
    assert {kinds[r.name] for r in report.results} == {"read", "write"}


# -- the pytest face of the kit: these classes are collected and run like any test ---------


class TestTableSourceThroughPytest(suite_for(None)):
    check_in_subprocess = False


class TestParquetSinkThroughPytest(sink_suite(None)):
    pass
