"""Late materialization of a top-k over a Parquet read: the same rows, order and schema as
the plain plan (the oracle: the same pipeline with the rule turned off), on both backends."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.engine.api.context import DataContext
from shardflow.engine.api.explain import explain_plan
from shardflow.engine.plan.late_columns import CONFIG_KEY, FetchLateColumns
from shardflow.engine.plan.optimizer import optimize


def _write(folder, tables, row_group_size=None):
    folder.mkdir(parents=True, exist_ok=True)
    for i, table in enumerate(tables):
        pq.write_table(table, folder / f"part-{i:02d}.parquet", row_group_size=row_group_size)
    return str(folder)


def _files(n_files=4, rows=10, seed=0):
    """Tables with many ties on ``k`` across files, nulls and NaNs in the float key ``w``,
    a string key ``s`` (dictionary-encoded in the files), and unique ``id``s."""
    rng = np.random.default_rng(seed)
    tables = []
    for f in range(n_files):
        w = rng.choice([0.5, -1.0, 2.0, np.nan], rows)
        tables.append(
            pa.table(
                {
                    "id": pa.array(np.arange(f * rows, (f + 1) * rows), pa.int64()),
                    "k": pa.array(rng.integers(0, 3, rows), pa.int64()),
                    "w": pa.array(w, mask=rng.random(rows) < 0.2),
                    "s": pa.array([f"s{x}" for x in rng.integers(0, 4, rows)]),
                    "n": pa.array([None if x < 1 else int(x) for x in rng.integers(0, 4, rows)]),
                }
            )
        )
    return tables


def _both(make):
    """The pipeline's result with the rule on, and with it off (the oracle)."""
    context = DataContext.get_current()
    results = []
    for on in (True, False):
        context.set_config(CONFIG_KEY, on)
        try:
            results.append(make().to_arrow())
        finally:
            context.remove_config(CONFIG_KEY)
    return results


def _assert_same(make):
    late, plain = _both(make)
    assert late.schema.equals(plain.schema, check_metadata=True), (late.schema, plain.schema)
    pd.testing.assert_frame_equal(late.to_pandas(), plain.to_pandas())
    return late


def _same(a, b) -> bool:
    nans = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b or nans


def _applies(ds) -> bool:
    return any(isinstance(op, FetchLateColumns) for op in optimize(ds._plan).ops)


SCHEMA = pa.schema(
    {"s": pa.string(), "k": pa.int32(), "id": pa.float64(), "extra": pa.int16(), "n": pa.int64()}
)

