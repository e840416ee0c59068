"""The schema of a Parquet read is known from the first file's footer: repr and
schema(fetch_if_missing=False) show the columns without running the read, locally and on S3."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf

TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int32()),
        "name": ["a", "b", "c"],
        "score": pa.array([0.5, 1.0, None], pa.float32()),
        "tags": pa.array([["x"], [], ["y", "z"]], pa.list_(pa.string())),
    }
)


def _write(store, relative):
    buffer = io.BytesIO()
    pq.write_table(TABLE, buffer)
    store.write_bytes(relative, buffer.getvalue())


@pytest.mark.parametrize("where", ["local_store", "s3_store"])
def test_schema_and_repr_without_running(request, where):
    store = request.getfixturevalue(where)
    _write(store, "t/year=2024/part-0.parquet")
    _write(store, "t/year=2025/part-1.parquet")
    ds = sf.read_parquet(store.path("t"), **store.options())
    schema = ds.schema(fetch_if_missing=False)
    # oracle: pyarrow's own reading of the footer, plus the hive partition column
    expected = pq.read_schema(io.BytesIO(_bytes())).append(pa.field("year", pa.string()))
    assert schema is not None
    assert schema.names == expected.names
    assert schema.types == expected.types
    text = repr(ds)
    for name, arrow_type in zip(expected.names, expected.types):
        assert name in text and str(arrow_type) in text
    assert "shape: (?, 5)" in text
    assert ds._last_stats is None  # nothing ran
    # and the rows, once read, have that schema
    read = ds.to_arrow()
    assert read.schema.names == expected.names
    assert read.num_rows == 2 * TABLE.num_rows


def _bytes():
    buffer = io.BytesIO()
    pq.write_table(TABLE, buffer)
    return buffer.getvalue()


def test_projection_path_and_row_hash_columns(tmp_path):
    pq.write_table(TABLE, tmp_path / "f.parquet")
    ds = sf.read_parquet(tmp_path, columns=["name", "id"], include_paths=True)
    schema = ds.schema(fetch_if_missing=False)
    assert schema.names == ["name", "id", "path"]
    assert schema.names == ds.to_arrow().schema.names
    hashed = sf.read_parquet(tmp_path, include_row_hash=True).schema(fetch_if_missing=False)
    assert hashed.names[-1] == "row_hash" and hashed.types[-1] == pa.uint64()


def test_unreadable_first_file_leaves_the_schema_unknown(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    ds = sf.read_parquet(tmp_path)
    assert ds.schema(fetch_if_missing=False) is None
    assert "Unknown schema" in repr(ds)
    with pytest.raises(Exception, match="bad.parquet"):
        ds.take_all()
