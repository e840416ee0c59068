"""The benchmark harness's own logic: targets, selection, verdicts, memory sampling, profiles.

The benchmarks themselves are run by ``benchmarks/run.py``; these tests keep the parts that
turn measurements into verdicts honest, on real processes where a process is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCHMARKS))

import monitor
import profile_child
import registry
import report
from registry import Benchmark, Target


def test_target_against_the_best_of_several_references():
    target = Target("x", "me", ("p1", "p2", "p3"), 1.25, kind="within")
    values = {"me": 3.0, "p1": 4.0, "p2": 2.0}  # p3 not measured
    assert target.pick_reference(values) == "p2"
    assert target.ratio(values) == pytest.approx(1.5)
    assert not target.passed(target.ratio(values))
    assert "p2" in target.describe(1.5, values)
    assert Target("x", "me", ("p3",), 1.0).ratio(values) is None


def test_faster_target_and_memory_metric():
    speed = Target("x", "me", "ray", 3.0)
    assert speed.ratio({"me": 2.0, "ray": 8.0}) == pytest.approx(4.0)
    assert speed.passed(4.0) and not speed.passed(2.9)
    memory = Target("x", "me", "polars", 1.5, kind="within", metric="rss")
    assert "peak RSS" in memory.describe(1.2, {"polars": 1})


def test_select_takes_exact_names_and_families():
    names = [b.name for b in registry.select(["b11"])]
    assert names == ["B11-CSV", "B11-JSONL"]
    assert [b.name for b in registry.select(["B11-CSV", "B1"])] == ["B1", "B11-CSV"]
    assert len(registry.select([])) == len(registry.all_benchmarks())
    with pytest.raises(ValueError, match="unknown benchmark"):
        registry.select(["B99"])


def test_every_benchmark_names_known_systems_and_peers():
    for bench in registry.all_benchmarks().values():
        assert set(bench.peers) <= set(bench.systems), bench.name
        for target in bench.targets:
            assert target.system in bench.systems, bench.name
            assert set(target.references()) <= set(bench.systems), bench.name


def _bench() -> Benchmark:
    return Benchmark(
        name="BX",
        title="t",
        family="f",
        systems=("me", "polars", "duckdb", "ray-data"),
        rows=lambda scale: 1000,
        peers=("polars", "duckdb"),
        targets=(
            Target("fast", "me", ("polars", "duckdb"), 1.25, kind="within"),
            Target("small", "me", "polars", 1.5, kind="within", metric="rss"),
            Target("vs ray", "me", "ray-data", 3.0),
        ),
    )


def test_table_and_verdicts_from_measurements():
    bench = _bench()
    ms = [
        report.Measurement("BX", "me", r, seconds=s, peak_rss=300 * 2**20)
        for r, s in enumerate((2.0, 2.2, 1.8))
    ]
    ms += [
        report.Measurement("BX", "polars", 0, seconds=1.0, peak_rss=100 * 2**20),
        report.Measurement("BX", "duckdb", 0, seconds=1.6, peak_rss=50 * 2**20),
        report.Measurement("BX", "ray-data", 0, unavailable="not installed"),
    ]
    summaries = report.summarize(bench, bench.systems, ms)
    rows = {row[1]: row for row in report.table_rows(bench, summaries, 1.0)}
    assert rows["me"][2:5] == ("2.000", "1.800", "300") and rows["me"][7] == "2.00"
    assert rows["ray-data"][-1] == "n/a"
    verdicts = report.verdicts(bench, summaries)
    assert verdicts[0][0] == "MISS" and "polars" in verdicts[0][1]  # 2.0 / 1.0 > 1.25
    assert verdicts[1][0] == "MISS" and "3.00x" in verdicts[1][1]  # 300 MiB vs 100 MiB
    assert verdicts[2][0] == "SKIP" and "not installed" in verdicts[2][1]
    assert report.unavailable_lines(ms) == ["N/A BX ray-data: not installed"]


def test_a_skip_blames_the_missing_system_first():
    bench = _bench()
    ms = [
        report.Measurement("BX", "polars", 0, seconds=1.0, peak_rss=1),
        report.Measurement("BX", "duckdb", 0, unavailable="duckdb missing"),
    ]
    verdicts = report.verdicts(bench, report.summarize(bench, bench.systems, ms))
    assert verdicts[0] == ("SKIP", "fast: not measured (me and polars or duckdb both needed)")
    ms.append(report.Measurement("BX", "me", 0, unavailable="no such operation"))
    verdicts = report.verdicts(bench, report.summarize(bench, bench.systems, ms))
    assert "me not available (no such operation)" in verdicts[0][1]


def test_peak_rss_window_and_slack():
    usage = monitor.TreeUsage(
        samples=[(1.0, 10), (2.0, 50), (3.0, 20)], tree_cpu_s=1.0, busy_cpu_s=3.0, wall_s=2.0
    )
    assert usage.peak_rss(0.5, 2.5) == 50
    assert usage.peak_rss(2.5, 3.5) == 20
    assert usage.peak_rss(3.2, 3.3) is None
    assert usage.peak_rss(3.2, 3.3, slack_s=0.5) == 20
    assert usage.other_cores == pytest.approx(1.0)


def test_monitor_sees_the_memory_of_a_grandchild():
    """A child that starts a grandchild holding ~150 MB: the tree's peak includes it."""
    grandchild = "import time; b = bytearray(150 * 2**20); time.sleep(1.0)"
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = monitor.TreeMonitor(proc.pid, interval_s=0.02)
    start = time.time()
    proc.wait(timeout=30)
    usage = sampler.stop()
    assert usage.peak_rss(start, time.time()) >= 150 * 2**20
    assert usage.tree_cpu_s > 0


def test_profile_summary_keeps_only_the_pipeline():
    main = 'process 1:"python child.py";thread (1): MainThread;<module> (child.py:5);'
    worker = 'process 1:"python child.py";thread (2): shardflow_0;drive_task (task_runner.py:2);'
    raw = [
        main + "main (child.py:9);start_shardflow (systems.py:3);<module> (sf/__init__.py:1) 5",
        main + "main (child.py:9);run (benchmarks/b4_parquet_etl.py:200);write (x.py:1) 3",
        worker + "read (parquet.py:10) 6",
        worker + "Condition.wait (threading.py:320) 4",
    ]
    summary = profile_child.summarize(profile_child.parse_raw(raw), top=10)
    assert summary["samples"] == 9 and summary["waiting"] == 4 and summary["dropped"] == 5
    assert dict(summary["self"]) == {"read (parquet.py)": 66.7, "write (x.py)": 33.3}


def test_aggregation_digest_ignores_row_order_and_sees_a_wrong_group():
    import b16_aggregations as b16

    keys = [("b",), ("a",), ("c",)]
    counts, sums = [2, 1, 3], [1.5, 0.25, 3.0]
    means = [s / c for s, c in zip(sums, counts)]
    want = b16.digest(keys, counts, sums, means)
    shuffled = b16.digest(keys[::-1], counts[::-1], sums[::-1], means[::-1])
    assert b16._agrees(shuffled, want)
    assert not b16._agrees(b16.digest(keys, [2, 3, 1], sums, means), want)
    assert not b16._agrees(b16.digest(keys, counts, [1.5, 0.25, 3.0 + 1 / 1024], means), want)
