"""Parquet's late materialization (connectors/parquet/late_columns.py): the narrow read, and
the fetch of the winning rows' other columns, including its errors."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.connectors.parquet.late_columns import POSITION_COLUMNS
from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.errors import UserCodeError
from shardflow.engine.execution.stages.transforms import FusedTransform
from shardflow.engine.plan.late_columns import FetchLateColumnsStage
from shardflow.sdk.datasink import TaskContext


def _dataset(tmp_path, files=3, rows=20):
    paths = []
    for f in range(files):
        path = tmp_path / f"part-{f}.parquet"
        ids = list(range(f * rows, (f + 1) * rows))
        table = pa.table({"id": ids, "k": [(i * 7) % 11 for i in ids], "s": [f"v{i}" for i in ids]})
        pq.write_table(table, path, row_group_size=6)
        paths.append(str(path))
    return sf.read_parquet(str(tmp_path)), paths


def _winners(ds, k):
    narrow, fetch = ds._plan.source.datasource.late_materialization(
        ("k",), DataContext.get_current()
    )
    block = pa.concat_tables([b for task in narrow.get_read_tasks(2) for b in task()])
    order = pc.sort_indices(block, sort_keys=[("k", "ascending")])
    return block.take(order).slice(0, k), fetch


def test_fetch_gives_the_plain_rows_in_order(tmp_path):
    ds, _ = _dataset(tmp_path)
    winners, fetch = _winners(ds, 9)
    out = fetch(winners)
    assert out.column_names == ["id", "k", "s"]
    plain = ds.to_arrow()
    plain = plain.take(pc.sort_indices(plain, sort_keys=[("k", "ascending")])).slice(0, 9)
    assert out.equals(plain.select(out.column_names))


def test_fetch_of_a_missing_file_names_it_and_is_not_user_code(tmp_path):
    ds, paths = _dataset(tmp_path)
    winners, fetch = _winners(ds, 30)
    os.remove(paths[1])
    with pytest.raises(OSError, match="part-1.parquet"):
        fetch(winners)
    stage = FetchLateColumnsStage(fetch, "FetchLateColumns")
    transform = FusedTransform([stage], "Limit")
    with pytest.raises(UserCodeError) as info:
        list(transform([winners], TaskContext(0, "FetchLateColumns")))
    assert "part-1.parquet" in str(info.value)
    assert not info.value.from_user_function


def test_blocks_without_positions_or_rows_pass(tmp_path):
    ds, _ = _dataset(tmp_path)
    winners, fetch = _winners(ds, 0)
    assert fetch(winners).column_names == ["id", "k", "s"]
    assert not set(POSITION_COLUMNS) & set(fetch(winners).column_names)
    assert fetch(pa.table({})).num_columns == 0
