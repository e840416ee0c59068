"""PythonObjectArray keeps pandas' extension-array contract: operations that index a column
(reindex, align, combine_first, boolean masks) work as on a NumPy object column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from shardflow.sdk.object_pandas import PythonObjectArray


def test_indexing_gives_arrays_of_the_same_type():
    objects = [{"k": 1}, 5, "x", None]
    array = PythonObjectArray(objects)
    assert array[0] == {"k": 1} and array[3] is None
    for item in (slice(1, 3), [0, 2], np.array([True, False, True, False])):
        part = array[item]
        assert isinstance(part, PythonObjectArray)
        assert list(part) == list(np.asarray(objects, dtype=object)[item])


def test_frame_operations_match_a_numpy_object_column():
    objects = [{"w": "a"}, 200, 31.5]

    def frame(values):
        df = pd.DataFrame({"statistic": ["count", "max", "mean"]})
        df.insert(1, "w", values)
        return df.set_index("statistic")

    as_numpy = np.empty(3, dtype=object)
    as_numpy[:] = objects
    other = pd.DataFrame({"v": [1.0, 2.0]}, index=pd.Index(["min", "max"], name="statistic"))
    ours = frame(PythonObjectArray(objects)).combine_first(other)
    oracle = frame(as_numpy).combine_first(other)
    assert ours.index.tolist() == oracle.index.tolist()
    pd.testing.assert_series_equal(ours["v"], oracle["v"])

    def cells(column):
        return [None if not isinstance(x, dict) and pd.isna(x) else x for x in column]

    assert cells(ours["w"]) == cells(oracle["w"])
    assert frame(PythonObjectArray(objects)).reindex(["mean", "nope"])["w"].tolist()[0] == 31.5
