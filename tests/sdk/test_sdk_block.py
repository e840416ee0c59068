"""Blocks, BlockMetadata and the batch formats, checked against pyarrow/pandas/numpy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shardflow.sdk.block import (
    BATCH_FORMATS,
    BlockMetadata,
    block_to_batch,
    block_to_rows,
    concat_blocks,
    rows_to_block,
    to_block,
    validate_batch_format,
)


def _ragged(shapes, dtype=np.float64):
    """An object array of arrays with the given shapes, filled with distinct values."""
    out = np.empty(len(shapes), dtype=object)
    start = 0
    for i, shape in enumerate(shapes):
        size = int(np.prod(shape))
        out[i] = np.arange(start, start + size, dtype=dtype).reshape(shape)
        start += size
    return out


def _assert_ragged_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert a.dtype == e.dtype
        np.testing.assert_array_equal(a, e)


# -- BlockMetadata ---------------------------------------------------------------------


def test_block_metadata_fields_and_defaults():
    meta = BlockMetadata(num_rows=3, size_bytes=24)
    assert (meta.num_rows, meta.size_bytes) == (3, 24)
    assert meta.exec_stats is None
    assert meta.input_files is None
    assert BlockMetadata(num_rows=None, size_bytes=None).num_rows is None


def test_block_metadata_ray_style_keywords():
    meta = BlockMetadata(num_rows=5, size_bytes=40, input_files=["a.parquet"], exec_stats=None)
    assert meta.input_files == ["a.parquet"]
    # positional order is num_rows, size_bytes, exec_stats, input_files (as in Ray Data)
    assert BlockMetadata(1, 2, "stats", ["f"]) == BlockMetadata(
        num_rows=1, size_bytes=2, exec_stats="stats", input_files=["f"]
    )


def test_block_metadata_of_measures_block():
    table = pa.table({"x": np.arange(10, dtype=np.int64), "s": [str(i) for i in range(10)]})
    meta = BlockMetadata.of(table, input_files=["x.csv"])
    assert meta.num_rows == 10
    assert meta.size_bytes == table.nbytes
    assert meta.input_files == ["x.csv"]


# -- plain columns ---------------------------------------------------------------------


def test_numpy_batch_to_table_and_back():
    batch = {
        "i": np.arange(5, dtype=np.int32),
        "f": np.linspace(0, 1, 5),
        "b": np.array([True, False, True, True, False]),
        "s": np.array(["a", "bb", "c", "dd", "e"]),
    }
    table = to_block(batch)
    expected = pa.table(
        {
            "i": pa.array(batch["i"]),
            "f": pa.array(batch["f"]),
            "b": pa.array(batch["b"]),
            "s": pa.array(batch["s"].tolist(), type=pa.string()),
        }
    )
    assert table.equals(expected)
    back = block_to_batch(table, "numpy")
    assert list(back) == ["i", "f", "b", "s"]
    for name in ("i", "f", "b"):
        np.testing.assert_array_equal(back[name], batch[name])
        assert back[name].dtype == batch[name].dtype
    assert back["s"].tolist() == batch["s"].tolist()


def test_lists_in_numpy_batch_become_columns():
    table = to_block({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    assert table.to_pydict() == {"x": [1, 2, 3], "y": ["a", "b", "c"]}


def test_table_to_pandas_and_back():
    df = pd.DataFrame({"a": np.arange(6), "b": np.arange(6) * 0.5, "c": list("abcdef")})
    table = to_block(df)
    assert table.num_rows == 6
    assert table.column_names == ["a", "b", "c"]
    pd.testing.assert_frame_equal(block_to_batch(table, "pandas"), df, check_dtype=False)
    pd.testing.assert_frame_equal(table.to_pandas(), df, check_dtype=False)
    assert block_to_batch(table, "pyarrow") is table


def test_pandas_with_nulls_matches_pyarrow():
    df = pd.DataFrame({"x": [1.0, None, 3.0], "s": ["a", None, "c"]})
    table = to_block(df)
    assert table.column("x").to_pylist() == [1.0, None, 3.0]
    assert table.column("s").to_pylist() == ["a", None, "c"]


def test_batch_format_none_is_the_native_block():
    block = pa.table({"x": [1, 2]})
    assert validate_batch_format(None) == "pyarrow" and block_to_batch(block, None) is block


@pytest.mark.parametrize("fmt", ["default", "numpy"])
def test_default_batch_format_is_numpy(fmt):
    assert validate_batch_format(fmt) == "numpy"
    batch = block_to_batch(pa.table({"x": [1, 2]}), fmt)
    assert isinstance(batch, dict)
    np.testing.assert_array_equal(batch["x"], [1, 2])


def test_batch_formats_constant():
    assert set(BATCH_FORMATS) == {"numpy", "pandas", "pyarrow"}


def test_unknown_batch_format_raises():
    with pytest.raises(ValueError, match="batch_format"):
        block_to_batch(pa.table({"x": [1]}), "polars")


def test_to_block_rejects_unknown_types():
    with pytest.raises(TypeError, match="pyarrow.Table"):
        to_block([1, 2, 3])


def test_record_batch_becomes_table():
    rb = pa.record_batch({"x": [1, 2]})
    assert to_block(rb).equals(pa.Table.from_batches([rb]))


# -- fixed-shape tensors ---------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 3), (4, 2, 3), (3, 2, 2, 2)])
def test_multidim_numpy_becomes_fixed_shape_tensor(shape):
    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    table = to_block({"t": values, "id": np.arange(shape[0])})
    column_type = table.column("t").type
    assert isinstance(column_type, pa.FixedShapeTensorType)
    assert column_type.extension_name == "arrow.fixed_shape_tensor"
    assert tuple(column_type.shape) == shape[1:]
    assert column_type.value_type == pa.float32()
    back = block_to_batch(table, "numpy")["t"]
    assert back.shape == shape and back.dtype == np.float32
    np.testing.assert_array_equal(back, values)


def test_fixed_shape_tensor_to_pandas_and_back():
    values = np.arange(24, dtype=np.int64).reshape(4, 2, 3)
    table = to_block({"t": values})
    df = block_to_batch(table, "pandas")
    assert len(df) == 4
    for i in range(4):
        assert isinstance(df["t"].iloc[i], np.ndarray)
        assert df["t"].iloc[i].shape == (2, 3)
        np.testing.assert_array_equal(df["t"].iloc[i], values[i])
    again = to_block(df)
    assert again.column("t").type == table.column("t").type
    np.testing.assert_array_equal(block_to_batch(again, "numpy")["t"], values)


def test_pandas_column_of_equal_arrays_becomes_fixed_shape_tensor():
    cells = np.empty(3, dtype=object)
    cells[:] = [np.full((2, 2), i, dtype=np.int16) for i in range(3)]
    table = to_block(pd.DataFrame({"img": cells}))
    assert isinstance(table.column("img").type, pa.FixedShapeTensorType)
    np.testing.assert_array_equal(block_to_batch(table, "numpy")["img"], np.stack(list(cells)))


def test_fixed_shape_tensor_is_readable_by_pyarrow_parquet(tmp_path):
    values = np.arange(12, dtype=np.float64).reshape(2, 2, 3)
    table = to_block({"t": values})
    pq.write_table(table, tmp_path / "t.parquet")
    read = pq.read_table(tmp_path / "t.parquet")
    assert read.column("t").type == table.column("t").type
    np.testing.assert_array_equal(read.column("t").chunk(0).to_numpy_ndarray(), values)


def test_tensor_column_over_several_chunks():
    values = np.arange(24).reshape(6, 2, 2)
    combined = concat_blocks([to_block({"t": values[:2]}), to_block({"t": values[2:]})])
    assert combined.num_rows == 6
    np.testing.assert_array_equal(block_to_batch(combined, "numpy")["t"], values)


def test_tensor_rows_are_ndarrays():
    values = np.arange(12).reshape(3, 2, 2)
    rows = block_to_rows(to_block({"id": np.arange(3), "t": values}))
    assert [r["id"] for r in rows] == [0, 1, 2]
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row["t"], values[i])


def test_rows_with_arrays_become_tensor_block():
    rows = [{"id": i, "v": np.full((2, 3), i, dtype=np.float32)} for i in range(4)]
    table = rows_to_block(rows)
    assert isinstance(table.column("v").type, pa.FixedShapeTensorType)
    np.testing.assert_array_equal(
        block_to_batch(table, "numpy")["v"], np.stack([r["v"] for r in rows])
    )


# -- variable-shape (ragged) tensors ---------------------------------------------------

RAGGED_SHAPES = [(2, 2), (3, 2), (1, 4), (0, 3)]


def _is_variable_tensor(arrow_type):
    return getattr(arrow_type, "extension_name", None) == "arrow.variable_shape_tensor"


def test_ragged_numpy_becomes_variable_shape_tensor_and_back():
    values = _ragged(RAGGED_SHAPES)
    table = to_block({"r": values})
    assert _is_variable_tensor(table.column("r").type)
    back = block_to_batch(table, "numpy")["r"]
    assert back.dtype == object
    _assert_ragged_equal(back, values)


def test_ragged_list_of_arrays_becomes_variable_shape_tensor():
    values = list(_ragged([(2,), (5,), (3,)], dtype=np.int32))
    table = to_block({"r": values})
    assert _is_variable_tensor(table.column("r").type)
    _assert_ragged_equal(block_to_batch(table, "numpy")["r"], values)


def test_ragged_tensor_to_pandas_and_back():
    values = _ragged(RAGGED_SHAPES)
    df = block_to_batch(to_block({"id": np.arange(4), "r": values}), "pandas")
    assert df["id"].tolist() == [0, 1, 2, 3]
    _assert_ragged_equal(list(df["r"]), values)
    again = to_block(df)
    assert _is_variable_tensor(again.column("r").type)
    _assert_ragged_equal(block_to_batch(again, "numpy")["r"], values)


def test_ragged_tensor_rows_and_chunks():
    values = _ragged(RAGGED_SHAPES)
    table = to_block({"r": values})
    _assert_ragged_equal([row["r"] for row in block_to_rows(table)], values)
    combined = concat_blocks([table, table])
    _assert_ragged_equal(block_to_batch(combined, "numpy")["r"], list(values) + list(values))


def test_ragged_tensor_survives_pickle():
    import pickle

    import cloudpickle

    table = to_block({"r": _ragged(RAGGED_SHAPES)})
    for dumps in (pickle.dumps, cloudpickle.dumps):
        again = pickle.loads(dumps(table))
        assert again.equals(table)


def test_ragged_tensor_is_readable_by_pyarrow_parquet(tmp_path):
    values = _ragged(RAGGED_SHAPES)
    table = to_block({"r": values})
    pq.write_table(table, tmp_path / "r.parquet")
    read = pq.read_table(tmp_path / "r.parquet")
    assert read.column("r").type == table.column("r").type
    _assert_ragged_equal(block_to_batch(read, "numpy")["r"], values)


def test_ragged_tensor_with_mixed_ndim_raises():
    values = np.empty(2, dtype=object)
    values[:] = [np.zeros((2, 2)), np.zeros(3)]
    with pytest.raises(ValueError, match="ragged"):
        to_block({"r": values})


# -- rows ------------------------------------------------------------------------------


def test_rows_round_trip_matches_pyarrow():
    rows = [{"a": 1, "b": "x"}, {"a": 2, "b": None}, {"a": 3, "b": "z"}]
    table = rows_to_block(rows)
    assert table.equals(pa.Table.from_pylist(rows))
    assert block_to_rows(table) == rows


def test_rows_must_be_dicts():
    with pytest.raises(TypeError, match="dict"):
        rows_to_block([1, 2])


def test_concat_blocks_unifies_missing_columns():
    merged = concat_blocks([pa.table({"a": [1]}), pa.table({"a": [2], "b": ["x"]})])
    assert merged.to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    assert concat_blocks([]).num_rows == 0


def test_rows_with_arrays_keep_trailing_nul_bytes_and_characters():
    # NumPy's fixed-width bytes/str types would drop them (b"\x00" -> b"").
    from shardflow.sdk.block import rows_to_block

    rows = [
        {"a": np.zeros(2), "b": b"\x01\x00", "s": "x\x00"},
        {"a": np.ones(2), "b": b"", "s": ""},
    ]
    block = rows_to_block(rows)
    assert block.column("b").to_pylist() == [b"\x01\x00", b""]
    assert block.column("s").to_pylist() == ["x\x00", ""]
    assert block.schema.field("b").type == pa.binary()
    assert block.schema.field("s").type == pa.string()
