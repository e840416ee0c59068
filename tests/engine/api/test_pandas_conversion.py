"""DataContext.enable_arrow_backed_pandas_conversion and enable_tensor_extension_casting
reach every place blocks become DataFrames (map_batches, add_column, map_groups,
iter_batches, to_pandas), in the tasks of both backends, with pyarrow's own conversion as the
oracle; a frame given to from_pandas comes back with its dtypes."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute
import pytest

import shardflow as sf
from shardflow.extensions import TensorArray, TensorDtype

TABLE = pa.table(
    {
        "k": pa.array([0, 1, 0], pa.int64()),
        "n": pa.array([1, None, 3], pa.int64()),
        "s": pa.array(["a", None, "c"]),
        "t": pa.array([1, 2, None], pa.timestamp("ms")),
    }
)


def _expected(arrow_backed: bool, table: pa.Table = TABLE) -> list[str]:
    mapper = pd.ArrowDtype if arrow_backed else None
    return [str(t) for t in table.to_pandas(types_mapper=mapper).dtypes]


def _dtypes_seen(batch: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"seen": [",".join(str(t) for t in batch.dtypes)]})


@pytest.mark.parametrize("arrow_backed", [True, False])
def test_every_pandas_batch_follows_the_setting(backend, fresh_context, arrow_backed):
    fresh_context.enable_arrow_backed_pandas_conversion = arrow_backed
    expected = ",".join(_expected(arrow_backed))
    ds = sf.from_arrow(TABLE)
    assert ds.map_batches(_dtypes_seen, batch_format="pandas").take_all() == [{"seen": expected}]
    grouped = ds.groupby("k").map_groups(_dtypes_seen).take_all()
    groups = [TABLE.filter(pa.compute.equal(TABLE["k"], k)) for k in (0, 1)]
    assert [r["seen"] for r in grouped] == [",".join(_expected(arrow_backed, g)) for g in groups]
    added = ds.add_column("seen", lambda df: ",".join(str(t) for t in df.dtypes)).take(1)
    assert added[0]["seen"] == expected
    batch = next(iter(ds.iter_batches(batch_format="pandas")))
    assert [str(t) for t in batch.dtypes] == _expected(arrow_backed)
    assert [str(t) for t in ds.to_pandas().dtypes] == _expected(arrow_backed)


def test_the_setting_is_read_when_the_dataset_runs(fresh_context):
    ds = sf.from_arrow(TABLE).map_batches(_dtypes_seen, batch_format="pandas")
    fresh_context.enable_arrow_backed_pandas_conversion = False
    assert ds.take_all() == [{"seen": ",".join(_expected(False))}]


def test_numpy_dtypes_allow_modulo_which_arrow_backed_columns_lack(fresh_context):
    def modulo(batch: pd.DataFrame) -> pd.DataFrame:
        return batch.assign(m=batch["id"] % 3)

    with pytest.raises(NotImplementedError):
        sf.range(4).map_batches(modulo, batch_format="pandas").take_all()
    fresh_context.enable_arrow_backed_pandas_conversion = False
    got = sf.range(4).map_batches(modulo, batch_format="pandas").take_all()
    assert [r["m"] for r in got] == [i % 3 for i in range(4)]


def test_tensor_columns_as_arrays_or_tensor_arrays(backend, fresh_context):
    ds = sf.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 2, 2))

    def kind(batch: pd.DataFrame) -> pd.DataFrame:
        column = batch["data"]
        return pd.DataFrame({"dtype": [str(column.dtype)], "cell": [type(column.iloc[0]).__name__]})

    assert ds.map_batches(kind, batch_format="pandas").take_all() == [
        {"dtype": "object", "cell": "ndarray"}
    ]
    fresh_context.enable_tensor_extension_casting = False
    ds = sf.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 2, 2))
    assert ds.map_batches(kind, batch_format="pandas").take_all() == [
        {"dtype": "TensorDtype(shape=(2, 2), dtype=float32)", "cell": "TensorArrayElement"}
    ]
    frame = ds.to_pandas()
    assert isinstance(frame["data"].dtype, TensorDtype)
    np.testing.assert_array_equal(
        frame["data"].to_numpy(), np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    )


def test_a_tensor_array_column_becomes_a_tensor_column(backend):
    tensors = np.arange(24, dtype=np.int64).reshape(4, 3, 2)
    df = pd.DataFrame({"x": TensorArray(tensors), "i": range(4)})
    ds = sf.from_pandas(df)
    assert ds.schema().types[0] == pa.fixed_shape_tensor(pa.int64(), (3, 2))
    np.testing.assert_array_equal(ds.take_batch()["x"], tensors)
    doubled = ds.map_batches(
        lambda b: b.assign(x=TensorArray(b["x"].to_numpy() * 2)), batch_format="pandas"
    )
    np.testing.assert_array_equal(doubled.take_batch()["x"], tensors * 2)


def test_from_pandas_gives_the_frame_back(backend):
    frame = pd.DataFrame(
        {
            "o": pd.Series(["a", None, "c"], dtype=object),
            "i": np.arange(3),
            "n": pd.array([1, None, 3], dtype="Int64"),
            "t": pd.to_datetime(["2020-01-01", None, "2020-01-03"]).astype("datetime64[s]"),
            "d": pd.Series([datetime.date(2020, 1, 1), None, None], dtype=object),
            "c": pd.Categorical(["x", "y", "x"]),
        }
    )
    ds = sf.from_pandas(frame)
    pd.testing.assert_frame_equal(ds.to_pandas(), frame)
    pd.testing.assert_frame_equal(ds.take_batch(batch_format="pandas"), frame)
    # Other data keeps Ray Data's Arrow-backed dtypes: the frame's dtypes do not leak into
    # what a function returns.
    mapped = ds.map_batches(lambda b: b[["i"]], batch_format="pandas").to_pandas()
    assert str(mapped["i"].dtype) == "int64[pyarrow]"
