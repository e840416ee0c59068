"""Differential cases: columns of arbitrary Python objects in pandas
(``extensions.PythonObjectArray`` / ``PythonObjectDtype``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import Raised, case, exception_kind, submodule


class Point:
    """An object Arrow has no type for (module level, so workers unpickle it)."""

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Point) and other.x == self.x

    def __repr__(self):
        return f"Point({self.x})"


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _dtypes(df):
    return {name: str(dtype) for name, dtype in df.dtypes.items()}


def _describe(series):
    return [str(series.dtype), type(series.array).__name__, series.tolist()]


@case(
    "extensions.PythonObjectArray",
    "extensions.PythonObjectDtype",
    note="object columns as python_object() columns of pandas",
)
def object_columns_in_pandas(m, tmp):
    """from_items with objects gives python_object() columns in to_pandas, pandas batches and
    iter_batches; NumPy batches give object arrays; a PythonObjectArray or an object column
    returned by map_batches becomes an object column again; a frame given to from_pandas
    keeps its own object dtype"""
    ext = submodule(m, "extensions")
    ds = m.from_items([{"a": 1, "o": Point(1)}, {"a": 2, "o": Point(2)}], override_num_blocks=1)
    frame = ds.to_pandas()

    def describe_batch(batch):
        return pd.DataFrame({"d": [str(batch["o"].dtype)] * len(batch), "o": batch["o"]})

    made = m.range(3).map_batches(
        lambda b: pd.DataFrame({"o": ext.PythonObjectArray([Point(int(i)) for i in b["id"]])}),
        batch_format="pandas",
    )
    plain = m.range(2).map_batches(
        lambda b: pd.DataFrame({"o": [Point(int(i)) for i in b["id"]]}), batch_format="pandas"
    )
    given = m.from_pandas(pd.DataFrame({"o": ext.PythonObjectArray([Point(5), Point(6)])}))
    as_object = m.from_pandas(pd.DataFrame({"o": [Point(7), Point(8)], "a": [1, 2]}))
    return [
        _dtypes(frame),
        _describe(frame["o"]),
        ds.map_batches(describe_batch, batch_format="pandas").take_all(),
        ds.map_batches(
            lambda b: {"d": np.array([str(b["o"].dtype)] * len(b["o"]))}, batch_format="numpy"
        ).take_all(),
        [_dtypes(b) for b in ds.iter_batches(batch_format="pandas")],
        _describe(made.to_pandas()["o"]),
        _describe(plain.to_pandas()["o"]),
        _describe(given.to_pandas()["o"]),
        # a frame's object column comes back as given; what a map makes is python_object()
        _dtypes(as_object.to_pandas()),
        _dtypes(as_object.map_batches(lambda b: b, batch_format="pandas").to_pandas()),
        _describe(m.from_numpy(np.array([Point(1), Point(2)], dtype=object)).to_pandas()["data"]),
    ]


@case("extensions.PythonObjectArray", "extensions.PythonObjectDtype", note="the pandas types")
def python_object_array_api(m, tmp):
    """the array and dtype as pandas extension types: construction, dtype by name, missing
    values, take, copy, concat, comparison, NumPy conversion"""
    ext = submodule(m, "extensions")
    PythonObjectArray, PythonObjectDtype = ext.PythonObjectArray, ext.PythonObjectDtype
    array = PythonObjectArray([Point(1), None, Point(3)])
    series = pd.Series(array)
    return [
        [len(array), str(array.dtype), array.dtype.name, array.nbytes],
        array.isna().tolist(),
        [array[0], array[1], list(array[0:2])],
        _describe(series),
        str(pd.api.types.pandas_dtype("python_object()")),
        _raises(lambda: PythonObjectDtype.construct_from_string("object")),
        [
            PythonObjectDtype() == PythonObjectDtype(),
            PythonObjectDtype() == "python_object()",
            PythonObjectDtype().type.__name__,
            PythonObjectDtype.construct_array_type().__name__,
        ],
        array.take([2, 0]).to_numpy().tolist(),
        _describe(pd.Series(array.take([0, -1], allow_fill=True))),
        array.copy().to_numpy().tolist(),
        pd.concat([series, pd.Series(PythonObjectArray([Point(9)]))]).tolist(),
        (array == PythonObjectArray([Point(1), None, Point(4)])).tolist(),
        array.to_numpy(na_value=0).tolist(),
        PythonObjectDtype().__from_arrow__(pa.array([1, 2])).to_numpy().tolist(),
        series.isna().tolist(),
    ]
