"""Where shardflow deliberately differs from ray.data: each test shows both behaviours.

The ``@differs`` registrations feed docs/compatibility.md (tests/compat/gen_compat_table.py).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from harness import differs


@differs(
    "Dataset.write_parquet",
    "Dataset.write_csv",
    "Dataset.write_json",
    "Dataset.write_numpy",
    "Dataset.write_images",
    "SaveMode",
    reason="mode defaults to 'error' (Ray Data: 'append'), so a write never mixes with earlier "
    "output by accident; an existing folder without visible files counts as empty.",
)
def test_default_mode_refuses_existing_data(rd, sfm, tmp_path):
    rd.range(3).write_parquet(str(tmp_path / "ray"))
    rd.range(3).write_parquet(str(tmp_path / "ray"))  # Ray appends by default
    assert rd.read_parquet(str(tmp_path / "ray")).count() == 6

    sfm.range(3).write_parquet(tmp_path / "sf")
    with pytest.raises(ValueError, match="already holds data"):
        sfm.range(3).write_parquet(tmp_path / "sf")
    assert sfm.read_parquet(tmp_path / "sf").count() == 3

    (tmp_path / "empty").mkdir()  # Ray's mode='error' refuses even an empty folder
    sfm.range(2).write_parquet(tmp_path / "empty", mode="error")
    assert sfm.read_parquet(tmp_path / "empty").count() == 2


@differs(
    "Datasink",
    reason="writes are all-or-nothing: files are staged and made visible in on_write_complete; a "
    "failed write leaves the destination as it was (Ray Data leaves the files of tasks that "
    "finished).",
)
def test_failed_write_leaves_nothing(rd, sfm, tmp_path):
    def fail_late(batch):
        if batch["id"].max() >= 8:
            raise RuntimeError("injected failure")
        return batch

    with pytest.raises(Exception, match="injected failure"):
        sfm.range(10, override_num_blocks=5).map_batches(fail_late).write_parquet(
            tmp_path / "sf", mode="append"
        )
    assert not (tmp_path / "sf").exists()


@differs(
    "read_parquet",
    reason="include_row_hash gives deterministic uint64 hashes of (file, row position) whose values "
    "differ from Ray Data's; filter= (a pyarrow expression) is accepted where Ray Data 2.60 "
    "raises ValueError.",
)
def test_row_hash_values_and_filter_argument(rd, sfm, tmp_path):
    import pyarrow.dataset as pads

    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    assert sfm.read_parquet(path, filter=pads.field("a") > 1).count() == 2
    with pytest.raises(ValueError):
        rd.read_parquet(str(path), filter=pads.field("a") > 1)
    ours = [r["row_hash"] for r in sfm.read_parquet(path, include_row_hash=True).take_all()]
    assert len(set(ours)) == 3


@differs(
    "from_items",
    reason="Python objects without an Arrow type become a column of shardflow's own extension type; "
    "pandas shows it as dtype object (Ray Data: its PythonObjectDtype), and a Parquet file "
    "holding it reads back as plain binary cells, never unpickled (Ray Data unpickles them).",
)
def test_object_columns_are_not_unpickled_from_files(sfm, tmp_path):
    from cases_types import Payload

    sfm.from_items([{"o": Payload(1)}]).write_parquet(tmp_path / "o")
    back = sfm.read_parquet(tmp_path / "o").take_all()
    assert isinstance(back[0]["o"], bytes)
    assert str(sfm.from_items([{"o": Payload(1)}]).to_pandas()["o"].dtype) == "object"


class _AddOne:
    def __call__(self, batch):
        return {"id": batch["id"] + 1}


class _CrashingModel:
    def __call__(self, batch):
        import os

        os._exit(7)


@differs(
    "ActorPoolStrategy",
    reason="a crashed actor's inputs are retried on a new actor up to max_retries (default 3; -1 "
    "without end), then the crash surfaces (Ray Data restarts actors without end); on Ray, the "
    "actors of all pools reserve at most every CPU but one, lowering their num_cpus when needed, "
    "so the tasks feeding them always run (Ray Data 2.60 hangs, its issue 44687); a CPU pool "
    "that can use every CPU slot runs the stages feeding it in its actors, a GPU pool never "
    "does; num_cpus, num_gpus and memory below 0 raise ValueError when map_batches is called "
    "(Ray Data accepts them until the pool starts).",
)
def test_actor_pool_retries_are_bounded_and_resources_validated(rd, sfm, tmp_path):
    rd.range(3).map_batches(_AddOne, concurrency=1, num_cpus=-1)  # accepted until it runs
    with pytest.raises(ValueError, match="num_cpus must be >= 0"):
        sfm.range(3).map_batches(_AddOne, concurrency=1, num_cpus=-1)
    with pytest.raises(sfm.WorkerCrashedError):
        sfm.range(2).map_batches(_CrashingModel, concurrency=1, max_retries=1).take_all()
    assert [r["id"] for r in sfm.range(3).map_batches(_AddOne, concurrency=1).take_all()] == [
        1,
        2,
        3,
    ]


def test_json_lines_keep_arrows_types_with_lines_true(rd, sfm, tmp_path):
    """Listed in docs/compatibility.md's behaviour differences: Ray Data 2.60 reads
    ``read_json(lines=True)`` through pandas (integers with nulls become doubles, strings
    large_string); shardflow reads JSON Lines with Arrow's types whether or not ``lines`` is
    given, as Ray Data does without it."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1, "s": "x", "n": null}\n{"a": 2, "s": "y", "n": 3}\n')
    ray_lines = rd.read_json(str(path), lines=True).take_batch(10, batch_format="pyarrow")
    ray_plain = rd.read_json(str(path)).take_batch(10, batch_format="pyarrow")
    assert ray_lines.schema.field("n").type == pa.float64()
    assert ray_lines.schema.field("s").type == pa.large_string()
    assert ray_plain.schema.field("n").type == pa.int64()
    for lines in (True, None):
        ours = sfm.read_json(path, lines=lines).take_batch(10, batch_format="pyarrow")
        assert ours.schema.types == ray_plain.schema.types
        assert ours.to_pylist() == ray_plain.to_pylist()


