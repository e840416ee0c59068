"""Differential cases: the Dataset methods and exports that exist in both."""

from __future__ import annotations

import pyarrow as pa
from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


@case(
    "Dataset",
    "range",
    "Dataset.map",
    "Dataset.flat_map",
    "Dataset.filter",
    "Dataset.map_batches",
    "Dataset.limit",
    "Dataset.take",
    "Dataset.take_all",
    "Dataset.count",
)
def transforms(m, tmp):
    """row and batch transforms, filters (function and expression), limit"""
    ds = m.range(10, override_num_blocks=3)
    return [
        ds.map(lambda r: {"sq": r["id"] ** 2}).take(3),
        ds.flat_map(lambda r: [r, r]).count(),
        ds.filter(lambda r: r["id"] % 3 == 0).take_all(),
        ds.filter(expr="id > 6").take_all(),
        ds.map_batches(lambda b: {"id": b["id"] + 1}, batch_size=4).take(2),
        ds.limit(2).take_all(),
        _raises(lambda: ds.take_all(limit=5)),
    ]


@case(
    "Dataset.add_column",
    "Dataset.select_columns",
    "Dataset.drop_columns",
    "Dataset.rename_columns",
    "Dataset.columns",
    "Dataset.schema",
)
def columns(m, tmp):
    """adding, selecting, dropping and renaming columns"""
    ds = m.from_items([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    return [
        # Ray Data does not keep the order of from_items' rows through add_column here
        sorted(ds.add_column("c", lambda df: df["a"] + df["b"]).take_all(), key=lambda r: r["a"]),
        ds.select_columns(["b"]).take_all(),
        ds.drop_columns(["b"]).take_all(),
        ds.rename_columns({"a": "x"}).take_all(),
        ds.columns(),
        ds.schema(),
        _raises(lambda: ds.select_columns(["a", "a"])),
    ]


@case("Dataset.sum", "Dataset.min", "Dataset.max", "Dataset.mean", "Dataset.std")
def aggregates(m, tmp):
    """whole-dataset aggregates"""
    ds = m.from_items([{"x": float(i)} for i in range(5)])
    empty = m.range(3).filter(expr="id > 5")
    return [
        ds.sum("x"),
        ds.min("x"),
        ds.max("x"),
        ds.mean("x"),
        round(ds.std("x"), 9),
        empty.sum("id"),
    ]


@case(
    "Dataset.iter_rows",
    "Dataset.iter_batches",
    "Dataset.to_pandas",
    "Dataset.to_arrow_refs",
    "Dataset.materialize",
    "Dataset.show",
    "Dataset.stats",
)
def consumption(m, tmp):
    """iteration, conversions, materialize"""
    import ray

    ds = m.range(6, override_num_blocks=2)
    refs = ds.to_arrow_refs()
    tables = [ray.get(r) if isinstance(r, ray.ObjectRef) else r for r in refs]
    materialized = ds.materialize()
    # Ray Data does not keep block order by default (rows come 3, 4, 5, 0, 1, 2 on a busy
    # machine): rows are compared as sorted lists.
    return [
        sorted(r["id"] for r in ds.iter_rows()),
        [len(b["id"]) for b in ds.iter_batches(batch_size=4)],
        [len(b["id"]) for b in ds.iter_batches(batch_size=4, drop_last=True)],
        sorted(ds.to_pandas(limit=6)["id"].tolist()),
        sum(t.num_rows for t in tables),
        materialized.count(),
        ds.show(2),
        isinstance(materialized.stats(), str),
    ]


@case("Datasource", "ReadTask", "read_datasource", "Datasink", "Dataset.write_datasink")
def custom_datasource_and_datasink(m, tmp):
    """a Datasource and a Datasink written against the shared API"""
    import ray.data.block as ray_block

    import shardflow as sf

    BlockMetadata = ray_block.BlockMetadata if m.__name__ == "ray.data" else sf.BlockMetadata

    class Numbers(m.Datasource):
        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            def make(i):
                meta = BlockMetadata(num_rows=2, size_bytes=16, exec_stats=None, input_files=None)
                return m.ReadTask(lambda: [pa.table({"x": [2 * i, 2 * i + 1]})], meta)

            return [make(i) for i in range(3)]

    class Collect(m.Datasink):
        def write(self, blocks, ctx):
            return sum(len(b) for b in blocks)

        def on_write_complete(self, write_result):
            self.total = write_result.num_rows

    sink = Collect()
    ds = m.read_datasource(Numbers())
    ds.write_datasink(sink)
    return sorted(r["x"] for r in ds.take_all()), sink.total


@case("DataContext", "FileShuffleConfig", "read_csv")
def context_and_shuffle(m, tmp):
    """DataContext.get_current and file shuffling with a seed"""
    for i in range(4):
        (tmp / f"{i}.csv").write_text(f"a\n{i}\n")
    shuffled = m.read_csv(tmp, shuffle=m.FileShuffleConfig(seed=1))
    context = m.DataContext.get_current()
    return [
        sorted(r["a"] for r in shuffled.take_all()),
        context is m.DataContext.get_current(),
        isinstance(context.target_max_block_size, int),
    ]
