"""Locality on a Ray cluster, measured as the share of bytes read on the node that holds them.

Every dataset here is made by a map stage that records, in each row, the node that produced
(and so stores) its block; a consumer that records its own node tells whether it read the
block where it lives. Checked: tasks over blocks in the object store run next to them; an
actor pool sends each block to an actor on its node; ``split(n, locality_hints=actors)``
gives each actor the blocks of its node (the seed's example of training workers);
``streaming_split(n, locality_hints=node_ids)`` feeds each consumer the blocks of its node.

Run by `make test-cluster` (``cluster_long``).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
from node_meeting import meet, meeting_place, node_of_process

import shardflow as sf

pytestmark = [pytest.mark.timeout(900), pytest.mark.cluster, pytest.mark.cluster_long]

CLUSTER = {"workers": 3}
ROWS, BLOCKS = 120_000, 60  # 2,000 rows of ~1 KiB a block: every block in the object store
PAYLOAD = 1024


def produce(batch: dict, meeting: str) -> dict:
    """The producing stage: a payload, and the node the block is made (and stored) on. Its
    first tasks wait for each other on every node (node_meeting.py), so that the blocks
    spread over the nodes."""
    meet(meeting, node_of_process(), CLUSTER["workers"])
    rows = len(batch["id"])
    batch["blob"] = np.zeros((rows, PAYLOAD), dtype=np.uint8)
    batch["home"] = np.array([node_of_process()] * rows)
    return batch


def read_here(batch: dict) -> dict:
    """A consumer stage: one row per block, saying where it was read."""
    return {
        "first": batch["id"][:1],
        "rows": np.array([len(batch["id"])]),
        "home": batch["home"][:1],
        "reader": np.array([node_of_process()]),
    }


class ReadHere:
    """The same consumer as an actor pool's class. Its constructor returns once the pool's
    three actors, one on each node, are all constructed (node_meeting.py):
    on a loaded machine one actor could otherwise be up seconds before the others and read
    most blocks, wherever they are, before they start."""

    def __init__(self, meeting: str):
        self.node = node_of_process()
        meet(meeting, self.node, CLUSTER["workers"])

    def __call__(self, batch: dict) -> dict:
        import time

        time.sleep(0.05)
        out = read_here(batch)
        out["reader"] = np.array([self.node])
        return out


def materialized():
    """A dataset whose blocks sit in the object stores of the nodes that made them."""
    return produced().materialize()


def produced():
    """``ROWS`` rows in ``BLOCKS`` blocks, made by ``produce`` on the nodes."""
    ds = sf.range(ROWS, override_num_blocks=BLOCKS)
    return ds.map_batches(produce, fn_kwargs={"meeting": meeting_place()})


def local_share(table: pa.Table) -> float:
    """Share of rows (all rows have the same size) read on the node holding them."""
    rows = table["rows"].to_numpy()
    local = np.array(table["home"].to_pylist()) == np.array(table["reader"].to_pylist())
    return float(rows[local].sum() / rows.sum())


def tasks_and_actors(session) -> dict:
    """In the cluster's driver: a task stage and an actor pool over materialized blocks."""
    ds = materialized()
    tasks = ds.map_batches(read_here).to_arrow()
    # Without an order to keep, an actor with room picks an input held on its node.
    sf.DataContext.get_current().preserve_order = False
    pool = ds.map_batches(
        ReadHere, fn_constructor_args=(meeting_place(),), concurrency=3, num_cpus=0.5
    )
    actors = pool.to_arrow()
    homes = ds.map_batches(read_here).to_arrow()["home"].to_pylist()
    return {"tasks": tasks, "actors": actors, "stats": pool.stats(), "homes": homes}


@pytest.fixture(scope="module")
def placed(cluster):
    return cluster.call(tasks_and_actors)


