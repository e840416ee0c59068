"""from_dask / to_dask with Dask: rows and types against pandas, on both backends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf

dd = pytest.importorskip("dask.dataframe")
import dask


def _frame(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.arange(n, dtype=np.int64),
            "f": np.linspace(0.0, 1.0, n),
            "s": [f"s{i}" for i in range(n)],
            "b": [i % 3 == 0 for i in range(n)],
            "t": pd.date_range("2024-01-01", periods=n, freq="h", tz="UTC"),
        },
        index=np.arange(100, 100 + n),
    )


def test_from_dask_rows_and_types(backend):
    frame = _frame()
    ds = sf.from_dask(dd.from_pandas(frame, npartitions=4))
    expected = pa.Table.from_pandas(frame, preserve_index=False)
    got = ds.to_arrow()
    assert got.column_names == expected.column_names  # the index is not a column
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
    for name in ("i", "f", "b", "t"):  # strings: large_string (see from_pandas)
        assert got.schema.field(name).type == expected.schema.field(name).type, name
    assert ds.materialize().num_blocks() == 4  # one block per partition


def test_from_dask_is_computed_by_read_tasks():
    sf.init(backend="local")
    computed = []

    def note(part):
        computed.append(len(part))
        return part

    ddf = dd.from_pandas(_frame(), npartitions=3)
    ds = sf.from_dask(ddf.map_partitions(note, meta=ddf._meta))
    assert computed == []  # lazy: nothing collected when the dataset is made
    assert ds.count() == 12
    assert sorted(computed) == [4, 4, 4]


def test_to_dask_round_trip(backend):
    frame = _frame()
    ds = sf.from_pandas(frame.reset_index(drop=True)).repartition(3)
    ddf = ds.to_dask()
    assert ddf.npartitions == 3
    assert list(ddf.columns) == list(frame.columns)
    with dask.config.set(scheduler="sync"):
        whole = ddf.compute()
    expected = ds.to_pandas()
    assert list(whole.dtypes) == list(ddf.dtypes) == list(expected.dtypes)
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), expected)
    first = ddf.get_partition(0).compute(scheduler="sync")
    assert list(first.index) == list(range(len(first)))  # each partition's index from 0


def test_to_dask_of_a_plan_that_cannot_be_cut(backend):
    ds = sf.range(20, override_num_blocks=4).random_shuffle(seed=1)
    with dask.config.set(scheduler="sync"):
        ids = sorted(ds.to_dask()["id"].compute().tolist())
    assert ids == list(range(20))


def test_to_dask_meta_and_verify_meta():
    sf.init(backend="local")
    meta = pd.DataFrame({"id": pd.Series(dtype="float64")})
    ddf = sf.range(4).to_dask(meta=meta, verify_meta=False)
    assert str(ddf.dtypes["id"]) == "float64"
    with pytest.raises(TypeError, match="verify_meta"):
        sf.range(4).to_dask(verify_meta="yes")
    with pytest.raises(TypeError, match="dask.dataframe.DataFrame"):
        sf.from_dask(pd.DataFrame({"a": [1]}))


def test_dask_on_ray_persisted_partitions_stay_in_the_object_store(ray_session):
    """A frame persisted with Dask-on-Ray holds its partitions as ObjectRefs; Ray tasks
    read them, and to_dask's partitions compute in Ray tasks."""
    from ray.util.dask import ray_dask_get

    sf.init(backend="ray")
    frame = _frame()
    with dask.config.set(scheduler=ray_dask_get):
        persisted = dd.from_pandas(frame, npartitions=3).persist(ray_persist=True)
        ds = sf.from_dask(persisted)
        assert sorted(r["i"] for r in ds.take_all()) == list(range(12))
        back = ds.map_batches(lambda b: {"i": b["i"] * 2}).to_dask().compute()
    assert sorted(back["i"].tolist()) == [2 * i for i in range(12)]
