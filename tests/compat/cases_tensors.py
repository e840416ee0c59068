"""Differential cases: tensor columns through Ray Data's extension API (ray.data.extensions),
pandas batches (TensorArray), the tensor settings of DataContext, schemas and reprs.

shardflow's tensor columns are Arrow's canonical types, which is Ray Data's
``FixedShapeTensorFormat.ARROW_NATIVE``: every case selects that format on both (the default,
V2, differs on purpose: tests/compat/test_documented_differences.py).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from harness import case, submodule


@contextlib.contextmanager
def native_tensors(m, **settings):
    ext = submodule(m, "extensions")
    context = m.DataContext.get_current()
    settings = {
        "arrow_fixed_shape_tensor_format": ext.FixedShapeTensorFormat.ARROW_NATIVE,
        **settings,
    }
    previous = {name: getattr(context, name) for name in settings}
    for name, value in settings.items():
        setattr(context, name, value)
    try:
        yield ext
    finally:
        for name, value in previous.items():
            setattr(context, name, value)


@case(
    "extensions.TensorArray",
    "extensions.TensorDtype",
    "extensions.TensorArrayElement",
    "Dataset.map_batches",
    "DataContext.enable_tensor_extension_casting",
)
def tensor_columns_in_pandas_batches(m, tmp):
    """tensor columns in pandas batches: arrays of objects, or TensorArray without casting
    (compared with Ray Data's default tensor format, where the setting applies)"""
    out = {}
    context = m.DataContext.get_current()
    for casting in (True, False):
        context.enable_tensor_extension_casting = casting
        try:
            ds = m.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 2, 2))

            def kind(batch):
                column = batch["data"]
                return pd.DataFrame(
                    {"dtype": [str(column.dtype)], "cell": [type(column.iloc[0]).__name__]}
                )

            out[casting] = [
                ds.map_batches(kind, batch_format="pandas").take_all(),
                [str(t) for t in ds.to_pandas().dtypes],
            ]
        finally:
            context.enable_tensor_extension_casting = True
    return out


@case(
    "extensions.TensorArray",
    "extensions.ArrowTensorArray",
    "extensions.ArrowTensorType",
    "extensions.ArrowVariableShapedTensorType",
    "from_pandas",
    "Dataset.schema",
)
def tensor_arrays_from_pandas_and_numpy(m, tmp):
    """TensorArray columns of frames, ArrowTensorArray.from_numpy, fixed and ragged"""
    with native_tensors(m) as ext:
        tensors = np.arange(24, dtype=np.int64).reshape(4, 3, 2)
        frame = pd.DataFrame({"x": ext.TensorArray(tensors), "i": range(4)})
        ds = m.from_pandas(frame)
        fixed = ext.ArrowTensorArray.from_numpy(tensors)
        ragged = m.from_items([{"r": np.ones(2)}, {"r": np.zeros(3)}])
        doubled = ds.map_batches(
            lambda b: b.assign(x=ext.TensorArray(np.asarray(b["x"].tolist()) * 2)),
            batch_format="pandas",
        )
        return [
            str(frame.dtypes["x"]),
            ds.take_batch()["x"],
            doubled.take_batch()["x"],
            doubled.schema(),
            str(fixed.type),
            isinstance(fixed.type, ext.get_arrow_extension_tensor_types()),
            len(fixed),
            [r["r"].shape for r in ragged.take_all()],
            ext.column_needs_tensor_extension(pd.Series([np.zeros(2)])),
        ]


@case("range_tensor", "from_numpy", "from_items", "Dataset.schema", "Dataset.__repr__")
def tensor_schemas_and_reprs(m, tmp):
    """schemas and reprs of tensor columns show their shape and element type"""
    with native_tensors(m):
        datasets = [
            m.range_tensor(4, shape=(2, 2)),
            m.from_numpy(np.zeros((3, 2, 5), dtype=np.float32)),
            m.from_items([{"x": np.ones((2, 3)), "i": 1}]),
        ]
        return [
            (ds.schema(), str(ds.schema()), repr(ds.materialize()).splitlines()[:4])
            for ds in datasets
        ]


@case("read_parquet", "Dataset.write_parquet", slow=True)
def tensor_column_schema_of_parquet_reads(m, tmp):
    """read_parquet(tensor_column_schema=...) decodes raw tensor bytes; tensors round-trip"""
    with native_tensors(m):
        values = [np.full((2, 3), i, dtype=np.float32) for i in range(4)]
        pq.write_table(
            pa.table({"x": [v.tobytes() for v in values], "i": range(4)}), tmp / "raw.parquet"
        )
        ds = m.read_parquet(
            str(tmp / "raw.parquet"), tensor_column_schema={"x": (np.float32, (2, 3))}
        )
        m.from_numpy(np.stack(values)).write_parquet(str(tmp / "out"))
        back = m.read_parquet(str(tmp / "out"))
        return [ds.take_batch()["x"], ds.schema(), back.schema(), back.take_batch()["data"]]
