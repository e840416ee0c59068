"""How partitions are stored in blocks: DataFrames as Arrow when that is exact, else pickled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shardflow.engine.xshards.encoding import (
    ARRAYS,
    DATAFRAME,
    FRAME,
    NUMBER,
    OBJECTS,
    decode,
    encode,
    info_of,
)


def _roundtrip(df):
    block = encode([df])
    (back,) = decode(block)
    pd.testing.assert_frame_equal(back, df, check_index_type=True, check_column_type=True)
    return info_of(block).kind


ARROW_EXACT = {
    "ints": pd.DataFrame({"a": [1, 2, 3], "b": np.array([1, 2, 3], dtype=np.uint8)}),
    "floats": pd.DataFrame({"a": [1.5, np.nan, 3.0], "b": np.array([1, 2, 3], dtype=np.float32)}),
    "strings": pd.DataFrame({"s": ["x", None, "z"]}),
    "arrow_strings": pd.DataFrame({"s": pd.array(["x", None], dtype="string[pyarrow]")}),
    "dates": pd.DataFrame({"d": pd.to_datetime(["2020-01-01", "2021-06-01", "2022-12-31"])}),
    "tz": pd.DataFrame(
        {"d": pd.to_datetime(["2020-01-01", "2021-06-01", "2022-12-31"]).tz_localize("UTC")}
    ),
    "categorical": pd.DataFrame({"c": pd.Categorical(["a", "b", "a"])}),
    "nullable": pd.DataFrame(
        {
            "i": pd.array([1, None, 3], dtype="Int64"),
            "b": pd.array([True, None, False], dtype="boolean"),
        }
    ),
    "timedelta": pd.DataFrame({"t": pd.to_timedelta([1, 2, 3], unit="s")}),
    "named_index": pd.DataFrame({"a": [1, 2, 3]}, index=pd.Index([10, 5, 7], name="key")),
    "string_index": pd.DataFrame({"a": [1, 2, 3]}, index=["x", "y", "z"]),
    "multi_index": pd.DataFrame(
        {"a": [1, 2]}, index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")])
    ),
    "no_rows": pd.DataFrame({"a": pd.Series([], dtype="int64")}),
    "period": pd.DataFrame({"p": pd.period_range("2020-01", periods=3, freq="M")}),
    "interval": pd.DataFrame({"i": pd.interval_range(0, 3)}),
}

PICKLED = {
    "object_strings": pd.DataFrame({"s": pd.Series(["x", "y"], dtype=object)}),
    "mixed_objects": pd.DataFrame({"s": pd.Series(["x", 1], dtype=object)}),
    "lists": pd.DataFrame({"l": pd.Series([[1], [2, 3]], dtype=object)}),
    "int_column_names": pd.DataFrame({0: [1, 2], 1: [3, 4]}),
    "duplicate_columns": pd.DataFrame([[1, 2]], columns=["a", "a"]),
    "multi_columns": pd.DataFrame(
        [[1, 2]], columns=pd.MultiIndex.from_tuples([("a", "b"), ("a", "c")])
    ),
    "shifted_range_index": pd.DataFrame({"a": [1, 2]}, index=pd.RangeIndex(5, 7)),
    "complex": pd.DataFrame({"c": np.array([1j, 2])}),
    "python_strings": pd.DataFrame({"s": pd.array(["a", None], dtype="string[python]")}),
    "no_columns": pd.DataFrame(index=range(3)),
}


@pytest.mark.parametrize("name", sorted(ARROW_EXACT))
def test_dataframes_that_arrow_keeps_exactly_are_stored_as_arrow(name):
    assert _roundtrip(ARROW_EXACT[name]) == FRAME


@pytest.mark.parametrize("name", sorted(PICKLED))
def test_dataframes_that_arrow_would_change_are_pickled(name):
    assert _roundtrip(PICKLED[name]) == OBJECTS


def test_attrs_survive_by_pickling():
    df = pd.DataFrame({"a": [1]})
    df.attrs["source"] = "x"
    (back,) = decode(encode([df]))
    assert back.attrs == {"source": "x"}


def test_objects_of_any_kind_and_their_facts():
    elements = [
        {"x": np.arange(6).reshape(3, 2), "y": np.arange(3)},
        (np.ones(2), 1),
        [1, 2, 3, 4],
        None,
        7,
    ]
    block = encode(elements)
    info = info_of(block)
    assert info.kind == OBJECTS and info.count == 5
    assert info.types == [
        "builtins.dict",
        "builtins.tuple",
        "builtins.list",
        "builtins.NoneType",
        NUMBER,
    ]
    assert info.lens == [3, None, 4, None, None]
    assert info.seqs == [None, 2, 4, None, None]
    back = decode(block)
    np.testing.assert_array_equal(back[0]["x"], elements[0]["x"])
    assert back[1][1] == 1 and back[2] == [1, 2, 3, 4] and back[3] is None and back[4] == 7


def test_a_dataset_block_is_one_dataframe():
    table = pa.table({"a": [1, 2], "b": ["x", "y"]})
    info = info_of(table)
    assert info.types == [DATAFRAME] and info.lens == [2]
    (df,) = decode(table)
    assert df["a"].tolist() == [1, 2] and df["b"].tolist() == ["x", "y"]


def test_dataframe_blocks_share_memory_with_the_dataframe_columns():
    df = pd.DataFrame({"a": np.arange(1000, dtype=np.int64)})
    block = encode([df])
    assert info_of(block).kind == FRAME
    buffer = block.column("a").chunk(0).buffers()[1]
    assert buffer.address == df["a"].to_numpy().__array_interface__["data"][0]


def test_empty_partition():
    block = encode([])
    assert info_of(block).count == 0 and decode(block) == []


def test_dicts_of_numeric_arrays_are_stored_as_columns_without_copy():
    x = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    y = np.arange(6, dtype=np.int64)
    block = encode([{"x": x, "y": y}])
    assert info_of(block).kind == ARRAYS and info_of(block).lens == [6]
    assert block.column("y").chunk(0).buffers()[1].address == y.__array_interface__["data"][0]
    (back,) = decode(block)
    assert list(back) == ["x", "y"]
    for got, want in ((back["x"], x), (back["y"], y)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert got.flags.writeable  # a shard's arrays may be changed in place
    back["y"] += 1
    np.testing.assert_array_equal(y, np.arange(6))  # the stored data is not


@pytest.mark.parametrize(
    "value",
    [
        {"b": np.array([True, False])},
        {1: np.arange(2)},
        {"x": np.arange(2), "y": np.arange(3)},
        {"s": np.array(["a", "b"])},
        {"x": np.arange(2), "n": 3},
        {"x": np.zeros((0, 2))},
    ],
)
def test_other_dicts_are_pickled(value):
    block = encode([value])
    assert info_of(block).kind == OBJECTS
    (back,) = decode(block)
    assert list(back) == list(value)


def test_dataset_blocks_with_tensor_and_object_columns():
    from shardflow.sdk.block import numpy_batch_to_block
    from shardflow.sdk.object_column import objects_to_arrow

    table = numpy_batch_to_block({"t": np.arange(8.0).reshape(2, 2, 2), "n": np.arange(2)})
    table = table.append_column("o", objects_to_arrow([{1}, {2}]))
    (df,) = decode(table)
    assert list(df.columns) == ["t", "n", "o"]
    np.testing.assert_array_equal(df["t"][1], np.arange(4.0, 8.0).reshape(2, 2))
    assert df["n"].tolist() == [0, 1] and df["o"].tolist() == [{1}, {2}]
