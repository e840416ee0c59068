"""Differential cases: grouped shortcuts, sampling, block order, unique, and iteration
(``iterator``, ``DataIterator``, ``streaming_split``, ``iter_torch_batches``).

Sorts, joins, splits and the other exchanges are compared in test_a2a_vs_ray.py. Ray Data
gives grouped rows and shuffled blocks in no set order, so rows are sorted before comparing.
"""

from __future__ import annotations

import threading

from harness import case


def _sorted(rows, key):
    return sorted(rows, key=lambda r: r[key])


@case(
    "GroupedData.count",
    "GroupedData.sum",
    "GroupedData.std",
    "GroupedData.min",
    "GroupedData.max",
    "GroupedData.mean",
    "Dataset.groupby",
    slow=True,
    note="the per-group shortcuts, over one column or several, with their column names",
)
def grouped_shortcuts(m, tmp):
    """count, sum of two columns, min, max, mean and std per group"""
    rows = [{"k": i % 3, "v": float(i), "w": i * 2} for i in range(12)]
    grouped = m.from_items(rows).groupby("k")
    return [
        _sorted(grouped.count().take_all(), "k"),
        _sorted(grouped.sum(["v", "w"]).take_all(), "k"),
        _sorted(grouped.min("v").take_all(), "k"),
        _sorted(grouped.max(["v", "w"]).take_all(), "k"),
        _sorted(grouped.mean("w").take_all(), "k"),
        [{k: round(v, 9) for k, v in r.items()} for r in _sorted(grouped.std("v").take_all(), "k")],
    ]


@case(
    "Dataset.unique",
    "Dataset.random_sample",
    "Dataset.randomize_block_order",
    note="unique values, sampling with fraction 0 and 1, block order shuffles",
    slow=True,
)
def unique_sample_and_block_order(m, tmp):
    """unique values of a column; fraction 0/1 samples; randomize_block_order keeps rows"""
    ds = m.from_items([{"x": i % 4, "y": "ab"[i % 2]} for i in range(10)])
    shuffled = m.range(20, override_num_blocks=4).randomize_block_order(seed=3)
    return [
        sorted(ds.unique("x")),
        sorted(ds.unique("y")),
        m.range(50).random_sample(1.0).count(),
        m.range(50).random_sample(0.0).count(),
        sorted(r["id"] for r in shuffled.take_all()),
        shuffled.count(),
    ]


@case(
    "Dataset.iterator",
    "DataIterator",
    "DataIterator.iter_batches",
    "DataIterator.iter_rows",
    "DataIterator.materialize",
    "DataIterator.stats",
    "DataIterator.schema",
    "DataIterator.get_context",
    note="a dataset's DataIterator",
)
def data_iterator(m, tmp):
    """batches and rows from ds.iterator(), its schema, context and materialize()"""
    it = m.range(10, override_num_blocks=2).iterator()
    return [
        isinstance(it, m.DataIterator),
        [len(b["id"]) for b in it.iter_batches(batch_size=4)],
        [int(b["id"][0]) for b in it.iter_batches(batch_size=3, drop_last=True)],
        sorted(r["id"] for r in it.iter_rows()),
        it.schema(),
        type(it.get_context()).__name__,
        it.materialize().count(),
        isinstance(it.stats(), str),
    ]


@case("Dataset.streaming_split", note="splits consumed at the same time by threads")
def streaming_split(m, tmp):
    """two splits of equal size, read concurrently, hold every row once"""
    splits = m.range(20, override_num_blocks=4).streaming_split(2, equal=True)
    out = [None, None]

    def consume(i):
        out[i] = [r["id"] for r in splits[i].iter_rows()]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return [len(splits), [len(rows) for rows in out], sorted(out[0] + out[1])]


class _Reader:
    """A Ray actor standing for a training worker that reads one split."""

    def node(self):
        import ray

        return ray.get_runtime_context().get_node_id()


@case("Dataset.split", note="locality_hints: one Ray actor per split", slow=True)
def split_with_locality_hints(m, tmp):
    """with an actor per split, splits of whole blocks, equal ones of equal rows, every row
    once; a hint list of the wrong length is refused"""
    import ray

    readers = [ray.remote(num_cpus=0)(_Reader).remote() for _ in range(2)]
    ray.get([r.node.remote() for r in readers])
    ds = m.range(20, override_num_blocks=4)
    out = []
    for equal in (False, True):
        splits = ds.split(2, equal=equal, locality_hints=readers)
        out.append(
            [[d.count() for d in splits], sorted(r["id"] for d in splits for r in d.take_all())]
        )
    try:
        ds.split(3, locality_hints=readers)
    except Exception as exc:  # the harness compares exception kinds
        out.append(type(exc).__name__)
    return out


@case("Dataset.streaming_split", note="locality_hints: one node id per split")
def streaming_split_with_locality_hints(m, tmp):
    """with a node id per split, equal splits read concurrently hold every row once"""
    import ray

    node = ray.get_runtime_context().get_node_id()
    splits = m.range(20, override_num_blocks=4).streaming_split(
        2, equal=True, locality_hints=[node, node]
    )
    out = [None, None]

    def consume(i):
        out[i] = [r["id"] for r in splits[i].iter_rows()]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return [[len(rows) for rows in out], sorted(out[0] + out[1])]


@case(
    "Dataset.iter_torch_batches",
    "DataIterator.iter_torch_batches",
    requires=("torch",),
    note="torch batches with dtypes",
)
def torch_batches(m, tmp):
    """tensors per column, their dtype and shape"""
    import torch

    ds = m.from_items([{"x": float(i), "y": i} for i in range(6)], override_num_blocks=1)
    # A dtypes dict must name every column on Ray Data (KeyError otherwise); shardflow gives
    # the columns it does not name their default dtype (docs/compatibility.md).
    batches = list(
        ds.iter_torch_batches(batch_size=4, dtypes={"x": torch.float32, "y": torch.int64})
    )
    from_iterator = list(ds.iterator().iter_torch_batches(batch_size=6))
    return [
        [(str(b["x"].dtype), tuple(b["x"].shape), str(b["y"].dtype)) for b in batches],
        [b["x"].tolist() for b in batches],
        [b["y"].tolist() for b in from_iterator],
    ]
