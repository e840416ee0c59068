"""Differential cases: value types through rows, batches and files."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import case


class Payload:
    """A plain Python object with no Arrow type (module level, so workers can unpickle it)."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Payload({self.value})"


def _ts_table(unit):
    value = np.datetime64("2024-01-01T12:00:00.123456789", unit)
    return pa.table({"t": pa.array([value], pa.timestamp(unit))})


@case("from_arrow", "Dataset.map", "Dataset.take_batch", "Dataset.schema", "Dataset.write_parquet")
def timestamps_keep_their_unit(m, tmp):
    """s/ms/us/ns timestamps keep their unit through rows (map), batches and Parquet"""
    out = {}
    for unit in ("s", "ms", "us", "ns"):
        ds = m.from_arrow(_ts_table(unit))
        mapped = ds.map(lambda r: r)
        ds.write_parquet(tmp / unit, mode="append")
        out[unit] = [
            ds.take_batch()["t"].dtype,
            mapped.schema(),
            mapped.take_batch()["t"].dtype,
            m.read_parquet(tmp / unit).schema(),
        ]
    out["inferred"] = (
        m.range(1)
        .map(lambda r: {"t": datetime.datetime(2024, 1, 1, 0, 0, 0, 5000)})
        .take_batch()["t"]
        .dtype
    )
    return out


@case("from_items", "Dataset.map", "Dataset.take_all", "Dataset.take_batch")
def python_objects_in_rows(m, tmp):
    """objects without an Arrow type survive from_items and map"""
    ds = m.from_items([{"o": Payload(1)}, {"o": Payload(2)}])
    mapped = m.range(2).map(lambda r: {"o": Payload(r["id"])})
    return [
        ds.take_all(),
        list(ds.take_batch()["o"]),
        mapped.take_all(),
        ds.to_pandas()["o"].tolist(),
    ]


@case("Dataset.to_pandas", "Dataset.take_batch", "Dataset.iter_batches", "Dataset.map_batches")
def pandas_dtypes(m, tmp):
    """pandas batches use Arrow-backed dtypes (all-null and tensor columns stay object)"""
    items = [{"i": 1, "f": 1.5, "s": "a", "b": True, "n": None, "l": [1, 2]}]
    ds = m.from_items(items)
    seen = ds.map_batches(lambda df: df.assign(kind=str(df["i"].dtype)), batch_format="pandas")
    return [
        ds.to_pandas(),
        ds.take_batch(batch_format="pandas"),
        next(iter(ds.iter_batches(batch_format="pandas"))),
        m.from_numpy(np.zeros((2, 2, 2))).to_pandas().dtypes.tolist(),
        seen.take_all()[0]["kind"],
    ]


@case("Dataset.iter_batches", "Dataset.take_batch", "Dataset.map_batches")
def batch_format_none_is_native(m, tmp):
    """batch_format=None gives the block itself: an Arrow table, or a DataFrame for frames"""
    ds = m.range(3)
    names = ds.map_batches(
        lambda b: {"t": np.array([type(b).__name__] * len(b))}, batch_format=None
    )
    frame = m.from_pandas(pd.DataFrame({"a": [1, 2], "o": pd.Series(["x", None], dtype=object)}))
    seen = frame.map_batches(
        lambda b: {"t": np.array([type(b).__name__] * len(b))}, batch_format=None
    )
    return [
        type(next(iter(ds.iter_batches(batch_format=None)))),
        type(ds.take_batch(batch_format=None)),
        names.take(1),
        # data from pandas frames: a DataFrame (Ray Data keeps them as pandas blocks)
        next(iter(frame.iter_batches(batch_format=None))),
        type(frame.take_batch(batch_format=None)),
        seen.take(1),
    ]


@case("from_items", "from_numpy", "from_blocks", "from_arrow", "from_pandas")
def in_memory_sources(m, tmp):
    """from_items of an ndarray, from_numpy, from_blocks, from_arrow, from_pandas"""
    return [
        m.from_items(np.arange(3)).take_all(),
        m.from_items(np.arange(4).reshape(2, 2)).take_all(),
        m.from_numpy(np.arange(3)).take_all(),
        m.from_numpy(np.ones((2, 2))).take_batch()["data"],
        m.from_blocks([pa.table({"a": [1]}), pd.DataFrame({"a": [2]})]).take_all(),
        m.from_arrow(pa.table({"a": [1, 2]})).take_all(),
        m.from_pandas(pd.DataFrame({"a": [1, 2], "s": ["x", "y"]})).take_all(),
        m.from_items([1, 2]).schema(),
    ]


@case("from_items", "Dataset.map_batches")
def tensors(m, tmp):
    """fixed-shape tensor columns from rows and batches"""
    ds = m.from_items([{"x": np.ones((2, 3))}, {"x": np.zeros((2, 3))}])
    doubled = ds.map_batches(lambda b: {"x": b["x"] * 2})
    return [ds.take_batch()["x"], doubled.take_batch()["x"].shape, len(ds.take_all())]