@differs(
    "Dataset.write_parquet",
    reason="the encodings differ, not the data: dictionaries only for strings and repetitive "
    "columns, and with snappy, columns of numbers snappy cannot shrink are stored uncompressed "
    "(Ray Data, through pyarrow's defaults, dictionary-encodes and compresses every column); "
    "flat tables of common types are written by shardflow's own Parquet writer.",
)
def test_parquet_encodings_and_codecs_per_column(rd, sfm, tmp_path):
    import numpy as np

    rng = np.random.default_rng(1)
    n = 20_000
    table = pa.table(
        {"id": np.arange(n), "x": rng.random(n), "name": [f"n{i % 9}" for i in range(n)]}
    )
    chunks, writers = {}, {}
    for name, module in (("ray", rd), ("sf", sfm)):
        folder = tmp_path / name
        module.from_arrow(table).write_parquet(str(folder))
        assert pq.read_table(folder).sort_by("id").equals(table)
        (path,) = folder.glob("*.parquet")
        metadata = pq.ParquetFile(path).metadata
        writers[name] = metadata.created_by.split(" version")[0]
        row_group = metadata.row_group(0)
        chunks[name] = {
            row_group.column(i).path_in_schema: (
                "RLE_DICTIONARY" in row_group.column(i).encodings,
                row_group.column(i).compression,
            )
            for i in range(row_group.num_columns)
        }
    assert chunks["ray"] == {
        "id": (True, "SNAPPY"),
        "x": (True, "SNAPPY"),
        "name": (True, "SNAPPY"),
    }
    assert chunks["sf"] == {
        "id": (False, "SNAPPY"),
        "x": (False, "UNCOMPRESSED"),
        "name": (True, "SNAPPY"),
    }
    assert writers == {"ray": "parquet-cpp-arrow", "sf": "shardflow"}


