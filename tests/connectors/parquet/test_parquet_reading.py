"""Reading one Parquet file (or a byte range of it) through shardflow.connectors.parquet.reading."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from shardflow.connectors.parquet.reading import (
    open_parquet_fragment,
    read_parquet_fragment,
    row_group_start,
    row_groups_in_split,
)

N = 1000


@pytest.fixture
def parquet_file(tmp_path):
    table = pa.table({"x": np.arange(N), "y": np.arange(N) % 7, "s": [f"s{i}" for i in range(N)]})
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path, row_group_size=128)
    return path, table


def _read(path, **kwargs):
    tables = list(read_parquet_fragment(open_parquet_fragment(path), **kwargs))
    return pa.concat_tables(tables)


def test_reads_everything_by_default(parquet_file):
    path, table = parquet_file
    assert _read(path).equals(table)


def test_columns_and_filter_match_pyarrow(parquet_file):
    path, table = parquet_file
    expr = (pc.field("y") == 3) & (pc.field("x") > 500)
    got = _read(path, columns=["s", "x"], filter=expr)
    assert got.to_pylist() == table.filter(expr).select(["s", "x"]).to_pylist()


def test_filter_skips_row_groups_by_statistics(parquet_file):
    path, _ = parquet_file
    tables = list(read_parquet_fragment(open_parquet_fragment(path), filter=pc.field("x") < 100))
    assert len(tables) == 1 and tables[0].num_rows == 100


def test_deleted_positions_drop_rows_before_the_filter(parquet_file):
    path, table = parquet_file
    deleted = [0, 5, 127, 128, 129, 640, 999, 999]
    keep = np.ones(N, dtype=bool)
    keep[deleted] = False
    expr = pc.field("y") != 0
    got = _read(path, deleted_positions=deleted, filter=expr)
    assert got.to_pylist() == table.filter(pa.array(keep)).filter(expr).to_pylist()


def test_splits_give_every_row_group_once(parquet_file):
    path, table = parquet_file
    size = len(open(path, "rb").read())
    bounds = [0, size // 3, 2 * size // 3, size + 1]
    parts = [_read(path, split=(lo, hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
    assert pa.concat_tables(parts).equals(table)
    metadata = pq.ParquetFile(path).metadata
    assert row_groups_in_split(metadata, None) == list(range(metadata.num_row_groups))
    assert row_group_start(metadata.row_group(1)) > row_group_start(metadata.row_group(0))


def test_nothing_to_read_still_gives_the_schema(parquet_file):
    path, _ = parquet_file
    tables = list(read_parquet_fragment(open_parquet_fragment(path), columns=["s"], row_groups=[]))
    assert len(tables) == 1 and tables[0].num_rows == 0 and tables[0].column_names == ["s"]


def test_plain_reads_match_the_dataset_scanner(parquet_file):
    """Reads without a filter bypass pyarrow.dataset; they must give what the scanner gives."""
    path, table = parquet_file
    fragment = open_parquet_fragment(path)
    assert fragment.plain
    for kwargs in ({}, {"columns": ["s", "x"]}, {"row_groups": [1, 3]}, {"columns": []}):
        plain = pa.concat_tables(read_parquet_fragment(fragment, **kwargs))
        scanned = pa.concat_tables(
            read_parquet_fragment(fragment, filter=pc.scalar(True), **kwargs)
        )
        assert plain.equals(scanned, check_metadata=True), kwargs
    deleted = [3, 200, 999]
    keep = np.ones(N, dtype=bool)
    keep[deleted] = False
    assert _read(path, deleted_positions=deleted).equals(table.filter(pa.array(keep)))


def test_a_schema_other_than_the_files_goes_through_the_scanner(parquet_file):
    path, table = parquet_file
    wider = table.schema.append(pa.field("extra", pa.float64()))
    got = _read(path, schema=wider, columns=["x", "extra"])
    assert got.column("x").equals(table.column("x"))
    assert got.column("extra").null_count == N


def test_a_plain_read_does_not_load_pyarrow_dataset(parquet_file):
    """pyarrow.dataset imports pandas on first load (~0.2 s in a fresh process)."""
    import subprocess
    import sys

    path, _ = parquet_file
    code = (
        "import sys\n"
        "from shardflow.connectors.parquet.reading import open_parquet_fragment, read_parquet_fragment\n"
        f"tables = list(read_parquet_fragment(open_parquet_fragment({path!r}), columns=['x']))\n"
        "assert sum(t.num_rows for t in tables) == 1000\n"
        "print('pyarrow.dataset' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
