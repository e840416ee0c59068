"""random(), unnest() and Python object columns on both backends, against NumPy, pyarrow and
pandas oracles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.expressions import col, random, udf, unnest
from shardflow.extensions import PythonObjectArray
from shardflow.sdk.datatype import DataType


class Box:
    """An object Arrow has no type for."""

    def __init__(self, value):
        self.value = value


def _pair(a, b):
    return pa.StructArray.from_arrays(
        [pa.compute.add(a, b).combine_chunks(), pa.compute.subtract(a, b).combine_chunks()],
        names=["plus", "minus"],
    )


def test_seeded_random_draws_per_task_and_execution(backend):
    ds = sf.range(8, override_num_blocks=2).with_column("r", random(seed=4))
    first, second = ([r["r"] for r in ds.take_all()] for _ in range(2))
    # one task per block, each drawing default_rng([block, task, execution, seed])
    expected = [
        list(np.random.default_rng([0, task, execution, 4]).random(4))
        for execution in (0, 1)
        for task in (0, 1)
    ]
    assert first == expected[0] + expected[1]
    assert second == expected[2] + expected[3]
    fixed = sf.range(8, override_num_blocks=2).with_column(
        "r", random(seed=4, reseed_after_execution=False)
    )
    assert [r["r"] for r in fixed.take_all()] == first
    kept = fixed.filter(expr=col("r") < 0.5).take_all()
    assert [r["r"] for r in kept] == [v for v in first if v < 0.5]


def test_unnest_expands_struct_columns_and_udfs(backend):
    pair = udf(
        return_dtype=DataType.struct([("plus", DataType.int64()), ("minus", DataType.int64())])
    )(_pair)
    ds = sf.from_items([{"a": i, "b": 2 * i, "s": {"u": i, "v": str(i)}} for i in range(5)])
    out = ds.with_columns(unnest(col("s")), unnest(pair(col("a"), col("b")))).to_pandas()
    frame = pd.DataFrame({"a": range(5), "b": range(0, 10, 2)})
    assert list(out.columns) == ["a", "b", "s", "u", "v", "plus", "minus"]
    assert out["u"].tolist() == frame["a"].tolist()
    assert out["v"].tolist() == [str(i) for i in range(5)]
    assert out["plus"].tolist() == (frame["a"] + frame["b"]).tolist()
    assert out["minus"].tolist() == (frame["a"] - frame["b"]).tolist()
    with pytest.raises(ValueError, match="known when the plan is built"):
        ds.map_batches(lambda b: b).with_columns(unnest(col("s")))


def test_object_columns_are_python_object_arrays_in_pandas(backend):
    ds = sf.range(4, override_num_blocks=2).map(lambda r: {"box": Box(r["id"])})
    frame = ds.to_pandas()
    assert str(frame["box"].dtype) == "python_object()"
    assert isinstance(frame["box"].array, PythonObjectArray)
    assert [b.value for b in frame["box"]] == [0, 1, 2, 3]

    def rebox(batch):
        assert str(batch["box"].dtype) == "python_object()"
        values = [b.value * 10 for b in batch["box"]]
        return pd.DataFrame({"box": PythonObjectArray([Box(v) for v in values])})

    again = ds.map_batches(rebox, batch_format="pandas").take_all()
    assert [r["box"].value for r in again] == [0, 10, 20, 30]
