"""Group-by keys read as Parquet dictionaries give the rows a plain read gives.

When a group-by follows a Parquet read, the optimizer lets the read leave dictionary-encoded
string keys as Arrow dictionaries and the partial aggregation group by their codes. The
oracle is ``pyarrow.Table.group_by`` over the concatenated files, sorted by key. Values are
multiples of 1/8, so every sum is exact in any order and results compare exactly.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.aggregate import AggregateFn, Count, Max, Mean, Min, Std, Sum
from shardflow.engine.execution.exchange.dense_groups import dense_keys
from shardflow.engine.plan.logical import Aggregate
from shardflow.engine.plan.optimizer import optimize

WORDS = ["pear", "apple", "", "fig", "apples", "Zebra", "é"]
_folders = itertools.count()


@st.composite
def parquet_files(draw):
    """Two to three files of up to three row groups; each file dictionary-encodes its
    strings or not; keys may hold nulls."""
    files = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 60))
        strings = st.sampled_from(WORDS)
        if draw(st.booleans()):
            strings = strings | st.none()
        table = pa.table(
            {
                "s": pa.array(draw(st.lists(strings, min_size=n, max_size=n)), pa.string()),
                "t": pa.array(draw(st.lists(st.sampled_from(WORDS[:3]), min_size=n, max_size=n))),
                "u": pa.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))),
                "v": pa.array(
                    draw(st.lists(st.integers(-80, 80), min_size=n, max_size=n)), pa.float64()
                ),
            }
        )
        table = table.set_column(3, "v", pc.divide(table.column("v"), 8.0))
        files.append((table, draw(st.booleans()), draw(st.integers(1, 3))))
    keys = draw(st.sampled_from([["s"], ["s", "u"], ["u", "s"], ["t", "s"]]))
    return files, keys


def _write(folder, files):
    os.makedirs(folder)
    for i, (table, dictionary, groups) in enumerate(files):
        size = max(1, math.ceil(table.num_rows / groups))
        pq.write_table(
            table,
            os.path.join(folder, f"part-{i}.parquet"),
            use_dictionary=dictionary,
            row_group_size=size,
        )


def _oracle(table: pa.Table, keys: list[str]) -> list[tuple]:
    grouped = table.group_by(keys).aggregate([([], "count_all"), ("v", "sum"), ("v", "mean")])
    grouped = grouped.sort_by([(k, "ascending") for k in keys])
    return [
        tuple(r[k] for k in keys) + (r["count_all"], r["v_sum"], r["v_mean"])
        for r in grouped.to_pylist()
    ]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parquet_files())
def test_grouped_parquet_strings_equal_arrow(fresh_context, tmp_path, files_and_keys):
    files, keys = files_and_keys
    folder = str(tmp_path / f"case-{next(_folders)}")
    _write(folder, files)
    ds = sf.read_parquet(folder).groupby(keys if len(keys) > 1 else keys[0])
    out = ds.aggregate(Count(), Sum("v"), Mean("v")).to_arrow()
    for k in keys:
        assert out.schema.field(k).type == (pa.int64() if k == "u" else pa.string())
    got = [
        tuple(r[k] for k in keys) + (r["count()"], r["sum(v)"], r["mean(v)"])
        for r in out.to_pylist()
    ]
    assert got == _oracle(pa.concat_tables(t for t, _, _ in files), keys)


@pytest.fixture
def fruit_folder(tmp_path):
    """Three dictionary-encoded files of 3,000 rows whose dictionaries differ."""
    rng = np.random.default_rng(7)
    folder = tmp_path / "fruit"
    folder.mkdir()
    tables = []
    for i in range(3):
        words = rng.choice(WORDS[: 4 + i], 3000)
        table = pa.table(
            {
                "s": words,
                "g": rng.integers(0, 3, 3000),
                "v": rng.integers(-800, 800, 3000) / 8,
            }
        )
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=1000)
        tables.append(table)
    return str(folder), pa.concat_tables(tables).to_pandas()


def test_the_rule_encodes_only_plain_string_keys_of_a_read(fruit_folder):
    folder, _ = fruit_folder
    plan = optimize(sf.read_parquet(folder).groupby(["s", "g"]).aggregate(Sum("v"))._plan)
    assert isinstance(plan.ops[0], Aggregate)
    assert plan.ops[0].encoded_keys == ("s", "g")  # the read decides which are strings
    assert plan.source.datasource._encoded_columns == ("s", "g")
    # A key an aggregation reads too stays plain; so does a key after an operation.
    plan = optimize(sf.read_parquet(folder).groupby("s").aggregate(Max("s"))._plan)
    assert plan.ops[0].encoded_keys == ()
    mapped = sf.read_parquet(folder).map_batches(lambda b: b).groupby("s").count()
    assert all(getattr(op, "encoded_keys", ()) == () for op in optimize(mapped._plan).ops)


def test_every_aggregation_over_encoded_keys_matches_pandas(backend, fruit_folder):
    folder, frame = fruit_folder

    class Longest(AggregateFn):  # a custom aggregation: the sorted path, keys decoded first
        def __init__(self):
            super().__init__(
                init=lambda key: 0.0,
                accumulate_block=lambda acc, block: max(acc, float(pc.max(block["v"]).as_py())),
                merge=max,
                name="longest",
            )

    out = (
        sf.read_parquet(folder)
        .groupby("s")
        .aggregate(Min("v"), Max("v"), Std("v"), Count(), Longest())
        .to_pandas()
    )
    expected = frame.groupby("s")["v"].agg(["min", "max", "std", "count"]).reset_index()
    assert out["s"].tolist() == expected["s"].tolist()
    assert out["min(v)"].tolist() == expected["min"].tolist()
    assert out["max(v)"].tolist() == expected["max"].tolist()
    assert out["count()"].tolist() == expected["count"].tolist()
    assert out["longest"].tolist() == pytest.approx(expected["max"].clip(lower=0).tolist())
    np.testing.assert_allclose(out["std(v)"], expected["std"], rtol=1e-12)
    both = sf.read_parquet(folder).groupby(["g", "s"]).aggregate(Sum("v"), Mean("v")).to_pandas()
    expected = frame.groupby(["g", "s"])["v"].agg(["sum", "mean"]).reset_index()
    pd.testing.assert_frame_equal(
        both.rename(columns={"sum(v)": "sum", "mean(v)": "mean"}), expected, check_dtype=False
    )
    counted = sf.read_parquet(folder).groupby("s").count().to_arrow()
    assert counted.schema.field("s").type == pa.string()


def test_codes_of_dictionaries_group_as_values_do():
    # Chunks with different dictionaries are unified; a dictionary holding a value twice
    # (a writer may) does not give codes, so the plain path decides.
    first = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1]), pa.array(["b", "a"]))
    second = pa.DictionaryArray.from_arrays(pa.array([1, 0]), pa.array(["a", "c"]))
    table = pa.table({"s": pa.chunked_array([first, second])})
    grouping = dense_keys(table, ("s",), encoded=("s",))
    assert grouping is not None
    present = grouping.present(np.bincount(grouping.codes, minlength=grouping.span))
    assert grouping.key_columns(present)["s"].to_pylist() == ["a", "b", "c"]  # in key order
    rows = grouping.key_columns(np.asarray(grouping.codes, dtype=np.int64))["s"].to_pylist()
    assert rows == ["b", "a", "a", "c", "a"]
    twice = pa.DictionaryArray.from_arrays(pa.array([0, 1]), pa.array(["a", "a"]))
    assert dense_keys(pa.table({"s": twice}), ("s",), encoded=("s",)) is None
    assert dense_keys(pa.table({"s": twice}), ("s",)) is None  # not named: never codes
