"""Lineage reconstruction on Ray: blocks lost with their node are rebuilt by running the tasks
that made them again, and every row arrives exactly once.

The cluster (a head node and a worker node that is killed, then replaced) lives in a
subprocess, tests/faults/scripts/lineage.py: this process holds the test session's own Ray.
It runs once for the module; each test checks one case of what it wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "lineage.py")
ROWS = 400_000  # as in the script
HARD_TIMEOUT_S = 180  # the script stops itself after 100 s; this is the backstop


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[str, dict]:
    """Run the script; (its work folder, its result.json)."""
    work = str(tmp_path_factory.mktemp("lineage"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # A session of its own: after a hang the whole tree (the cluster too) is killed at once.
    process = subprocess.Popen(
        [sys.executable, SCRIPT, work],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"lineage.py ran past {HARD_TIMEOUT_S} s:\n{output[-6000:]}")
    assert process.returncode == 0, output[-6000:]
    with open(os.path.join(work, "result.json")) as file:
        return work, json.load(file)


def rows(work: str, name: str) -> pa.Table:
    return pq.read_table(os.path.join(work, f"{name}.parquet"))


def key_of(ids: np.ndarray) -> np.ndarray:
    return (ids * 7919) % ROWS  # the map stage's column (7919 is prime: a permutation)


def assert_rebuilt_on_the_fresh_node(result: dict, case: str) -> None:
    """Every block lived only on the killed node; after consumption it lives on the fresh one
    (the only way there is a rerun of the task that made it)."""
    before, after = result["cases"][case]["before"], result["cases"][case]["after"]
    assert before and all(nodes == [result["lost_node"]] for nodes in before)
    assert len(after) == len(before)
    for nodes in after:
        assert result["fresh_node"] in nodes and result["lost_node"] not in nodes


def assert_downstream(work: str, name: str, expected: pa.Table) -> None:
    """The rebuilt dataset itself, and a map stage run over it, give ``expected``."""
    assert rows(work, f"{name}_take").select(expected.column_names).equals(expected)
    downstream = rows(work, f"{name}_map")
    assert downstream.select(expected.column_names).equals(expected)
    assert np.array_equal(downstream["twice"].to_numpy(), 2 * expected["id"].to_numpy())


def test_lost_map_outputs_are_rebuilt_by_rerunning_their_tasks(run):
    work, result = run
    assert_rebuilt_on_the_fresh_node(result, "map")
    ids = np.arange(ROWS)
    assert_downstream(work, "map", pa.table({"id": ids, "key": key_of(ids)}))
    # The map function ran again once per lost task (8 blocks in each of 3 datasets), and
    # only on the fresh node.
    before, after = result["map_runs_before"], result["map_runs_after"]
    assert len(before) == 24 and set(before) == {result["lost_node"]}
    assert after[: len(before)] == before
    assert after[len(before) :] == [result["fresh_node"]] * len(before)


def test_lost_sort_outputs_are_rebuilt_in_order(run):
    work, result = run
    assert_rebuilt_on_the_fresh_node(result, "sort")
    ids = np.arange(ROWS)
    order = np.argsort(key_of(ids), kind="stable")
    assert_downstream(work, "sort", pa.table({"id": ids[order], "key": key_of(ids)[order]}))


def test_lost_shuffle_outputs_are_rebuilt_in_the_same_order(run):
    work, result = run
    assert_rebuilt_on_the_fresh_node(result, "shuffle")

    def add_key(batch):
        batch["key"] = key_of(batch["id"])
        return batch

    # A seeded shuffle gives the same order on every run and backend: the local one is the
    # oracle of the order, NumPy of the content.
    expected = (
        sf.range(ROWS, override_num_blocks=8).map_batches(add_key).random_shuffle(seed=7)
    ).to_arrow()
    assert np.array_equal(np.sort(expected["id"].to_numpy()), np.arange(ROWS))
    assert_downstream(work, "shuffle", expected)


def test_lost_actor_outputs_fail_with_ray_s_reconstruction_error(run):
    # Ray rebuilds an actor task's output only by running it again on its actor; the pool's
    # actors are gone once the stage has ended (docs/reliability.md). Restartable actors
    # (max_restarts from the stage's max_retries) make Ray try, and fail with ActorDiedError;
    # actors that may not restart fail it with ObjectReconstructionFailedError.
    work, result = run
    error = result["actor_error"]
    assert error and ("ObjectReconstructionFailedError" in error or "ActorDiedError" in error)
    assert not os.path.exists(os.path.join(work, "actor_map.parquet"))


def test_the_cluster_leaves_no_process(run):
    _, result = run
    assert result["left_running"] == []  # its listening sockets were checked in the script
