"""Shared fixtures: a fresh DataContext per test, and the two backends.

Ray is started once per test session, on loopback only, with two CPUs.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys

import pytest

os.environ.setdefault("SHARDFLOW_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray Data (the oracle of tests/compat) reads Parquet footers on a pool of actors, 32 by
# default, started afresh by every read_parquet: on two cores most of the differential
# suite's CPU went to starting them. One actor reads the few files of a test as well (the
# rows, types and errors do not depend on how many read footers).
os.environ.setdefault("RAY_DATA_PARQUET_FOOTER_NUM_ACTORS", "1")

# A shell starts background jobs (`make test &`) with SIGINT ignored, and an ignored signal
# stays ignored in every process started from here: the scripts the Ctrl-C tests interrupt
# would never see it. Give this process the handler a foreground run has, so that its
# children start with the signal's default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import shardflow as sf

# S3 (moto) and GCS (emulator) servers and the ``store`` fixtures, for every test folder.
pytest_plugins = ["storage_fixtures", "spark_fixtures"]
from shardflow.engine.api.context import DataContext

#: Tests that run one at a time, on one worker, when the suite runs on several
#: (``make pytest``: pytest-xdist with ``--dist loadgroup``): those that measure the memory of
#: processes, and those that wait on short deadlines or idle timeouts, which a second worker's
#: load would stretch. Paths relative to tests/; a "::" part names one test.
SERIAL_GROUP = "serial"
SERIAL_TESTS = (
    "faults/test_faults_write_memory.py",
    "faults/test_faults_actors.py",
    "faults/test_faults_processes.py",
    "engine/execution/test_engine_memory.py",
    "engine/execution/exchange/test_exchange_spill.py",
    "engine/execution/test_actor_pools.py::test_autoscaling_grows_with_queued_work_then_shrinks_when_idle",
    "engine/splits/test_streaming_split.py",
    "engine/test_engine_startup.py",
    "benchmarks/test_harness.py",
)


#: Tests in the slow tier (``make test-slow``, which CI runs after ``make test``) beside those
#: marked in their files: each repeats, on the Ray backend or at a larger count, what a
#: quicker test of the default suite checks, at a cost of 2.5-10 s of CPU, so that ``make
#: test`` stays within 6 minutes on two cores. Names as in SERIAL_TESTS, where a "[...]"
#: part picks one parameter set. (The Spark tests are slow too: see below.)
SLOW_TESTS = (
    "faults/test_faults_small_budgets.py::test_no_exchange_or_write_waits_forever",
    "engine/execution/exchange/test_a2a_shuffle.py::test_repartition_by_rows_per_block[ray]",
    "engine/execution/exchange/test_a2a_shuffle.py::test_random_shuffle_is_a_seeded_permutation[ray]",
    "engine/execution/exchange/test_a2a_groupby.py::test_global_aggregations_match_oracle[ray]",
    "engine/execution/exchange/test_a2a_groupby.py::test_grouped_shortcuts_match_oracle[ray]",
    "engine/test_engine_properties.py::test_map_batches_sees_exact_batch_sizes_per_task[ray]",
    "engine/api/interop/test_interop_torch.py::test_dataloader_workers_read_each_row_once_per_epoch[blocks]",
    "compat/test_a2a_vs_ray.py::test_sort_multi_key_nulls_and_nan_like_ray",
    "compat/test_lerobot_vs_ray.py::test_plans_match_rays_planner",
    "compat/test_documented_differences.py::test_to_torch_shares_rows_among_dataloader_workers",
    "compat/test_a2a_vs_ray.py::test_sort_then_take_of_parquet_files_like_ray",
    "engine/execution/test_engine_memory.py::test_a_slow_first_task_does_not_push_the_budget[ray]",
)

#: Tests that share one costly server or cluster run on one worker, so that it starts once
#: (a session- or module-scoped fixture starts once per xdist worker that needs it).
SPARK_GROUP = "spark"
CLUSTER_GROUP = "cluster"


def _asks_for(node, fixture: str, param: str) -> bool:
    """Whether the test asks for ``fixture`` by name, or through a ``param`` parameter (a
    backend fixture that requests it at run time)."""
    callspec = getattr(node, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    # Param values may be anything (an expression refuses ``==`` in a bool context).
    named = any(isinstance(value, str) and value == param for value in params)
    return named or fixture in getattr(node, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    root = os.path.dirname(__file__)
    for item in items:
        relative = os.path.relpath(str(item.fspath), root).replace(os.sep, "/")
        names = {relative, f"{relative}::{item.originalname}", f"{relative}::{item.name}"}
        spark = _asks_for(item, "spark", "spark")
        # Spark's JVM costs ~20 s of CPU to start and keeps busy while it lives: the Spark
        # tests are in the slow tier.
        if spark or names.intersection(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
        if names.intersection(SERIAL_TESTS):
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
        elif relative.startswith("cluster/"):
            item.add_marker(pytest.mark.xdist_group(CLUSTER_GROUP))
        elif spark:
            item.add_marker(pytest.mark.xdist_group(SPARK_GROUP))


@pytest.fixture(autouse=True)
def fresh_context(request):
    """Every test starts from default settings on the local backend."""
    previous = DataContext.get_current()
    DataContext._set_current(DataContext())
    if _asks_for(request.node, "ray_session", "ray"):
        _ray["tests"] += 1
    yield DataContext.get_current()
    DataContext._set_current(previous)


RAY_START_ATTEMPTS = 3
#: A Ray session that has served this many Ray tests is started afresh at the next module: late
#: in a long session (hundreds of actors and thousands of tasks in one driver) Ray now and
#: then stops telling the driver about an actor (a call that never returns); a younger
#: session has not shown it. Started between modules, so no module's fixtures hold objects
#: of the session that ends.
RAY_TESTS_PER_SESSION = int(os.environ.get("SHARDFLOW_TEST_RAY_TESTS_PER_SESSION", "250"))
_ray = {"started_here": False, "tests": 0, "lock": None}


def _start_ray(lock_path) -> None:
    """ray.init on loopback, one xdist worker at a time, retried on a failed start."""
    import ray

    # Ray workers get only the driver's cwd on sys.path; test modules holding functions
    # and classes pickled by reference must be importable there too. Workers inherit the
    # environment of the processes ray.init starts (a runtime_env would cost ~10 s).
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # Ray gives its raylet 30 s to register, a limit a loaded machine can miss, the more
    # so when the pytest-xdist workers start their Rays at the same moment: they start
    # one at a time (a lock in the folder the workers share), and a failed start is
    # retried.
    try:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for attempt in range(1, RAY_START_ATTEMPTS + 1):
                try:
                    # Two logical GPUs: GPU scheduling is tested without a GPU (Ray sets
                    # CUDA_VISIBLE_DEVICES for tasks and actors that ask for them).
                    # address="local": a fresh instance even when another Ray on this
                    # machine (`ray start`, a test cluster of another process) would
                    # otherwise be joined.
                    ray.init(
                        address="local",
                        num_cpus=2,
                        num_gpus=2,
                        include_dashboard=False,
                        log_to_driver=False,
                    )
                    break
                except Exception as exc:
                    ray.shutdown()
                    if attempt == RAY_START_ATTEMPTS:
                        raise
                    sys.stderr.write(f"Ray did not start ({exc}); trying again\n")
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous
    _ray["tests"] = 0


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    """A real local Ray, started once per test process, bound to 127.0.0.1 (and started
    afresh between modules after ``RAY_TESTS_PER_SESSION`` tests)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    # Ray runs its workers at niceness 15; with another process keeping the cores busy they
    # then got almost no CPU (the suite reached 5% in 9 minutes beside two busy loops).
    os.environ.setdefault("RAY_worker_niceness", "0")
    import ray

    if not ray.is_initialized():
        _ray["lock"] = tmp_path_factory.getbasetemp().parent / "ray-start.lock"
        _start_ray(_ray["lock"])
        _ray["started_here"] = True
    yield ray
    ray.shutdown()
    _ray["started_here"] = False


@pytest.fixture(scope="module", autouse=True)
def young_ray_session():
    """Start the session's Ray afresh between modules once it has served many tests."""
    if _ray["started_here"] and _ray["tests"] >= RAY_TESTS_PER_SESSION:
        import ray

        from shardflow.engine.execution import runtime

        if ray.is_initialized():
            ray.shutdown()
            runtime._backends.pop("ray", None)
            _start_ray(_ray["lock"])
    yield


@pytest.fixture(params=["local", "ray"])
def backend(request, fresh_context):
    """Run the test on each backend; yields the backend's name."""
    if request.param == "ray":
        request.getfixturevalue("ray_session")
        sf.init(backend="ray")
    else:
        sf.init(backend="local")
    yield request.param
