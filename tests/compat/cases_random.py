"""Differential cases: train/test splits (streaming, stratified), RandomSeedConfig,
FileShuffleConfig and the argument checks of the random operations (types and messages).

Which rows a random operation picks depends on how each engine cuts its blocks, so the
cases compare what does not: sizes, disjointness, determinism across executions, hash
splits (exact), and errors.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from harness import case, exception_kind


def _error(call):
    try:
        call()
    except Exception as exc:
        return (exception_kind(exc), str(exc).split("\n")[0])
    return "no error"


def _ids(ds):
    return sorted(r["id"] for r in ds.take_all())


@case("Dataset.streaming_train_test_split", slow=True)
def streaming_train_test_splits(m, tmp):
    """hash splits (exact), random splits (sizes, disjoint, seeded), argument errors"""
    ds = m.range(40)
    train, test = ds.streaming_train_test_split(0.25, split_type="hash", hash_column="id")
    words = m.from_items([{"w": f"w{i}"} for i in range(12)])
    wtrain, wtest = words.streaming_train_test_split(0.5, split_type="hash", hash_column="w")
    rtrain, rtest = ds.streaming_train_test_split(0.25, seed=3)
    random_ids = (_ids(rtrain), _ids(rtest))
    return [
        (_ids(train), _ids(test)),
        (sorted(r["w"] for r in wtrain.take_all()), sorted(r["w"] for r in wtest.take_all())),
        sorted(random_ids[0] + random_ids[1]) == list(range(40)),
        not set(random_ids[0]) & set(random_ids[1]),
        (_ids(rtrain), _ids(rtest)) == random_ids,  # the same rows on every execution
        rtrain.schema(),
        [
            _error(lambda: ds.streaming_train_test_split(0)),
            _error(lambda: ds.streaming_train_test_split(1.0)),
            _error(lambda: ds.streaming_train_test_split(0.5, split_type="hash", seed=1)),
            _error(lambda: ds.streaming_train_test_split(0.5, hash_column="id")),
            _error(lambda: ds.streaming_train_test_split(0.5, split_type="hash")),
            _error(lambda: ds.streaming_train_test_split(0.5, split_type="bucket")),
        ],
    ]


@case("Dataset.train_test_split", slow=True)
def stratified_train_test_splits(m, tmp):
    """train_test_split(stratify=): each class in proportion; the argument errors"""
    items = [{"c": ["a", "b", "c"][i % 3] if i < 24 else "a", "v": i} for i in range(30)]
    ds = m.from_items(items)
    train, test = ds.train_test_split(0.25, stratify="c")
    train_n, test_n = ds.train_test_split(6, stratify="c")

    def classes(split):
        rows = split.take_all()
        return {c: sum(1 for r in rows if r["c"] == c) for c in "abc"}

    return [
        (classes(train), classes(test)),
        (classes(train_n), classes(test_n)),
        sorted(r["v"] for r in train.take_all() + test.take_all()) == list(range(30)),
        type(train).__name__,
        [
            _error(lambda: ds.train_test_split(0.2, shuffle=True, stratify="c")),
            _error(lambda: ds.train_test_split("0.2")),
            _error(lambda: ds.train_test_split(1.5)),
            _error(lambda: ds.train_test_split(0.0)),
            _error(lambda: ds.train_test_split(30)),
            _error(lambda: ds.train_test_split(0)),
        ],
    ]


@case(
    "RandomSeedConfig",
    "Dataset.random_shuffle",
    "Dataset.random_sample",
    "Dataset.randomize_block_order",
    slow=True,
)
def random_seed_configs(m, tmp):
    """RandomSeedConfig: the same randomness every execution, or a new one per execution"""

    def repeats(ds):
        first, second = ([r["id"] for r in ds.take_all()] for _ in range(2))
        return first == second, sorted(first) == sorted(set(first))

    config = m.RandomSeedConfig
    return [
        repr(config(seed=3)),
        repeats(m.range(200).random_shuffle(seed=config(seed=42, reseed_after_execution=False))),
        repeats(m.range(200).random_shuffle(seed=config(seed=42))),
        repeats(m.range(200).random_shuffle(seed=7)),
        repeats(m.range(200).random_sample(0.5, seed=config(seed=1, reseed_after_execution=False))),
        repeats(
            m.range(200, override_num_blocks=20).randomize_block_order(
                seed=config(seed=1, reseed_after_execution=False)
            )
        ),
        _error(lambda: config(seed="x")),
    ]


@case("Dataset.random_sample", "Dataset.random_shuffle", "Dataset.randomize_block_order")
def random_argument_errors(m, tmp):
    """the exception types and messages of bad arguments to the random operations"""
    ds = m.range(5)
    return [
        _error(lambda: ds.random_sample(-0.1)),
        _error(lambda: ds.random_sample(1.1)),
        _error(lambda: ds.random_sample("x")),
        _error(lambda: ds.random_sample(0.5, seed="x")),
        _error(lambda: ds.random_shuffle(seed=1.5)),
        _error(lambda: ds.randomize_block_order(seed="x")),
        ds.random_sample(1.0).count(),
        ds.random_sample(0.0).count(),
        ds.random_shuffle(seed=-1).count(),
    ]


@case("FileShuffleConfig", "read_parquet", slow=True)
def file_shuffle_configs(m, tmp):
    """FileShuffleConfig(seed=, reseed_after_execution=): fields, checks, file orders"""
    for i in range(12):
        pq.write_table(pa.table({"id": [i]}), tmp / f"f{i:02d}.parquet")

    def orders(shuffle):
        ds = m.read_parquet(str(tmp), shuffle=shuffle)
        runs = [[r["id"] for r in ds.take_all()] for _ in range(3)]
        return runs[0] == runs[1] == runs[2], sorted(runs[0]) == list(range(12))

    config = m.FileShuffleConfig
    # Ray Data gives rows in a set order only with preserve_order (shardflow's default).
    options = m.DataContext.get_current().execution_options
    previous, options.preserve_order = options.preserve_order, True
    try:
        return [
            repr(config(seed=3)),
            (config().seed, config().reseed_after_execution),
            _error(lambda: config(seed="x")),
            orders(config(seed=5, reseed_after_execution=False)),
            orders(config(seed=5)),
        ]
    finally:
        options.preserve_order = previous
