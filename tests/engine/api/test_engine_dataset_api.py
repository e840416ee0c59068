"""Dataset sources and transformations against pandas/numpy oracles, on both backends.

Every result is compared in order: the engine preserves the order of rows by default.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf


def add_ten(row):
    return {"id": row["id"], "plus": row["id"] + 10}


def scale(row, factor, *, offset=0):
    return {"v": row["id"] * factor + offset}


def double_batch(batch):
    return {"id": batch["id"], "double": batch["id"] * 2}


def batch_with_args(batch, factor, *, offset=0):
    return {"v": batch["id"] * factor + offset}


def record_batch_size(batch):
    return {"n": np.array([len(batch["id"])])}


def split_in_two(batch):
    """A generator UDF: two output batches per input batch."""
    half = len(batch["id"]) // 2
    yield {"id": batch["id"][:half]}
    yield {"id": batch["id"][half:]}


def repeat_row(row):
    return [{"id": row["id"], "copy": c} for c in range(row["id"] % 3)]


def is_even(row):
    return row["id"] % 2 == 0


class AddConstant:
    """A callable class: constructed once per task with fn_constructor_args."""

    def __init__(self, constant, *, column="id"):
        self.constant = constant
        self.column = column

    def __call__(self, batch):
        return {self.column: batch[self.column] + self.constant}


class RowAdder:
    def __init__(self, constant):
        self.constant = constant

    def __call__(self, row):
        return {"id": row["id"] + self.constant}


def _ids(rows, key="id"):
    return [r[key] for r in rows]


# -- sources -----------------------------------------------------------------------------


@pytest.mark.parametrize("n, blocks", [(0, None), (1, None), (37, 5), (1000, None)])
def test_range(backend, n, blocks):
    ds = sf.range(n, override_num_blocks=blocks)
    assert ds.take_all() == [{"id": i} for i in range(n)]
    assert ds.count() == n


def test_from_items(backend):
    items = [{"a": i, "b": str(i)} for i in range(23)]
    ds = sf.from_items(items, override_num_blocks=4)
    assert ds.take_all() == items
    assert sf.from_items([3, 1, 2]).take_all() == [{"item": 3}, {"item": 1}, {"item": 2}]
    assert sf.from_items([]).take_all() == []


def test_from_pandas(backend):
    df = pd.DataFrame({"x": np.arange(20), "y": np.linspace(0, 1, 20), "s": list("ab" * 10)})
    pd.testing.assert_frame_equal(sf.from_pandas(df).to_pandas(), df, check_dtype=False)
    parts = [df.iloc[:7], df.iloc[7:]]
    out = sf.from_pandas(parts).to_pandas()
    pd.testing.assert_frame_equal(out, df, check_dtype=False)
    assert sf.from_pandas(df, override_num_blocks=4).to_pandas()["x"].tolist() == list(range(20))


def test_from_numpy(backend):
    data = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    ds = sf.from_numpy(data)
    batch = ds.take_batch(6)
    np.testing.assert_array_equal(batch["data"], data)
    assert batch["data"].dtype == np.float32
    flat = sf.from_numpy([np.arange(3), np.arange(3, 5)])
    assert _ids(flat.take_all(), "data") == [0, 1, 2, 3, 4]


def test_from_arrow(backend):
    table = pa.table({"x": list(range(10)), "y": [f"v{i}" for i in range(10)]})
    assert sf.from_arrow(table).to_arrow().equals(table)
    assert sf.from_arrow([table.slice(0, 4), table.slice(4)]).to_arrow().equals(table)
    assert sf.from_arrow(table, override_num_blocks=3).to_arrow().equals(table)


def test_source_argument_validation():
    with pytest.raises(TypeError):
        sf.range("10")
    with pytest.raises(ValueError):
        sf.range(-1)
    with pytest.raises(TypeError):
        sf.from_items("abc")
    with pytest.raises(TypeError):
        sf.from_pandas([1, 2])
    with pytest.raises(TypeError):
        sf.from_numpy([1, 2])
    with pytest.raises(ValueError, match="override_num_blocks"):
        sf.range(10, override_num_blocks=0)


# -- map ---------------------------------------------------------------------------------


def test_map(backend):
    rows = sf.range(50, override_num_blocks=4).map(add_ten).take_all()
    assert rows == [{"id": i, "plus": i + 10} for i in range(50)]


def test_map_with_args_and_callable_class(backend):
    ds = sf.range(10)
    out = ds.map(scale, fn_args=(3,), fn_kwargs={"offset": 1}).take_all()
    assert _ids(out, "v") == [3 * i + 1 for i in range(10)]
    out = ds.map(RowAdder, fn_constructor_args=(100,)).take_all()
    assert _ids(out) == [i + 100 for i in range(10)]


def test_map_with_lambda(backend):
    out = sf.range(5).map(lambda r: {"sq": r["id"] ** 2}).take_all()
    assert _ids(out, "sq") == [0, 1, 4, 9, 16]


# -- map_batches -------------------------------------------------------------------------


def test_map_batches_numpy(backend):
    df = sf.range(100, override_num_blocks=3).map_batches(double_batch).to_pandas()
    expected = pd.DataFrame({"id": np.arange(100), "double": np.arange(100) * 2})
    pd.testing.assert_frame_equal(df, expected, check_dtype=False)


@pytest.mark.parametrize(
    "batch_size, expected",
    [(7, [7, 7, 1] * 2), (10, [10, 5] * 2), (15, [15, 15]), (None, [15, 15])],
)
def test_map_batches_batch_size(backend, batch_size, expected):
    # two read tasks of 15 rows; a batch never spans two tasks
    ds = sf.range(30, override_num_blocks=2).map_batches(record_batch_size, batch_size=batch_size)
    assert _ids(ds.take_all(), "n") == expected


def test_map_batches_batch_size_within_one_block(backend):
    ds = sf.range(30, override_num_blocks=1).map_batches(record_batch_size, batch_size=7)
    assert _ids(ds.take_all(), "n") == [7, 7, 7, 7, 2]


def test_map_batches_pandas(backend):
    def fn(df):
        assert isinstance(df, pd.DataFrame)
        return df.assign(sq=df["id"] ** 2)

    out = sf.range(20, override_num_blocks=3).map_batches(fn, batch_format="pandas", batch_size=4)
    expected = pd.DataFrame({"id": np.arange(20), "sq": np.arange(20) ** 2})
    pd.testing.assert_frame_equal(out.to_pandas(), expected, check_dtype=False)


def test_map_batches_pyarrow(backend):
    import pyarrow.compute as pc

    def fn(table):
        assert isinstance(table, pa.Table)
        return table.append_column("neg", pc.negate(table.column("id")))

    out = sf.range(12).map_batches(fn, batch_format="pyarrow").to_arrow()
    assert out.column("neg").to_pylist() == [-i for i in range(12)]


def test_map_batches_fn_args_and_kwargs(backend):
    out = sf.range(10).map_batches(batch_with_args, fn_args=(5,), fn_kwargs={"offset": -2})
    assert _ids(out.take_all(), "v") == [5 * i - 2 for i in range(10)]


def test_map_batches_callable_class(backend):
    ds = sf.range(10).map_batches(
        AddConstant, fn_constructor_args=(1000,), fn_constructor_kwargs={"column": "id"}
    )
    assert _ids(ds.take_all()) == [1000 + i for i in range(10)]


def test_map_batches_generator(backend):
    ds = sf.range(40, override_num_blocks=4).map_batches(split_in_two, batch_size=10)
    assert _ids(ds.take_all()) == list(range(40))
    assert ds.count() == 40


def writable_flags(batch):
    return {"writable": np.array([batch["id"].flags.writeable])}


def add_one_in_place(batch):
    batch["id"] += 1
    return batch


def test_map_batches_zero_copy_by_default(backend):
    flags = sf.range(10, override_num_blocks=2).map_batches(writable_flags).take_all()
    assert flags == [{"writable": False}] * 2
    with pytest.raises(ValueError, match="read-only"):
        sf.range(10).map_batches(add_one_in_place).take_all()
    copied = sf.range(10).map_batches(add_one_in_place, zero_copy_batch=False).take_all()
    assert _ids(copied) == list(range(1, 11))


def test_map_batches_auto_batch_size(backend):
    ds = sf.range(5000, override_num_blocks=2).map_batches(double_batch, batch_size="auto")
    rows = ds.take_all()
    assert _ids(rows) == list(range(5000))
    assert _ids(rows, "double") == [2 * i for i in range(5000)]


def test_map_batches_can_change_row_count(backend):
    ds = sf.range(30).map_batches(lambda b: {"id": b["id"][b["id"] % 3 == 0]})
    assert _ids(ds.take_all()) == list(range(0, 30, 3))


def test_map_batches_tensor_columns(backend):
    def to_images(batch):
        n = len(batch["id"])
        shades = batch["id"].astype(np.uint8)[:, None, None]
        return {"id": batch["id"], "img": np.ones((n, 4, 4), dtype=np.uint8) * shades}

    batch = sf.range(8).map_batches(to_images).take_batch(8)
    assert batch["img"].shape == (8, 4, 4)
    for i in range(8):
        assert (batch["img"][i] == i).all()


def test_map_batches_ragged_tensor_columns(backend):
    def ragged(batch):
        cells = np.empty(len(batch["id"]), dtype=object)
        cells[:] = [np.full(int(i) + 1, i) for i in batch["id"]]
        return {"id": batch["id"], "r": cells}

    rows = sf.range(6, override_num_blocks=2).map_batches(ragged).take_all()
    assert _ids(rows) == list(range(6))
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(row["r"], np.full(i + 1, i))


# -- flat_map, filter, columns -----------------------------------------------------------


def test_flat_map(backend):
    rows = sf.range(10, override_num_blocks=3).flat_map(repeat_row).take_all()
    expected = [{"id": i, "copy": c} for i in range(10) for c in range(i % 3)]
    assert rows == expected


def test_filter_function(backend):
    rows = sf.range(20, override_num_blocks=3).filter(is_even).take_all()
    assert _ids(rows) == list(range(0, 20, 2))


def test_filter_expression(backend):
    df = pd.DataFrame({"x": np.arange(-10, 10), "y": np.arange(20) % 4})
    ds = sf.from_pandas(df, override_num_blocks=3)
    out = ds.filter(sf.col("x") > 0).to_pandas()
    pd.testing.assert_frame_equal(out, df[df.x > 0].reset_index(drop=True), check_dtype=False)
    out = ds.filter(expr=(sf.col("x") < 0) & sf.col("y").is_in([1, 3])).to_pandas()
    expected = df[(df.x < 0) & df.y.isin([1, 3])].reset_index(drop=True)
    pd.testing.assert_frame_equal(out, expected, check_dtype=False)


def test_add_column(backend):
    df = sf.range(10).add_column("double", lambda d: d["id"] * 2).to_pandas()
    expected = pd.DataFrame({"id": np.arange(10), "double": np.arange(10) * 2})
    pd.testing.assert_frame_equal(df, expected, check_dtype=False)
    replaced = sf.range(3).add_column("id", lambda d: d["id"] + 1).take_all()
    assert replaced == [{"id": 1}, {"id": 2}, {"id": 3}]
    numpy_fmt = sf.range(4).add_column("neg", lambda b: -b["id"], batch_format="numpy").take_all()
    assert _ids(numpy_fmt, "neg") == [0, -1, -2, -3]


def _three_columns():
    return sf.from_pandas(pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6], "c": ["x", "y", "z"]}))


def test_select_drop_rename(backend):
    ds = _three_columns()
    assert ds.select_columns(["c", "a"]).take_all() == [
        {"c": "x", "a": 1},
        {"c": "y", "a": 2},
        {"c": "z", "a": 3},
    ]
    assert ds.select_columns("b").columns() == ["b"]
    assert ds.drop_columns(["b"]).columns() == ["a", "c"]
    assert ds.rename_columns({"a": "A", "c": "C"}).columns() == ["A", "b", "C"]
    assert ds.rename_columns(["x", "y", "z"]).take(1) == [{"x": 1, "y": 4, "z": "x"}]


def test_limit(backend):
    ds = sf.range(100, override_num_blocks=7)
    assert ds.limit(13).take_all() == [{"id": i} for i in range(13)]
    assert ds.limit(0).take_all() == []
    assert ds.limit(1000).count() == 100
    assert ds.limit(50).limit(10).count() == 10
    assert _ids(ds.map(add_ten).limit(5).take_all()) == [0, 1, 2, 3, 4]
    assert _ids(ds.filter(sf.col("id") > 90).limit(3).take_all()) == [91, 92, 93]


def test_chained_pipeline_matches_pandas(backend):
    df = pd.DataFrame({"id": np.arange(200), "g": np.arange(200) % 7})
    ds = (
        sf.from_pandas(df, override_num_blocks=5)
        .map_batches(lambda b: {"id": b["id"], "g": b["g"], "v": b["id"] * 0.5}, batch_size=16)
        .filter(sf.col("g") != 3)
        .map(add_ten)
        .limit(100)
    )
    expected = df[df.g != 3].head(100)
    out = ds.to_pandas()
    assert out["id"].tolist() == expected["id"].tolist()
    assert out["plus"].tolist() == (expected["id"] + 10).tolist()


def test_datasets_are_immutable(backend):
    base = sf.range(5)
    mapped = base.map_batches(lambda b: {"id": b["id"] + 1})
    assert _ids(base.take_all()) == [0, 1, 2, 3, 4]
    assert _ids(mapped.take_all()) == [1, 2, 3, 4, 5]
