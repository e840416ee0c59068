"""Actor pools under faults: constructors that raise, actors that crash or die while idle,
retries up to max_retries, early stops, Ctrl-C, threads and nested pipelines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import shardflow as sf

pytestmark = pytest.mark.timeout(120)


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


def _pids(folder, prefix="pid"):
    return [int(n.split("-")[1]) for n in os.listdir(folder) if n.startswith(prefix + "-")]


def _wait_dead(pids, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


class Broken:
    def __init__(self, folder):
        open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()
        raise ValueError("cannot load the model")

    def __call__(self, batch):
        return batch


def test_constructor_error_surfaces_once_and_tears_the_pool_down(backend, tmp_path, capfd):
    ds = sf.range(20, override_num_blocks=4).map_batches(
        Broken, fn_constructor_args=(str(tmp_path),), concurrency=2
    )
    with pytest.raises(ValueError) as info:
        ds.take_all()
    assert "cannot load the model" not in capfd.readouterr().err  # raised, not also printed
    message = str(info.value)
    assert "MapBatches(Broken)" in message and "constructor" in message
    # The user's traceback, once (not once per actor).
    assert message.count('raise ValueError("cannot load the model")') == 1
    assert info.value.__context__ is None or not isinstance(info.value.__context__, ValueError)
    assert _wait_dead(_pids(tmp_path), 5), "the pool's actors outlived the failed execution"


class CrashOnce:
    """Crashes its process the first time it sees row 6, after yielding part of the batch."""

    def __init__(self, folder):
        self.folder = folder
        open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()

    def __call__(self, batch):
        yield {"id": batch["id"][:1], "pid": np.full(1, os.getpid())}
        flag = os.path.join(self.folder, "crashed")
        if 6 in batch["id"] and not os.path.exists(flag):
            open(flag, "w").close()
            os._exit(3)
        yield {"id": batch["id"][1:], "pid": np.full(len(batch["id"]) - 1, os.getpid())}


def test_crashed_actor_batches_are_retried_on_a_new_actor(backend, tmp_path):
    ds = sf.range(20, override_num_blocks=10).map_batches(
        CrashOnce, fn_constructor_args=(str(tmp_path),), concurrency=1
    )
    out = ds.take_all()
    assert [r["id"] for r in out] == list(range(20))  # nothing lost, nothing twice
    assert len(_pids(tmp_path)) == 2  # the crashed actor and its replacement
    assert len({r["pid"] for r in out}) == 2


class AlwaysCrash:
    def __init__(self, folder):
        open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()

    def __call__(self, batch):
        os._exit(5)


def test_crashes_beyond_max_retries_surface(backend, tmp_path):
    ds = sf.range(4, override_num_blocks=2).map_batches(
        AlwaysCrash, fn_constructor_args=(str(tmp_path),), concurrency=1, max_retries=1
    )
    with pytest.raises(sf.WorkerCrashedError):
        ds.take_all()
    assert len(_pids(tmp_path)) == 2  # the first attempt and one retry, each on a new actor


class RecordPid:
    def __init__(self, folder):
        open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()

    def __call__(self, batch):
        return {"id": batch["id"], "pid": np.full(len(batch["id"]), os.getpid())}


def kill_actors_before_row(batch, folder, row):
    """Upstream: before passing ``row`` on, kill every actor seen so far (idle by then)."""
    if batch["id"][0] == row:
        deadline = time.monotonic() + 30
        while not _pids(folder) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # the actor has finished the earlier rows
        for pid in _pids(folder):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    return batch


def test_an_actor_that_dies_idle_gives_up_its_slot(backend, tmp_path):
    # Locally a dead idle actor is noticed before it gets work (so no retry is needed); Ray
    # reports the death when the next task is sent, and the task is retried.
    retries = 0 if backend == "local" else 3
    ds = (
        sf.range(4, override_num_blocks=4)
        .map_batches(
            kill_actors_before_row, fn_kwargs={"folder": str(tmp_path), "row": 2}, concurrency=1
        )
        .map_batches(
            RecordPid, fn_constructor_args=(str(tmp_path),), concurrency=1, max_retries=retries
        )
    )
    out = ds.take_all()
    assert [r["id"] for r in out] == [0, 1, 2, 3]
    first, *later = [r["pid"] for r in out]
    assert later[-1] != first  # the later rows ran on a replacement


class Slow:
    def __init__(self, folder):
        open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()

    def __call__(self, batch):
        if batch["id"][0] > 0:
            time.sleep(60)
        return batch


@pytest.mark.timeout(180)  # catches a hang: the actors' calls sleep 60 s each
def test_stopping_early_ends_the_pool(backend, tmp_path):
    ds = sf.range(8, override_num_blocks=8).map_batches(
        Slow, fn_constructor_args=(str(tmp_path),), concurrency=2
    )
    for _ in ds.iter_batches(batch_size=1):
        break
    # the actors are killed, not left to finish their 60 s calls
    assert _wait_dead(_pids(tmp_path), 50)


@pytest.mark.timeout(180)
def test_ctrl_c_stops_the_pool(tmp_path):
    script = textwrap.dedent(
        """
        import os, sys, time
        import shardflow as sf

        folder = sys.argv[1]

        class Slow:
            def __init__(self):
                open(os.path.join(folder, f"pid-{os.getpid()}"), "w").close()

            def __call__(self, batch):
                open(os.path.join(folder, f"busy-{os.getpid()}"), "w").close()
                time.sleep(60)
                return batch

        try:
            sf.range(10, override_num_blocks=10).map_batches(Slow, concurrency=2).take_all()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(130)
        """
    )
    env = dict(os.environ, SHARDFLOW_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_pids(tmp_path, "busy")) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        actors = _pids(tmp_path)
        assert len(actors) == 2 and all(_alive(p) for p in actors)
        proc.send_signal(signal.SIGINT)
        # killed, not left to finish their 60 s calls (the wait only catches a hang)
        assert _wait_dead(actors, 50), "actors still alive after Ctrl-C"
        code = proc.wait(timeout=50)
        assert code == 130 and "interrupted" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


class Nested:
    """Runs a whole pipeline with an actor pool inside an actor."""

    def __call__(self, batch):
        counts = [
            sf.range(int(i) + 1)
            .map_batches(RecordPid, fn_constructor_args=(self.folder,), concurrency=1)
            .count()
            for i in batch["id"]
        ]
        return {"id": batch["id"], "n": np.array(counts)}

    def __init__(self, folder):
        self.folder = folder


def test_a_pipeline_inside_an_actor_works(tmp_path):
    out = (
        sf.range(4, override_num_blocks=2)
        .map_batches(Nested, fn_constructor_args=(str(tmp_path),), concurrency=1)
        .take_batch(4)
    )
    np.testing.assert_array_equal(out["n"], np.arange(4) + 1)


def test_two_pipelines_with_actor_pools_in_two_threads_finish(tmp_path):
    results, errors = [], []

    def run():
        try:
            ds = sf.range(200, override_num_blocks=8).map_batches(
                RecordPid, fn_constructor_args=(str(tmp_path),), concurrency=2
            )
            results.append(int(ds.sum("id")))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a pipeline hung"
    assert not errors and results == [sum(range(200))] * 2
