"""Arguments found wrong by probing as a hostile user: each is refused at the call with a message
naming the argument and what to do, or read as the user meant it."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf


def test_from_pandas_names_duplicate_columns():
    frame = pd.DataFrame([[1, 2, 3, 4]], columns=["a", "b", "a", "b"])
    with pytest.raises(ValueError, match=r"duplicate column names \['a', 'b'\]"):
        sf.from_pandas(frame)
    with pytest.raises(ValueError, match=r"\['x'\]"):
        sf.from_pandas([pd.DataFrame({"y": [1]}), pd.DataFrame([[1, 2]], columns=["x", "x"])])


@pytest.mark.parametrize("concurrency", [0, -2])
def test_concurrency_below_one_names_concurrency(concurrency):
    class Identity:
        def __call__(self, batch):
            return batch

    ds = sf.range(4)
    for call in (
        lambda: ds.map_batches(lambda b: b, concurrency=concurrency),
        lambda: ds.map_batches(Identity, concurrency=concurrency),
        lambda: ds.map(lambda r: r, concurrency=concurrency),
        lambda: ds.filter(lambda r: True, concurrency=concurrency),
    ):
        with pytest.raises(ValueError, match=f"concurrency must be >= 1.*got {concurrency}") as e:
            call()
        assert "TaskPoolStrategy" not in str(e.value)


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_paths_with_glob_characters_are_literal_when_they_exist(kind, tmp_path, request):
    if kind == "local":
        root, options = str(tmp_path), {}
    else:
        root = request.getfixturevalue("s3_bucket")
        options = {"storage_options": request.getfixturevalue("s3_options")}
    table = pa.table({"x": [1, 2, 3]})
    import fsspec

    fs, _ = fsspec.core.url_to_fs(root, **options.get("storage_options", {}))
    for name in ("br[1]", "b[12]", "star*", "q?"):
        folder = f"{root}/{name}"
        fs.makedirs(folder, exist_ok=True)
        with fs.open(f"{folder}/part.parquet", "wb") as f:
            pq.write_table(table, f)
        assert sf.read_parquet(folder, **options).take_all() == table.to_pylist()
        assert sf.read_parquet([f"{folder}/part.parquet"], **options).count() == 3
    # A pattern that names no existing path is still expanded as a glob.
    assert sf.read_parquet(f"{root}/*/part.parquet", **options).count() == 12
