"""Dataset.stats(): per-operator figures with min / max / mean over tasks, the consumer's
waits; stats().timeline(): a Chrome trace-event file with every task of every operator."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import shardflow as sf

ROWS = 4000


def double(batch):
    return {"id": batch["id"] * 2}


def add_one(row):
    return {"id": row["id"] + 1}


def _pipeline():
    return (
        sf.range(ROWS, override_num_blocks=4)
        .map_batches(double)
        .random_shuffle(seed=3)
        .map(add_one)
    )


def _operator_sections(report: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in report.splitlines():
        match = re.match(r"Operator \d+ (.+?): \d+ tasks", line)
        if match:
            current = match.group(1)
            sections[current] = []
        elif current is not None and line.startswith("    * "):
            sections[current].append(line.strip())
    return sections


@pytest.mark.timeout(180)
def test_stats_report_per_task_figures(backend):
    ds = _pipeline()
    total = 0
    for batch in ds.iter_batches(batch_size=500):
        total += int(batch["id"].sum())
    # oracle: NumPy over the same rows
    assert total == int((np.arange(ROWS) * 2 + 1).sum())
    report = ds.stats()
    assert isinstance(report, str)
    sections = _operator_sections(report)
    assert list(sections) == ["ReadRange->MapBatches(double)", "RandomShuffle", "Map(add_one)"]
    for name, lines in sections.items():
        text = "\n".join(lines)
        for figure in (
            "Task wall time",
            "Task CPU time",
            "Rows out per task",
            "Bytes out per task",
        ):
            assert re.search(rf"{figure}: \S+ ?\S* min, \S+ ?\S* max, \S+ ?\S* mean", text), (
                name,
                text,
            )
        assert "Peak memory of the worker" in text
    rows_totals = [
        int(m.group(1))
        for m in re.finditer(r"\* (?:\[reduce\] )?Rows out per task: .*, (\d+) total", report)
    ]
    assert rows_totals == [ROWS, ROWS, ROWS]
    assert "[map] Task wall time" in report and "[reduce] Task wall time" in report
    consumer = re.search(r"Consumer: (\d+) batches; waited", report)
    assert consumer and int(consumer.group(1)) == ROWS // 500


def test_stats_before_execution_has_no_timeline(tmp_path):
    report = sf.range(3).stats()
    assert "not been executed" in report
    with pytest.raises(ValueError, match="not been executed"):
        report.timeline(str(tmp_path / "t.json"))


@pytest.mark.timeout(180)
def test_timeline_is_valid_trace_covering_every_operator(backend, tmp_path):
    ds = _pipeline()
    assert ds.count() == ROWS
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == sorted(int(i) * 2 + 1 for i in range(ROWS))
    path = str(tmp_path / "run.json")
    assert ds.stats().timeline(path) == path
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    tasks = [e for e in events if e["ph"] == "X"]
    names = [e for e in events if e["ph"] == "M"]
    for event in tasks:
        assert isinstance(event["name"], str)
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
        assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0
        assert event["args"]["rows"] >= 0
    # every task has a named worker row
    named = {(e["pid"], e.get("tid")) for e in names if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in tasks} <= named
    assert {e["pid"] for e in tasks} <= {e["pid"] for e in names if e["name"] == "process_name"}
    stats = ds._last_stats
    operators = [op.name for op in stats.operators]
    assert trace["otherData"]["operators"] == operators
    covered = {e["args"]["operator"] for e in tasks}
    assert covered == set(operators)
    assert len(tasks) == sum(op.tasks_finished for op in stats.operators)
    # the rows of the last operator's tasks are the dataset's rows
    last = [e for e in tasks if e["args"]["operator"] == operators[-1]]
    assert sum(e["args"]["rows"] for e in last) == ROWS


def test_an_operator_line_names_its_nodes_and_node_local_input():
    """On a cluster, an operator's line says on how many nodes its tasks ran and which share of
    an actor pool's input it found on the chosen actor's node (tests/cluster checks it live)."""
    from collections import Counter

    from shardflow.engine.execution.stats import OperatorStats

    op = OperatorStats("MapBatches(Model)", tasks=6)
    op.tasks_per_node = Counter({"n1": 2, "n2": 3, "n3": 1})
    op.local_input_bytes, op.remote_input_bytes = 300, 100
    line = op.summary_line(1)
    assert ", tasks on 3 nodes" in line
    assert ", 75% of input bytes node-local" in line
    alone = OperatorStats("ReadRange", tasks=2)
    alone.tasks_per_node = Counter({"n1": 2})
    assert "nodes" not in alone.summary_line(1) and "node-local" not in alone.summary_line(1)