CASES = {
    "ties": lambda d: sf.read_parquet(d).sort("k").limit(7),
    "descending": lambda d: sf.read_parquet(d).sort("k", descending=True).limit(9),
    "multi_key": lambda d: sf.read_parquet(d).sort(["k", "w"], descending=[False, True]).limit(8),
    "float_nulls_nans": lambda d: sf.read_parquet(d).sort("w").limit(30),
    "float_desc": lambda d: sf.read_parquet(d).sort("w", descending=True).limit(30),
    "int_nulls": lambda d: sf.read_parquet(d).sort("n").limit(35),
    "string_key": lambda d: sf.read_parquet(d).sort(["s", "k"]).limit(12),
    "k_past_a_file": lambda d: sf.read_parquet(d).sort("k").limit(25),
    "k_past_the_dataset": lambda d: sf.read_parquet(d).sort(["k", "s"]).limit(1000),
    "zero": lambda d: sf.read_parquet(d).sort("k").limit(0),
    "projection": lambda d: sf.read_parquet(d).select_columns(["s", "k", "id"]).sort("k").limit(6),
    "columns_arg": lambda d: sf.read_parquet(d, columns=["w", "id"]).sort("w").limit(6),
    "schema_arg": lambda d: sf.read_parquet(d, schema=SCHEMA).sort(["k", "id"]).limit(6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_late_top_k_matches_the_plain_plan(backend, tmp_path, case):
    folder = _write(tmp_path / "data", _files())
    make = lambda: CASES[case](folder)  # noqa: E731
    assert _applies(make())
    _assert_same(make)


def test_several_row_groups_per_file(backend, tmp_path):
    folder = _write(tmp_path / "data", _files(n_files=3, rows=40, seed=3), row_group_size=7)
    for make in (
        lambda: sf.read_parquet(folder).sort("k").limit(11),
        lambda: sf.read_parquet(folder).sort(["w", "id"], descending=[True, True]).limit(50),
    ):
        assert _applies(make())
        _assert_same(make)


def test_files_with_different_schemas_unify_as_in_a_plain_read(backend, tmp_path):
    tables = [
        pa.table({"k": pa.array([5, 1, 4], pa.int64()), "a": pa.array([1, 2, 3], pa.int32())}),
        pa.table(
            {
                "b": ["x", "y", "z", "w"],
                "k": pa.array([0, 2, 9, 1], pa.int64()),
                "a": pa.array([10, 20, 30, 40], pa.int64()),
            }
        ),
        # Only the file with no winner has ``c``: the plain plan still has the column.
        pa.table({"k": pa.array([50, 60], pa.int64()), "c": pa.array([1.5, 2.5])}),
        pa.table({"k": pa.array([], pa.int64()), "a": pa.array([], pa.int32())}),
    ]
    folder = _write(tmp_path / "data", tables)
    make = lambda: sf.read_parquet(folder).sort("k").limit(4)  # noqa: E731
    assert _applies(make())
    late = _assert_same(make)
    assert late.column("k").to_pylist() == [0, 1, 1, 2]
    assert "c" in late.column_names


def test_a_filter_before_the_sort_is_read_plainly(backend, tmp_path):
    tables = _files()
    folder = _write(tmp_path / "data", tables)
    make = lambda: sf.read_parquet(folder).filter(expr="k > 0").sort("w").limit(5)  # noqa: E731
    assert not _applies(make())
    late = _assert_same(make)
    expected = pa.concat_tables(tables).to_pandas()
    expected = expected[expected["k"] > 0].sort_values("w", kind="stable").head(5)
    assert late.column("id").to_pylist() == expected["id"].tolist()


@pytest.mark.parametrize(
    "make",
    [
        lambda d: sf.read_parquet(d, filter=pa.compute.field("k") > 0).sort("k").limit(3),
        lambda d: sf.read_parquet(d, include_paths=True).sort("k").limit(3),
        lambda d: sf.read_parquet(d).rename_columns({"k": "kk"}).sort("kk").limit(3),
        lambda d: sf.read_parquet(d).sort("k").limit(5000),
        lambda d: sf.read_parquet(d).map_batches(lambda b: b).sort("k").limit(3),
        lambda d: sf.read_parquet(d).sort("k").map_batches(lambda b: b).limit(3),
        lambda d: sf.read_parquet(d).sort("missing").limit(3),
    ],
    ids=["filter_arg", "paths", "rename", "large_k", "map_before", "map_between", "no_key"],
)
def test_reads_the_rule_declines(tmp_path, make):
    folder = _write(tmp_path / "data", _files())
    assert not _applies(make(folder))


def test_partitioned_reads_are_declined(tmp_path):
    for part in ("a", "b"):
        _write(tmp_path / "data" / f"p={part}", _files(n_files=1))
    ds = sf.read_parquet(str(tmp_path / "data")).sort("k").limit(3)
    assert not _applies(ds)
    assert len(ds.take_all()) == 3


def test_the_first_phase_reads_only_the_key(tmp_path):
    folder = _write(tmp_path / "data", _files())
    ds = sf.read_parquet(folder).sort("k").limit(3)
    plan = optimize(ds._plan)
    assert plan.source.datasource._late_keys == ("k",)
    assert [type(op).__name__ for op in plan.ops] == ["TopK", "Limit", "FetchLateColumns"]
    assert "FetchLateColumns" in explain_plan(ds._plan)
    # What the narrow read yields: the key decoded, the other columns null, positions.
    from shardflow.engine.plan.planner import ReadTaskCache

    tasks = ReadTaskCache(DataContext.get_current()).get(plan.source)
    block = pa.concat_tables([b for t in tasks for b in t()])
    assert block.column("k").null_count == 0
    assert all(block.column(c).null_count == block.num_rows for c in ("id", "w", "s", "n"))
    assert block.column_names[-2:] == ["__shardflow_file", "__shardflow_row"]


def test_take_gives_the_plain_rows(backend, tmp_path):
    folder = _write(tmp_path / "data", _files(n_files=5, rows=30, seed=7))
    context = DataContext.get_current()
    rows = sf.read_parquet(folder).sort(["w", "k"], descending=[True, False]).take(10)
    context.set_config(CONFIG_KEY, False)
    plain = sf.read_parquet(folder).sort(["w", "k"], descending=[True, False]).take(10)
    assert len(rows) == len(plain) == 10
    for got, want in zip(rows, plain):
        assert list(got) == list(want)
        assert all(_same(got[c], want[c]) for c in want)


def test_files_split_into_byte_ranges(backend, tmp_path, monkeypatch):
    from shardflow.connectors.parquet.datasource import ParquetDatasource

    monkeypatch.setattr(ParquetDatasource, "_MIN_SPLIT_BYTES", 1)
    folder = _write(tmp_path / "data", _files(n_files=2, rows=60, seed=5), row_group_size=8)
    make = lambda: sf.read_parquet(folder, override_num_blocks=24).sort(["s", "w"]).limit(40)  # noqa: E731
    plan = optimize(make()._plan)
    from shardflow.engine.plan.planner import ReadTaskCache

    tasks = ReadTaskCache(DataContext.get_current()).get(plan.source)
    assert any(u.split is not None for t in tasks for u in t.read_fn.units)
    assert _applies(make())
    _assert_same(make)


def test_an_optimized_plan_is_not_rewritten_twice(tmp_path):
    folder = _write(tmp_path / "data", _files())
    once = optimize(sf.read_parquet(folder).sort("k").limit(3)._plan)
    twice = optimize(once)
    assert [type(op).__name__ for op in twice.ops] == ["TopK", "Limit", "FetchLateColumns"]