@differs(
    "from_pandas",
    reason="a DataFrame with duplicate column names raises ValueError naming them when from_pandas "
    "is called (Ray Data raises an AttributeError from inside a task when the data is used).",
)
def test_from_pandas_refuses_duplicate_column_names(rd, sfm):
    import pandas as pd

    frame = pd.DataFrame([[1, 2, 3]], columns=["a", "a", "b"])
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        sfm.from_pandas(frame)
    with pytest.raises(Exception) as raised:
        rd.from_pandas(frame).take_all()
    assert "AttributeError" in repr(raised.value) or isinstance(raised.value, AttributeError)


@differs(
    "read_parquet",
    "read_csv",
    "read_json",
    reason="a path that does not exist but holds glob characters (*, ?, [) is expanded as a glob "
    "(Ray Data: FileNotFoundError); a path that exists is always read as written, as Ray Data does "
    "(also one with '?' in a name, which Ray Data 2.60 cuts at the '?': FileNotFoundError).",
)
def test_glob_patterns_are_expanded_when_no_such_path_exists(rd, sfm, tmp_path):
    for name in ("a.parquet", "b.parquet"):
        pq.write_table(pa.table({"x": [1]}), tmp_path / name)
    pattern = str(tmp_path / "*.parquet")
    assert sfm.read_parquet(pattern).count() == 2
    with pytest.raises(FileNotFoundError):
        rd.read_parquet(pattern).count()
    (tmp_path / "q?").mkdir()
    pq.write_table(pa.table({"x": [1]}), tmp_path / "q?" / "f.parquet")
    assert sfm.read_parquet(str(tmp_path / "q?")).count() == 1
    with pytest.raises(FileNotFoundError):  # Ray Data cuts the path at the '?'
        rd.read_parquet(str(tmp_path / "q?")).count()


@differs(
    "extensions.ArrowTensorType",
    "extensions.ArrowTensorTypeV2",
    "extensions.FixedShapeTensorFormat",
    "DataContext.arrow_fixed_shape_tensor_format",
    reason="tensor columns are always Arrow's canonical fixed_shape_tensor / "
    "variable_shape_tensor types, which Ray Data gives with "
    "arrow_fixed_shape_tensor_format = FixedShapeTensorFormat.ARROW_NATIVE (the default here; "
    "Ray Data's default, V2, is an extension type of its own, ArrowTensorTypeV2), so files stay "
    "readable by other Arrow tools. ArrowTensorType(shape, dtype) and ArrowTensorTypeV2(...) "
    "build the canonical type, and isinstance() with either holds for every fixed-shape tensor "
    "type; setting V1 or V2 warns that nothing changes.",
)
def test_tensor_columns_are_arrows_canonical_type(rd, sfm):
    import numpy as np
    import ray.data.extensions as ray_ext

    import shardflow.extensions as sf_ext

    data = np.zeros((2, 3, 4), dtype=np.float32)
    ray_type = rd.from_numpy(data).schema().types[0]
    assert isinstance(ray_type, ray_ext.ArrowTensorTypeV2)
    assert str(ray_type) == "ArrowTensorTypeV2(shape=(3, 4), dtype=float)"
    ours = sfm.from_numpy(data).schema().types[0]
    assert ours == pa.fixed_shape_tensor(pa.float32(), (3, 4))
    assert isinstance(ours, sf_ext.ArrowTensorType) and isinstance(ours, sf_ext.ArrowTensorTypeV2)
    assert sf_ext.ArrowTensorType((3, 4), pa.float32()) == ours
    context = sfm.DataContext.get_current()
    assert context.arrow_fixed_shape_tensor_format is sf_ext.FixedShapeTensorFormat.ARROW_NATIVE
    from shardflow.engine.api.execution_options import _warned

    _warned.discard("DataContext.arrow_fixed_shape_tensor_format")  # warned once per process
    with pytest.warns(UserWarning, match="no effect"):
        context.arrow_fixed_shape_tensor_format = sf_ext.FixedShapeTensorFormat.V2
    assert sfm.from_numpy(data).schema().types[0] == ours
