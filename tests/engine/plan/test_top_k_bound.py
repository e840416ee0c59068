"""The top-k's key bound (engine/execution/exchange/key_bound.py): row groups whose statistics
put every row past the k-th key seen are not read, and the rows, their order and ties are
those of the plan without late materialization (the oracle)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_late_columns import _both  # the pipeline with the rule on, and off (the oracle)

import shardflow as sf
from shardflow.connectors.parquet import late_columns
from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.exchange.key_bound import KeyBound


def test_the_bound_is_the_kth_key_offered():
    bound = KeyBound(descending=False, k=3)
    bound.offer([5, 9])
    assert bound.value is None and not bound.excludes(100, 200)  # fewer than k keys
    bound.offer([7, None, float("nan")])  # null and NaN never bound
    assert bound.value == 9
    bound.offer([1])
    assert bound.value == 7
    assert bound.excludes(7.5, 10) and not bound.excludes(7, 10)  # equal keys may still tie
    copy = pickle.loads(pickle.dumps(bound))
    assert copy.value == 7 and copy.excludes(8, 9)
    falling = KeyBound(descending=True, k=2)
    falling.offer([1, 4, 3])
    assert falling.value == 3
    assert falling.excludes(0, 2) and not falling.excludes(0, 3)


def _rows(table: pa.Table) -> list:
    """The rows with NaN as a marker (NaN != NaN would fail any comparison of tables)."""
    return [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in table.to_pylist()
    ]


def _same(a: pa.Table, b: pa.Table) -> bool:
    return a.schema == b.schema and _rows(a) == _rows(b)


@pytest.fixture
def skips(monkeypatch):
    """The number of row groups the first phase skipped. Blocks go to the top-k's runs one
    by one (these small blocks are not bundled), so the bound tightens during the reads."""
    monkeypatch.setattr(DataContext.get_current(), "target_min_block_size", 1)
    monkeypatch.setattr(DataContext.get_current(), "num_cpus", 1)  # files one after another
    count = [0]
    original = late_columns._excluded

    def spy(*args):
        excluded = original(*args)
        count[0] += excluded
        return excluded

    monkeypatch.setattr(late_columns, "_excluded", spy)
    return count


def _sorted_files(folder, descending=False):
    """Keys rising (or falling) through the files and row groups: after the first row
    groups, every later one is past the bound."""
    folder.mkdir()
    for f in range(3):
        ids = np.arange(f * 400, (f + 1) * 400)
        keys = -ids if descending else ids
        table = pa.table({"id": ids, "k": keys // 3, "x": ids * 0.5})
        pq.write_table(table, folder / f"part-{f}.parquet", row_group_size=50)
    return str(folder)


@pytest.mark.parametrize("descending", [False, True])
def test_row_groups_past_the_bound_are_skipped(tmp_path, skips, descending):
    path = _sorted_files(tmp_path / "data", descending)
    with_rule, plain = _both(
        lambda: sf.read_parquet(path).sort("k", descending=descending).limit(7)
    )
    assert with_rule.equals(plain)
    assert skips[0] >= 8, skips[0]  # of 24 row groups: at least the last file


def test_ties_at_the_bound_are_read(tmp_path, skips):
    # Every key equal: no row group is past the bound, the first rows in input order win.
    folder = tmp_path / "data"
    folder.mkdir()
    for f in range(2):
        pq.write_table(
            pa.table({"id": np.arange(f * 100, (f + 1) * 100), "k": np.zeros(100, np.int64)}),
            folder / f"part-{f}.parquet",
            row_group_size=10,
        )
    with_rule, plain = _both(lambda: sf.read_parquet(str(folder)).sort("k").limit(15))
    assert with_rule.equals(plain)
    assert with_rule.column("id").to_pylist() == list(range(15))
    assert skips[0] == 0


def test_a_descending_float_key_never_skips(tmp_path, skips):
    # NaN rows are not in the statistics: a row group could hold NaN past its maximum.
    folder = tmp_path / "data"
    folder.mkdir()
    values = np.linspace(0, 1, 300)
    values[250] = np.nan
    pq.write_table(pa.table({"v": values}), folder / "f.parquet", row_group_size=20)
    with_rule, plain = _both(
        lambda: sf.read_parquet(str(folder)).sort("v", descending=True).limit(5)
    )
    assert with_rule.equals(plain)
    assert skips[0] == 0


@st.composite
def datasets(draw):
    files = draw(st.integers(1, 3))
    rows = draw(st.integers(1, 60))
    kind = draw(st.sampled_from(["int", "float"]))
    tables = []
    for f in range(files):
        if kind == "int":
            keys = draw(st.lists(st.integers(-5, 30), min_size=rows, max_size=rows))
            key = pa.array(keys, pa.int64())
        else:
            values = draw(
                st.lists(
                    st.sampled_from([0.5, -1.0, 2.0, 7.25, np.nan]), min_size=rows, max_size=rows
                )
            )
            key = pa.array(values, pa.float64())
        nulls = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
        if any(nulls) and draw(st.booleans()):
            key = pa.array(key.to_pylist(), key.type, mask=np.array(nulls))
        tables.append(pa.table({"id": np.arange(f * rows, (f + 1) * rows), "k": key}))
    return tables, draw(st.integers(1, 20)), draw(st.integers(1, 25)), draw(st.booleans())


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=datasets())
def test_top_k_with_the_bound_equals_the_plain_plan(tmp_path_factory, monkeypatch, case):
    monkeypatch.setattr(DataContext.get_current(), "target_min_block_size", 1)
    tables, k, row_group_size, descending = case
    folder = tmp_path_factory.mktemp("data")
    for i, table in enumerate(tables):
        pq.write_table(table, folder / f"part-{i}.parquet", row_group_size=row_group_size)
    for keys in (["k"], ["k", "id"]):
        order = [descending, not descending][: len(keys)]

        def top(keys=keys, order=order):
            return sf.read_parquet(str(folder)).sort(keys, descending=order).limit(k)

        with_rule, plain = _both(top)
        assert _same(with_rule, plain), (keys, order)


def test_the_bound_on_ray_gives_the_same_rows(tmp_path, backend):
    path = _sorted_files(tmp_path / "data")
    with_rule, plain = _both(lambda: sf.read_parquet(path).sort("k").limit(9))
    assert with_rule.equals(plain)