def assert_every_row_once(table: pa.Table) -> None:
    assert table["rows"].to_numpy().sum() == ROWS
    firsts = np.sort(table["first"].to_numpy())
    assert np.array_equal(firsts, np.arange(0, ROWS, ROWS // BLOCKS))


def test_blocks_spread_over_every_node(cluster, placed):
    assert set(placed["homes"]) == set(cluster.workers)


def test_tasks_over_stored_blocks_run_where_the_blocks_are(placed):
    table = placed["tasks"]
    assert_every_row_once(table)
    # Ray places a task on the node holding its input when that node has a free CPU, and
    # elsewhere rather than wait: most reads are local (a spread placement gives a third).
    print(f"node-local share of bytes read by tasks: {local_share(table):.2f}")
    assert local_share(table) >= 0.6, local_share(table)


def test_an_actor_pool_reads_the_blocks_of_its_actors_nodes(placed):
    table = placed["actors"]
    assert_every_row_once(table)
    assert len(set(table["reader"].to_pylist())) == 3  # one actor per node
    print(f"node-local share of bytes read by the actor pool: {local_share(table):.2f}")
    assert local_share(table) >= 0.6, (local_share(table), placed["stats"])
    assert "% of input bytes node-local" in placed["stats"]


class Worker:
    """The seed's training worker: reads its shard, says how much was on its node."""

    def __init__(self):
        self.node = node_of_process()

    def node_id(self) -> str:
        return self.node

    def train(self, shard) -> dict:
        rows = local = 0
        firsts = []
        for batch in shard.iter_batches(batch_size=None):
            count = len(batch["id"])
            rows += count
            local += int((batch["home"] == self.node).sum())
            firsts.extend(batch["id"].tolist())
        return {"rows": rows, "local": local, "ids": firsts}


def workers_on_every_node(session) -> list:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0)(Worker)
    workers = [
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote()
        for node in session.node_ids()
    ]
    ray.get([w.node_id.remote() for w in workers])
    return workers


def split_for_workers(session, equal: bool) -> dict:
    """In the cluster's driver: the seed's example, ``split(n, locality_hints=workers)``,
    and the same split without hints."""
    import ray

    ds = materialized()
    # Where each block is before anything reads it (reading one elsewhere copies it there).
    refs = [ref.object_ref for ref in ds._plan.source.blocks]
    found = ray.experimental.get_object_locations(refs)
    homes = [found[ref]["node_ids"][0] for ref in refs]
    assert all(len(found[ref]["node_ids"]) == 1 for ref in refs)
    workers = workers_on_every_node(session)
    nodes = ray.get([w.node_id.remote() for w in workers])
    out = {"homes": homes, "nodes": nodes}
    for name, hints in (("hinted", workers), ("plain", None)):
        shards = ds.split(n=len(workers), equal=equal, locality_hints=hints)
        out[name] = ray.get([w.train.remote(s) for w, s in zip(workers, shards)])
    return out


def best_share(homes: list[str], nodes: list[str]) -> float:
    """The largest local share an allocation of equal block counts can reach."""
    n, blocks = len(nodes), len(homes)
    counts = [blocks // n + (1 if i < blocks % n else 0) for i in range(n)]
    held = {node: homes.count(node) for node in nodes}
    return sum(min(held[node], count) for node, count in zip(nodes, counts)) / blocks


@pytest.mark.parametrize("equal", [False, True])
def test_split_with_actor_hints_gives_each_actor_its_node_s_blocks(cluster, equal):
    result = cluster.call(split_for_workers, equal)
    for name in ("hinted", "plain"):
        ids = np.sort(np.concatenate([np.array(r["ids"]) for r in result[name]]))
        assert np.array_equal(ids, np.arange(ROWS)), name  # every row, once
        if equal:
            assert len({r["rows"] for r in result[name]}) == 1, name
    hinted = sum(r["local"] for r in result["hinted"]) / ROWS
    plain = sum(r["local"] for r in result["plain"]) / ROWS
    # As many blocks as the equal counts allow are read where they are (equal=True moves
    # at most a block's worth of rows per split), well above a split that ignores nodes.
    best = best_share(result["homes"], result["nodes"])
    print(f"split(equal={equal}) node-local share: hinted {hinted:.2f}, plain {plain:.2f}")
    slack = len(result["nodes"]) / BLOCKS if equal else 0.0
    assert hinted >= best - slack - 1e-9, (hinted, best, plain)
    assert hinted > plain or plain >= best - 1e-9


class Consumer:
    """A consumer of one streaming split on its node."""

    def __init__(self):
        self.node = node_of_process()

    def node_id(self) -> str:
        return self.node

    def consume(self, iterator, meeting: str) -> dict:
        # The consumers start together (node_meeting.py): one that starts seconds after the
        # others finds them gone with most blocks, its node's among them, as it should.
        meet(meeting, self.node, CLUSTER["workers"])
        rows = local = 0
        ids = []
        for batch in iterator.iter_batches(batch_size=None):
            rows += len(batch["id"])
            local += int((batch["home"] == self.node).sum())
            ids.extend(batch["id"].tolist())
            # A consumer's pace is set by its work, as a trainer's is, not by how much CPU
            # the machine's other processes leave it: consumers that ask at very different
            # rates would find the buffer full of the slow one's blocks.
            time.sleep(0.05)
        return {"rows": rows, "local": local, "ids": ids}


def streaming_split_on_nodes(session, hinted: bool) -> list:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0)(Consumer)
    consumers = [
        remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote()
        for node in session.node_ids()
    ]
    nodes = ray.get([c.node_id.remote() for c in consumers])
    ds = produced()
    iterators = ds.streaming_split(len(nodes), locality_hints=nodes if hinted else None)
    meeting = meeting_place()
    return ray.get([c.consume.remote(it, meeting) for c, it in zip(consumers, iterators)])


def test_streaming_split_with_node_hints_feeds_each_consumer_its_node_s_blocks(cluster):
    shares = {}
    for hinted in (True, False):
        results = cluster.call(streaming_split_on_nodes, hinted)
        ids = np.sort(np.concatenate([np.array(r["ids"]) for r in results]))
        assert np.array_equal(ids, np.arange(ROWS))  # every row, once
        shares[hinted] = sum(r["local"] for r in results) / ROWS
    # Without hints a consumer gets whatever block is next (about a third is local); with
    # them, only blocks handed out when the buffer is full or at the end may be remote.
    print(f"streaming_split node-local share: hinted {shares[True]:.2f}, plain {shares[False]:.2f}")
    assert shares[True] >= 0.6, shares
