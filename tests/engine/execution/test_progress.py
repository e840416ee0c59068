"""Progress: a bar per operator counting rows against an estimated total, the dataset's
bar, actor pools' and exchanges' states, and reports logged when stderr is not a terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

import shardflow as sf
from shardflow.engine.api.consumption import PreparedPlan
from shardflow.engine.execution.progress import ProgressReporter, estimated_rows

LOGGED_PIPELINE = textwrap.dedent(
    """
    import time
    import shardflow as sf

    sf.DataContext.get_current().progress_log_interval_s = 0.2

    def slow(batch):
        time.sleep(0.1)
        return batch

    class Model:
        def __init__(self):
            time.sleep(0.3)  # loading weights

        def __call__(self, batch):
            return batch

    ds = (
        sf.range(4000, override_num_blocks=8)
        .map_batches(slow)
        .map_batches(Model, concurrency=1)
        .sort("id")
    )
    assert [r["id"] for r in ds.take_all()] == list(range(4000))
    print("done")
    """
)


@pytest.mark.timeout(180)
def test_progress_is_logged_when_stderr_is_not_a_terminal():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("SHARDFLOW_DISABLE_PROGRESS_BARS", None)
    proc = subprocess.run(
        [sys.executable, "-c", LOGGED_PIPELINE],
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    err = proc.stderr
    assert "\r" not in err and "%|" not in err  # no bar drawn into a log
    reports = re.findall(r"shardflow: Running dataset: ([\d,]+)/([\d,]+) \(\d+%\) rows", err)
    assert len(reports) >= 2, err
    assert all(total == "4,000" for _, total in reports), err  # the total is known upfront
    # one line per operator: the actor pool with its actors, the sort with its steps
    assert re.search(r"  - ReadRange->MapBatches\(slow\): .* rows, .*\d+/8 tasks", err), err
    pool = r"  - MapBatches\(Model\): .* rows, .*actors: \d+ starting, \d+ running, \d+ idle"
    assert re.search(pool + r"; \d+ pending", err), err
    assert re.search(r"  - Sort: .*map \d+/\S+, reduce \d+/\S+ tasks", err), err
    # the last report is complete
    tail = err[err.rindex("Running dataset") :]
    assert "4,000/4,000 (100%)" in tail and "Execution finished." in tail


def _reporter(ds, **context_settings):
    context = sf.DataContext.get_current()
    for name, value in context_settings.items():
        setattr(context, name, value)
    executor = PreparedPlan(ds._plan).executor()
    return executor, ProgressReporter(
        executor._ops, executor._shown, executor.stats, context, terminal=False
    )


def _bar_names(reporter):
    return [line.split(":")[0].strip("- ").strip() for line in reporter.report().splitlines()[1:]]


def test_bars_per_operator_follow_verbose_progress(fresh_context):
    fresh_context.enable_progress_bars = True
    ds = sf.range(100, override_num_blocks=4).map_batches(lambda b: b).random_shuffle(seed=0)
    ds = ds.map_batches(lambda b: b)
    _, verbose = _reporter(ds)
    assert _bar_names(verbose) == [
        "ReadRange->MapBatches(<lambda>)",
        "RandomShuffle",
        "MapBatches(<lambda>)",
    ]
    fresh_context.execution_options.verbose_progress = False
    _, quiet = _reporter(ds)
    assert _bar_names(quiet) == ["RandomShuffle"]  # exchanges keep theirs, as in Ray Data
    fresh_context.enable_operator_progress_bars = False
    _, dataset_only = _reporter(ds)
    assert _bar_names(dataset_only) == []


def test_estimated_totals(fresh_context):
    ds = sf.range(1000, override_num_blocks=10).map_batches(lambda b: b).limit(300)
    executor, _ = _reporter(ds)
    last = executor._ops[-1]
    assert estimated_rows(executor._ops[1]) == 1000  # read tasks know their rows
    assert estimated_rows(last) == 300
    unknown = sf.range(1000, override_num_blocks=10).filter(lambda r: r["id"] % 3 == 0)
    executor, _ = _reporter(unknown)
    rows = [r for ref, meta in executor for r in range(meta.num_rows)]
    # once finished, every bar ends at the true count (oracle: Python's own filter)
    expected = len([i for i in range(1000) if i % 3 == 0])
    assert len(rows) == expected
    assert estimated_rows(executor._ops[-1]) == expected
