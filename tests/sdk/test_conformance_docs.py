"""The conformance kit and docs/connectors.md agree: the docs list every check with the rule
it enforces, and a source that follows the docs' limit rule (a task *may* stop at
per_task_row_limit) passes the kit."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.sdk import BlockMetadata, Datasource, ReadTask
from shardflow.sdk.testing import CHECKS, DatasourceConformance, run_conformance

DOCS = Path(__file__).resolve().parents[2] / "docs" / "connectors.md"
TABLE = pa.table({"id": pa.array(np.arange(30), pa.int64()), "x": pa.array(np.arange(30) * 0.5)})


def _documented_checks() -> dict[str, tuple[str, str]]:
    text = DOCS.read_text()
    section = text[text.index("What is checked") : text.index("The read checks call the SDK")]
    rows = re.findall(r"^\| `(\w+)` \| (read|write) \| (.+) \|$", section, re.M)
    return {name: (kind, rule) for name, kind, rule in rows}


def test_docs_list_every_check_with_its_rule():
    documented = _documented_checks()
    assert set(documented) == {c.name for c in CHECKS}
    for check in CHECKS:
        assert documented[check.name] == (check.kind, check.doc), check.name


def test_docs_limit_rule_says_may_stop():
    text = DOCS.read_text()
    rule = text[text.index("**Limit**") : text.index("### How the engine calls a source")]
    assert "may stop after" in rule and "must begin with" in rule


def _parts(table: pa.Table, n: int) -> list[pa.Table]:
    bounds = np.linspace(0, table.num_rows, n + 1, dtype=np.int64)
    return [table.slice(int(lo), int(hi - lo)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _reader(part: pa.Table, limit: int | None, mode: str):
    def read():
        if mode == "stops" and limit is not None:
            return [part.slice(0, limit)]
        if mode == "reversed" and limit is not None:
            return [part.take(pa.array(range(part.num_rows - 1, -1, -1)))]
        if mode == "short" and limit is not None:
            return [part.slice(0, max(0, limit - 1))]
        return [part]  # "ignores": the limit is only a hint

    return read


class LimitSource(Datasource):
    """Takes per_task_row_limit and honours it in one of several ways (``mode``)."""

    def __init__(self, mode: str):
        self.mode = mode

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, **kwargs):
        return [
            ReadTask(_reader(part, per_task_row_limit, self.mode), BlockMetadata(None, part.nbytes))
            for part in _parts(TABLE, 4)
        ]


def _suite(mode: str) -> type:
    class Suite(DatasourceConformance):
        check_in_subprocess = False

        def make_datasource(self, tmp_path):
            return LimitSource(mode)

        def expected_table(self):
            return TABLE

    return Suite


@pytest.mark.parametrize(
    "mode, verdict",
    [
        ("stops", "passed"),  # stops at the limit
        ("ignores", "passed"),  # yields more: docs say a task *may* stop
        ("reversed", "failed"),  # reorders its rows
        ("short", "failed"),  # stops before the limit
    ],
)
def test_limit_check_enforces_the_documented_rule(mode, verdict):
    report = run_conformance(_suite(mode), ["limit_pushdown"])
    assert [r.status for r in report.results] == [verdict], report.format()


@pytest.mark.parametrize("mode", ["stops", "ignores"])
def test_a_source_the_kit_passes_gives_right_limits(mode):
    # The oracle: pyarrow's first rows of the table, read through shardflow's engine.
    for n in (0, 1, 5, 29, 30, 31):
        got = sf.read_datasource(LimitSource(mode)).limit(n).to_arrow()
        assert got.num_rows == min(n, TABLE.num_rows)
        assert got.to_pylist() == TABLE.slice(0, n).to_pylist()
