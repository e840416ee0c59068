"""Worker processes under faults: no deadlock with threads, nested pipelines, prompt
cancellation, exit statuses, dead workers replaced, and workers that die with their driver."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

import shardflow as sf

pytestmark = pytest.mark.timeout(120)


def double(row):
    return {"x": row["id"] * 2}


def nested_count(row):
    # A whole pipeline inside a user function (it runs in a worker process).
    return {"id": row["id"], "n": sf.range(row["id"] + 1).map(double).count()}


# Far longer than the tests' timeouts: a test that waited for these calls would time out.
SLOW_S = 600


def slow_after_first(row):
    if row["id"] > 0:
        time.sleep(SLOW_S)
    return row


def slow_batches_after_first(batch):
    if batch["id"][0] > 0:
        time.sleep(SLOW_S)
    return batch


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _run_script(
    code: str, timeout: float = 60, args_: list[str] | None = None, **kwargs
) -> subprocess.CompletedProcess:
    env = dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *(args_ or [])],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kwargs,
    )


def test_two_pipelines_in_two_threads_always_finish():
    expected = sum(2 * i for i in range(3000))
    for _ in range(4):
        results, errors = [], []

        def run(results=results, errors=errors):
            try:
                results.append(sf.range(3000, override_num_blocks=6).map(double).sum("x"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a pipeline hung"
        assert not errors and results == [expected, expected]


def test_pipeline_inside_a_user_function(backend):
    rows = sf.range(4, override_num_blocks=2).map(nested_count).take_all()
    assert rows == [{"id": i, "n": i + 1} for i in range(4)]


@pytest.mark.timeout(150)  # catches a hang: the other tasks sleep SLOW_S
@pytest.mark.parametrize("kind", ["process", "thread"])
def test_satisfied_take_returns_without_waiting_for_other_tasks(kind):
    ds = sf.range(8, override_num_blocks=8)
    ds = ds.map(slow_after_first) if kind == "process" else ds.map_batches(slow_batches_after_first)
    assert ds.take(1) == [{"id": 0}]
    for _ in ds.iter_rows():
        break


def test_udf_exit_status_reaches_the_script():
    for body in (
        "sf.range(4).map(lambda r: sys.exit(3)).take_all()",
        "sf.range(4).map_batches(lambda b: sys.exit(3)).take_all()",
    ):
        out = _run_script(f"import sys, shardflow as sf\n{body}\n")
        assert out.returncode == 3, out.stderr[-2000:]


def test_keyboard_interrupt_in_a_udf_is_raised_as_such():
    def interrupt(batch):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sf.range(10).map_batches(interrupt).take_all()


def test_a_dead_idle_worker_is_replaced():
    from shardflow.engine.execution.backends.worker_pool import WorkerProcessPool

    assert sf.range(100, override_num_blocks=4).map(double).sum("x") == 9900
    pool = WorkerProcessPool.instance()
    idle = list(pool._idle.queue)
    assert idle
    for worker in idle:
        os.kill(worker.pid, signal.SIGKILL)
    time.sleep(0.2)
    assert sf.range(100, override_num_blocks=4).map(double).sum("x") == 9900


def worker_pid(row):
    return {"pid": os.getpid()}


def test_a_finished_task_returns_its_worker_before_the_next_task_starts():
    """The executor starts the next task when it hears that one is done: that task must find
    the finished task's worker idle, not fork one more (which would compete for the cores)."""
    from shardflow.engine.execution.backends.worker_pool import WorkerProcessPool

    slots = os.cpu_count() or 1
    sf.range(8, override_num_blocks=8).map(worker_pid).take_all()  # workers up and idle
    pool = WorkerProcessPool.instance()
    before = len(pool._all)
    for _ in range(6):
        rows = sf.range(200, override_num_blocks=100).map(worker_pid).take_all()
        assert len({row["pid"] for row in rows}) <= max(slots, before)
    assert len(pool._all) <= max(slots, before)


