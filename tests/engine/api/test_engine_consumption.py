"""Consuming a Dataset: take, iteration, count, schema, aggregates, stats and repr."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.sdk import BlockMetadata, Datasource, ReadTask


def touch_marker(batch, folder):
    """Leaves one file per call, so calls can be counted across processes and Ray workers."""
    with open(os.path.join(folder, uuid.uuid4().hex), "w"):
        pass
    return batch


def add_one(batch):
    return {"id": batch["id"] + 1}


def _frame(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(-100, 100, size=n)})


class FailingReadDatasource(Datasource):
    """Knows its row count from metadata; reading it raises."""

    def get_read_tasks(self, parallelism, **kwargs):
        def read_fn():
            raise AssertionError("count() must not read the data")

        return [ReadTask(read_fn, BlockMetadata(num_rows=25, size_bytes=200)) for _ in range(4)]


# -- take and friends --------------------------------------------------------------------


def test_take(backend):
    ds = sf.range(1000, override_num_blocks=8)
    assert ds.take() == [{"id": i} for i in range(20)]
    assert ds.take(3) == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert ds.take(5000) == [{"id": i} for i in range(1000)]


def test_take_batch(backend):
    ds = sf.range(100, override_num_blocks=4).map_batches(
        lambda b: {"id": b["id"], "f": b["id"] * 0.5}
    )
    batch = ds.take_batch(30)
    np.testing.assert_array_equal(batch["id"], np.arange(30))
    np.testing.assert_array_equal(batch["f"], np.arange(30) * 0.5)
    df = ds.take_batch(5, batch_format="pandas")
    pd.testing.assert_frame_equal(
        df, pd.DataFrame({"id": np.arange(5), "f": np.arange(5) * 0.5}), check_dtype=False
    )
    table = ds.take_batch(4, batch_format="pyarrow")
    assert isinstance(table, pa.Table) and table.column("id").to_pylist() == [0, 1, 2, 3]


def test_take_all(backend):
    assert sf.range(10).take_all() == [{"id": i} for i in range(10)]
    assert sf.range(10).take_all(limit=10) == [{"id": i} for i in range(10)]
    with pytest.raises(ValueError, match="more than 5"):
        sf.range(10).take_all(limit=5)


def test_show(backend, capsys):
    sf.from_items([{"a": i, "b": str(i)} for i in range(30)]).show(3)
    out = capsys.readouterr().out.splitlines()
    assert out == [str({"a": i, "b": str(i)}) for i in range(3)]


def test_iter_rows_and_iter(backend):
    ds = sf.range(25, override_num_blocks=3)
    assert [r["id"] for r in ds.iter_rows()] == list(range(25))
    assert [r["id"] for r in ds] == list(range(25))


# -- iter_batches ------------------------------------------------------------------------


@pytest.mark.parametrize("prefetch_batches", [0, 1, 4])
def test_iter_batches_sizes_and_order(backend, prefetch_batches):
    ds = sf.range(103, override_num_blocks=4)
    batches = list(ds.iter_batches(batch_size=10, prefetch_batches=prefetch_batches))
    assert [len(b["id"]) for b in batches] == [10] * 10 + [3]
    np.testing.assert_array_equal(np.concatenate([b["id"] for b in batches]), np.arange(103))


def test_iter_batches_drop_last(backend):
    ds = sf.range(103, override_num_blocks=4)
    batches = list(ds.iter_batches(batch_size=10, drop_last=True))
    assert [len(b["id"]) for b in batches] == [10] * 10
    np.testing.assert_array_equal(np.concatenate([b["id"] for b in batches]), np.arange(100))


def test_iter_batches_formats(backend):
    ds = sf.range(12, override_num_blocks=2)
    for batch in ds.iter_batches(batch_size=5, batch_format="pandas"):
        assert isinstance(batch, pd.DataFrame)
    frames = list(ds.iter_batches(batch_size=5, batch_format="pandas"))
    assert pd.concat(frames)["id"].tolist() == list(range(12))
    tables = list(ds.iter_batches(batch_size=5, batch_format="pyarrow"))
    assert all(isinstance(t, pa.Table) for t in tables)
    assert pa.concat_tables(tables).column("id").to_pylist() == list(range(12))
    default = next(iter(ds.iter_batches(batch_size=5, batch_format="default")))
    assert isinstance(default, dict)


def test_iter_batches_whole_blocks(backend):
    ds = sf.range(30, override_num_blocks=3)
    sizes = [len(b["id"]) for b in ds.iter_batches(batch_size=None)]
    assert sum(sizes) == 30 and sizes == [10, 10, 10]


def test_iter_batches_tensors(backend):
    data = np.arange(60, dtype=np.float32).reshape(15, 2, 2)
    batches = list(sf.from_numpy(data, override_num_blocks=3).iter_batches(batch_size=4))
    assert [b["data"].shape for b in batches] == [(4, 2, 2)] * 3 + [(3, 2, 2)]
    np.testing.assert_array_equal(np.concatenate([b["data"] for b in batches]), data)


# -- count, schema, columns --------------------------------------------------------------


def test_count(backend):
    assert sf.range(1234).count() == 1234
    assert sf.range(100).filter(sf.col("id") < 10).count() == 10
    assert sf.range(100).flat_map(lambda r: [r, r]).count() == 200
    assert sf.from_items([{"a": 1}] * 7).count() == 7
    assert sf.range(0).count() == 0


def test_count_on_range_runs_no_tasks(backend):
    ds = sf.range(10**12)
    assert ds.count() == 10**12
    assert ds._last_stats is None
    assert "not been executed" in ds.stats()
    limited = ds.limit(10).select_columns(["id"])
    assert limited.count() == 10
    assert limited._last_stats is None


def test_count_from_metadata_does_not_read(backend):
    ds = sf.read_datasource(FailingReadDatasource())
    assert ds.count() == 100
    assert ds.select_columns(["x"]).count() == 100


def test_schema_and_columns(backend):
    ds = sf.from_pandas(pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]}))
    schema = ds.schema()
    assert isinstance(schema, sf.Schema)
    assert schema.names == ["a", "b", "c"]
    assert schema.types[0] == pa.int64() and schema.types[2] == pa.float64()
    assert schema.base_schema.field("c").type == pa.float64()
    assert ds.columns() == ["a", "b", "c"]
    assert sf.range(3).schema().base_schema == pa.schema([("id", pa.int64())])
    mapped = sf.range(3).map_batches(lambda b: {"f": b["id"].astype(np.float32)})
    assert mapped.schema(fetch_if_missing=False) is None
    assert mapped.columns(fetch_if_missing=False) is None
    assert mapped.schema().base_schema == pa.schema([("f", pa.float32())])
    assert sf.from_items([]).schema() is None
    assert sf.from_items([]).columns() is None


# -- whole results -----------------------------------------------------------------------


def test_materialize_runs_the_plan_once(backend, tmp_path):
    ds = sf.range(40, override_num_blocks=4).map_batches(touch_marker, fn_args=(str(tmp_path),))
    materialized = ds.materialize()
    calls = len(os.listdir(tmp_path))
    assert calls == 4
    assert materialized.count() == 40
    assert materialized.take_all() == [{"id": i} for i in range(40)]
    assert materialized.sum("id") == sum(range(40))
    assert len(os.listdir(tmp_path)) == calls
    assert "shape: (40, 1)" in repr(materialized)
    assert "(Showing 10 of 40 rows)" in repr(materialized)


def test_to_pandas(backend):
    df = _frame()
    # A frame given to from_pandas comes back with its own dtypes (Ray Data keeps it as
    # pandas blocks); data from elsewhere gets Arrow-backed dtypes, as Ray Data 2.60 gives.
    pd.testing.assert_frame_equal(sf.from_pandas(df, override_num_blocks=3).to_pandas(), df)
    table = pa.Table.from_pandas(df, preserve_index=False)
    expected = table.to_pandas(types_mapper=pd.ArrowDtype)
    pd.testing.assert_frame_equal(sf.from_arrow(table).to_pandas(), expected)
    assert sf.range(10).to_pandas(limit=10).shape == (10, 1)
    with pytest.raises(ValueError, match="more than 5"):
        sf.range(10).to_pandas(limit=5)


def test_to_arrow_and_refs(backend):
    ds = sf.range(30, override_num_blocks=3).map_batches(add_one)
    expected = pa.table({"id": np.arange(1, 31)})
    assert ds.to_arrow().equals(expected)
    refs = ds.to_arrow_refs()
    assert len(refs) == 3
    if backend == "ray":
        import ray

        tables = ray.get(refs)
    else:
        tables = refs
    assert pa.concat_tables(tables).equals(expected)


# -- aggregates --------------------------------------------------------------------------


def test_aggregates_match_numpy(backend):
    df = _frame(n=500, seed=3)
    ds = sf.from_pandas(df, override_num_blocks=7)
    assert ds.sum("k") == int(df.k.sum())
    assert ds.min("k") == int(df.k.min())
    assert ds.max("k") == int(df.k.max())
    assert ds.sum("x") == pytest.approx(df.x.sum())
    assert ds.mean("x") == pytest.approx(df.x.mean())
    assert ds.std("x") == pytest.approx(np.std(df.x.to_numpy(), ddof=1))
    assert ds.std("x", ddof=0) == pytest.approx(np.std(df.x.to_numpy(), ddof=0))
    assert ds.min("x") == df.x.min() and ds.max("x") == df.x.max()


def test_aggregates_after_transforms(backend):
    ds = sf.range(1000, override_num_blocks=5).map_batches(add_one).filter(sf.col("id") % 2 == 0)
    expected = np.arange(1, 1001)
    expected = expected[expected % 2 == 0]
    assert ds.sum("id") == int(expected.sum())
    assert ds.mean("id") == pytest.approx(expected.mean())


def test_aggregates_of_empty_dataset(backend):
    empty = sf.range(10).filter(sf.col("id") > 100)
    assert empty.sum("id") is None
    assert empty.min("id") is None
    assert empty.max("id") is None
    assert empty.mean("id") is None
    assert empty.std("id") is None


def test_aggregates_skip_nulls_like_pandas(backend):
    df = pd.DataFrame({"v": [1.0, None, 3.0, None, 8.0]})
    ds = sf.from_pandas(df)
    assert ds.sum("v") == df.v.sum()
    assert ds.mean("v") == pytest.approx(df.v.mean())
    assert ds.std("v") == pytest.approx(df.v.std())


def test_aggregate_on_unknown_column(backend):
    with pytest.raises(ValueError, match="nope"):
        sf.range(10).sum("nope")


# -- stats and repr ----------------------------------------------------------------------


def test_stats_mention_every_operator(backend):
    ds = (
        sf.range(200, override_num_blocks=4)
        .map_batches(add_one)
        .filter(sf.col("id") > 10)
        .limit(50)
        .map(lambda r: {"id": r["id"] * 2})
    )
    rows = ds.take_all()
    assert len(rows) == 50
    stats = ds.stats()
    for name in ("ReadRange", "MapBatches(add_one)", "Filter", "Limit[50]", "Map(<lambda>)"):
        assert name in stats
    assert "rows out" in stats
    assert "Peak bytes in flight" in stats
    assert f"backend '{backend}'" in stats
    assert ds._last_stats.rows_out == 50
    assert ds._last_stats.peak_bytes_in_flight > 0


def test_stats_before_execution():
    assert "not been executed" in sf.range(3).stats()


def test_repr(backend):
    items = sf.from_items([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    text = repr(items)
    assert text.startswith("shape: (2, 2)\n")
    assert "int64" in text and "string" in text and "(Showing 2 of 2 rows)" in text
    chained = sf.range(10).map_batches(add_one).filter(sf.col("id") > 3).limit(2)
    text = repr(chained)
    for name in ("MapBatches(add_one)", "Filter", "Limit[2]", "Dataset("):
        assert name in text
    # repr is cheap: it runs nothing
    assert chained._last_stats is None
