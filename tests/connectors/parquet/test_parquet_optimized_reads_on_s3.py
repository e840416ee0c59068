"""The optimizer's Parquet-specific plans on S3 (moto's server): a top-k read late (keys
first, the winners' other columns after) and a group-by over dictionary-coded string keys
give what pandas gives from the same files."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf
from shardflow.aggregate import Count, Mean, Sum
from shardflow.engine.plan.late_columns import FetchLateColumns
from shardflow.engine.plan.optimizer import optimize


def _write(store, files=3, rows=500):
    rng = np.random.default_rng(11)
    tables = []
    for f in range(files):
        table = pa.table(
            {
                "id": np.arange(f * rows, (f + 1) * rows),
                "v": rng.integers(0, 50, rows) / 4,  # many ties across files
                "s": rng.choice(["pear", "fig", "apple", "kiwi"], rows),
            }
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer, row_group_size=128)
        store.write_bytes(f"t/part-{f}.parquet", buffer.getvalue())
        tables.append(table)
    return pa.concat_tables(tables).to_pandas()


def test_top_k_and_group_by_of_parquet_on_s3(s3_store):
    frame = _write(s3_store)
    ds = sf.read_parquet(s3_store.path("t"), **s3_store.options())
    top = ds.sort(["v", "s"], descending=[False, True]).limit(25)
    assert any(isinstance(op, FetchLateColumns) for op in optimize(top._plan).ops)
    expected = frame.sort_values(["v", "s"], ascending=[True, False], kind="stable").head(25)
    assert top.to_pandas().to_dict("records") == expected.to_dict("records")

    grouped = ds.groupby("s").aggregate(Count(), Sum("v"), Mean("v")).to_pandas()
    assert optimize(ds.groupby("s").count()._plan).ops[0].encoded_keys == ("s",)
    oracle = frame.groupby("s")["v"].agg(["count", "sum", "mean"]).reset_index()
    assert grouped["s"].tolist() == oracle["s"].tolist()
    assert grouped["count()"].tolist() == oracle["count"].tolist()
    assert grouped["sum(v)"].tolist() == oracle["sum"].tolist()
    np.testing.assert_allclose(grouped["mean(v)"], oracle["mean"], rtol=1e-15)


def test_the_page_decoder_reads_s3_files(s3_store, monkeypatch):
    # Arrow's S3 files are NativeFiles: the decoder reads each column chunk with one ranged
    # request and decodes it; the table is Arrow's.
    from shardflow.connectors.parquet import page_decoding

    if not page_decoding.available():
        pytest.skip("the compiled page decoder or cramjam is missing")
    decoded = []
    original = page_decoding.decode_column_chunk

    def spy(*args, **kwargs):
        array = original(*args, **kwargs)
        decoded.append(array is not None)
        return array

    monkeypatch.setattr(page_decoding, "decode_column_chunk", spy)
    frame = _write(s3_store)
    got = sf.read_parquet(s3_store.path("t"), **s3_store.options()).to_pandas()
    assert got.to_dict("records") == frame.to_dict("records")
    assert decoded and all(decoded)  # id, v and s of every row group
