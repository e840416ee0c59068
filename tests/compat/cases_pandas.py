"""Differential cases: pandas dtypes under DataContext.enable_arrow_backed_pandas_conversion
(both positions) in to_pandas, pandas batches, map_batches and map_groups; arithmetic on
those batches; timestamp units; the dtypes of frames given to from_pandas.

Ray Data copies the current DataContext into a dataset when the dataset is created, so each
case changes the setting before it creates its datasets, and restores it afterwards.
"""

from __future__ import annotations

import contextlib
import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import case, raised_at_run


@contextlib.contextmanager
def setting(m, name, value):
    context = m.DataContext.get_current()
    previous = getattr(context, name)
    setattr(context, name, value)
    try:
        yield
    finally:
        setattr(context, name, previous)


def _table():
    return pa.table(
        {
            "i": pa.array([1, 2, 3], pa.int64()),
            "n": pa.array([1, None, 3], pa.int64()),
            "f": pa.array([0.5, None, 2.5]),
            "s": pa.array(["a", None, "c"]),
            "b": pa.array([True, False, None]),
            "t": pa.array([1, 2, None], pa.timestamp("s")),
            "d": pa.array([datetime.date(2020, 1, 1), None, datetime.date(2021, 1, 1)]),
            "l": pa.array([[1], [2, 3], None]),
        }
    )


def _dtypes(df):
    return [str(t) for t in df.dtypes]


def _seen_dtypes(batch):
    return pd.DataFrame({"dtypes": [",".join(_dtypes(batch))]})


@case(
    "Dataset.to_pandas",
    "Dataset.take_batch",
    "Dataset.iter_batches",
    "Dataset.map_batches",
    "DataContext.enable_arrow_backed_pandas_conversion",
)
def pandas_dtypes_in_both_positions(m, tmp):
    """enable_arrow_backed_pandas_conversion True and False: to_pandas, batches, map_batches"""
    out = {}
    for arrow_backed in (True, False):
        with setting(m, "enable_arrow_backed_pandas_conversion", arrow_backed):
            # List cells become arrays in NumPy-typed frames, which Ray Data's to_pandas then
            # tries to make a TensorArray (failing on nulls): a quirk left uncompared.
            table = _table() if arrow_backed else _table().drop_columns(["l"])
            ds = m.from_arrow(table)
            seen = ds.map_batches(_seen_dtypes, batch_format="pandas")
            out[arrow_backed] = [
                _dtypes(ds.to_pandas()),
                _dtypes(ds.take_batch(batch_format="pandas")),
                _dtypes(next(iter(ds.iter_batches(batch_format="pandas")))),
                seen.take_all(),
                ds.to_pandas().to_dict("list")["i"],
            ]
    return out


@case("GroupedData.map_groups", "DataContext.enable_arrow_backed_pandas_conversion")
def pandas_dtypes_of_groups(m, tmp):
    """the groups map_groups hands over by default (pandas), in both positions"""
    out = {}
    for arrow_backed in (True, False):
        with setting(m, "enable_arrow_backed_pandas_conversion", arrow_backed):
            ds = m.from_arrow(_table().select(["i", "f", "s", "t"]))
            out[arrow_backed] = sorted(
                r["dtypes"] for r in ds.groupby("i").map_groups(_seen_dtypes).take_all()
            )
    return out


def _arithmetic(batch):
    out = {}
    for name, op in (
        ("add", lambda c: c + 1),
        ("mul", lambda c: c * 2),
        ("truediv", lambda c: c / 2),
        ("floordiv", lambda c: c // 2),
        ("mod", lambda c: c % 10),
        ("pow", lambda c: c**2),
        ("lt", lambda c: c < 2),
    ):
        try:
            out[name] = [str(op(batch["id"]).dtype)]
        except Exception as exc:  # reported, not raised: which operations work is the point
            out[name] = [type(exc).__name__]
    return pd.DataFrame(out)


@case("Dataset.map_batches", "DataContext.enable_arrow_backed_pandas_conversion")
def arithmetic_on_pandas_batches(m, tmp):
    """which operators work on a pandas batch's columns, Arrow-backed or not (% is not)"""
    out = {}
    for arrow_backed in (True, False):
        with setting(m, "enable_arrow_backed_pandas_conversion", arrow_backed):
            out[arrow_backed] = m.range(4).map_batches(_arithmetic, batch_format="pandas").take(1)
    with setting(m, "enable_arrow_backed_pandas_conversion", True):
        ds = m.range(4)
        out["mod_raises"] = raised_at_run(
            m,
            lambda: ds.map_batches(
                lambda b: b.assign(m=b["id"] % 10), batch_format="pandas"
            ).take_all(),
        )
    with setting(m, "enable_arrow_backed_pandas_conversion", False):
        ds = m.range(4)
        out["mod_numpy"] = ds.map_batches(
            lambda b: b.assign(m=b["id"] % 3), batch_format="pandas"
        ).take_all()
    return out


@case("from_arrow", "Dataset.to_pandas", "Dataset.take_batch")
def timestamps_keep_their_unit_in_pandas(m, tmp):
    """timestamp[s|ms|us|ns] stay in their unit in NumPy-typed pandas batches"""
    out = {}
    for unit in ("s", "ms", "us", "ns"):
        table = pa.table({"t": pa.array([0, None], pa.timestamp(unit))})
        with setting(m, "enable_arrow_backed_pandas_conversion", False):
            ds = m.from_arrow(table)
            out[unit] = [
                _dtypes(ds.to_pandas()),
                _dtypes(ds.take_batch(batch_format="pandas")),
                str(ds.take_batch()["t"].dtype),
            ]
    return out


def _frames():
    return {
        "object_strings": pd.DataFrame({"o": pd.Series(["a", None, "c"], dtype=object)}),
        "object_bytes": pd.DataFrame({"o": pd.Series([b"a", b"b", None], dtype=object)}),
        "object_decimals_dates": pd.DataFrame(
            {
                "d": pd.Series([datetime.date(2020, 1, 1), None, datetime.date(2021, 1, 1)]),
                "l": pd.Series([[1, 2], [3], None], dtype=object),
            }
        ),
        "numpy": pd.DataFrame({"i": np.arange(3), "f": [0.5, np.nan, 1.5]}),
        "nullable": pd.DataFrame(
            {
                "i": pd.array([1, None, 3], dtype="Int64"),
                "b": pd.array([True, None, False], dtype="boolean"),
                "s": pd.array(["x", None, "z"], dtype="string"),
            }
        ),
        "time": pd.DataFrame(
            {
                "t": pd.to_datetime(["2020-01-01", "2020-01-02", None]).astype("datetime64[s]"),
                "z": pd.to_datetime(["2020-01-01", None, None])
                .astype("datetime64[ms]")
                .tz_localize("UTC"),
                "td": pd.to_timedelta([1, 2, None], unit="s"),
            }
        ),
        "category": pd.DataFrame({"c": pd.Categorical(["a", "b", "a"])}),
    }


@case("from_pandas", "Dataset.to_pandas", "Dataset.take_batch", "Dataset.take_all")
def from_pandas_keeps_the_frames_dtypes(m, tmp):
    """a frame given to from_pandas comes back with its own dtypes (object stays object)"""
    out = {}
    for name, df in _frames().items():
        for arrow_backed in (True, False):
            with setting(m, "enable_arrow_backed_pandas_conversion", arrow_backed):
                ds = m.from_pandas(df)
                out[f"{name}-{arrow_backed}"] = [
                    _dtypes(ds.to_pandas()),
                    _dtypes(ds.take_batch(batch_format="pandas")),
                    ds.take_all(),
                ]
    return out