def test_workers_die_with_a_killed_driver(tmp_path):
    script = f"""
        import os, time, shardflow as sf
        def record(row):
            open(os.path.join({str(tmp_path)!r}, str(os.getpid())), "w").close()
            time.sleep(120)
            return row
        sf.range(4, override_num_blocks=4).map(record).take_all()
    """
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p) for p in os.listdir(tmp_path)]
        assert len(pids) >= 2, "the workers never started"
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 30  # only catches a hang: workers check every 0.5 s
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "workers outlived their driver"
    finally:
        driver.kill()


def test_ctrl_c_stops_a_pipeline_promptly_and_leaves_nothing(tmp_path):
    script = f"""
        import os, sys, time, numpy as np, shardflow as sf
        sf.DataContext.get_current().memory_budget_bytes = 4 << 20
        def record(row):
            open(os.path.join({str(tmp_path)!r}, str(os.getpid())), "w").close()
            time.sleep(0.01)
            return row
        ds = sf.range(400_000, override_num_blocks=40).map_batches(
            lambda b: {{"id": b["id"], "x": np.sin(b["id"])}}).random_shuffle(seed=1).map(record)
        print("started", flush=True)
        for _ in ds.iter_batches():
            pass
    """
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    try:
        assert driver.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while not os.listdir(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int(p) for p in os.listdir(tmp_path)]
        assert pids, "the pipeline never reached its workers"
        driver.send_signal(signal.SIGINT)
        # The pipeline would run for over an hour (0.01 s a row): a driver that waited for its
        # tasks instead of stopping them fails here. No elapsed-time bound: the suite runs on
        # busy machines (exit after SIGINT measured 1.3-5.7 s at a load average of 25).
        driver.wait(timeout=30)
        assert driver.returncode != 0
        assert "KeyboardInterrupt" in driver.stderr.read()
        time.sleep(0.5)
        assert not any(_alive(p) for p in pids)
        assert not glob.glob(os.path.join(tempfile.gettempdir(), f"shardflow-spill-{driver.pid}-*"))
    finally:
        driver.kill()


def test_no_task_thread_holds_the_exit_after_a_satisfied_take():
    """Abandoned thread tasks (their user function still running) run in daemon threads:
    the interpreter's exit joins only non-daemon threads and concurrent.futures' workers."""
    from concurrent.futures import thread as futures_thread

    ds = sf.range(8, override_num_blocks=8).map_batches(slow_batches_after_first)
    assert ds.take(1) == [{"id": 0}]
    ours = [t for t in threading.enumerate() if t.name.startswith("shardflow")]
    assert ours  # the abandoned tasks' threads are still there ...
    assert all(t.daemon for t in ours), [t.name for t in ours if not t.daemon]
    joined_at_exit = [t for t in futures_thread._threads_queues if t.is_alive()]
    assert not [t for t in joined_at_exit if t.name.startswith("shardflow")]  # ... not joined


SLEEPY_SCRIPT = """
    import sys, time, shardflow as sf
    def slow(batch):
        if batch["id"][0] > 0:
            print("udf started", flush=True)
            time.sleep(120)  # far beyond the test's timeout: waiting for it would fail it
        return batch
    ds = sf.range(8, override_num_blocks=8).map_batches(slow)
    if sys.argv[1] == "take":
        print(ds.take(1), flush=True)
    else:
        for _ in ds.iter_batches():
            pass
"""


def test_a_script_ends_when_take_returns_despite_a_running_thread_task():
    out = _run_script(SLEEPY_SCRIPT, 60, args_=["take"])
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[{'id': 0}]" in out.stdout


def test_ctrl_c_during_a_long_user_function_in_a_thread_ends_the_script():
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(SLEEPY_SCRIPT), "iterate"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1"),
    )
    try:
        # Two tasks may print at once ("udf startedudf started").
        assert "udf started" in driver.stdout.readline()
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=60)  # the function sleeps for 120 s: this fails if exit waits
        assert driver.returncode != 0
        assert "KeyboardInterrupt" in driver.stderr.read()
    finally:
        driver.kill()
