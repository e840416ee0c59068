"""Where shardflow deliberately differs from ray.data: each test shows both behaviours.

The ``@differs`` registrations feed docs/compatibility.md (tests/compat/gen_compat_table.py).
"""

from __future__ import annotations

import numpy as np
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
    reason="Python objects without an Arrow type become a column of shardflow's own extension type "
    "(in pandas a PythonObjectArray of dtype python_object(), as in Ray Data), and a Parquet "
    "file holding it reads back as plain binary cells, never unpickled (Ray Data unpickles "
    "them).",
)
def test_object_columns_are_not_unpickled_from_files(sfm, tmp_path):
    from cases_types import Payload

    sfm.from_items([{"o": Payload(1)}]).write_parquet(tmp_path / "o")
    back = sfm.read_parquet(tmp_path / "o").take_all()
    assert isinstance(back[0]["o"], bytes)
    assert str(sfm.from_items([{"o": Payload(1)}]).to_pandas()["o"].dtype) == "python_object()"


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


@differs(
    "Dataset.write_lance",
    reason="writes with pylance 14, committing once; Ray Data 2.60's write_lance fails with pylance "
    "14 (TypeError: it passes storage_options_provider, which write_fragments no longer takes). A "
    "write of no rows with a known schema commits an empty dataset (Ray Data commits nothing). "
    "Lance namespaces (table_id, namespace_impl) are not taken.",
)
def test_write_lance_works_with_pylance_14_and_ray_reads_it(rd, sfm, tmp_path):
    lance = pytest.importorskip("lance")
    table = pa.table({"id": list(range(20)), "name": [f"n{i}" for i in range(20)]})
    with pytest.raises(Exception, match="storage_options_provider"):
        rd.from_arrow(table).write_lance(str(tmp_path / "ray.lance"))
    uri = str(tmp_path / "sf.lance")
    sfm.from_arrow(table).write_lance(uri)
    assert lance.dataset(uri).version == 1
    assert sorted(rd.read_lance(uri).take_all(), key=lambda r: r["id"]) == table.to_pylist()
    sfm.from_arrow(table.slice(0, 0)).write_lance(str(tmp_path / "empty.lance"))
    assert lance.dataset(str(tmp_path / "empty.lance")).count_rows() == 0


@differs(
    "read_lance",
    reason="filter= (a SQL WHERE clause) is not deprecated and combines with Dataset.filter(expr=...) "
    "(Ray Data warns it is deprecated); scanner_options may not set columns, filter, limit, offset, "
    "fragments or with_row_id; unknown columns= raise ValueError at the call (Ray Data: when read).",
)
def test_read_lance_filter_argument_and_checks(rd, sfm, tmp_path):
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(pa.table({"id": list(range(10))}), uri)
    with pytest.warns(DeprecationWarning):
        rd.read_lance(uri, filter="id < 3")
    assert sfm.read_lance(uri, filter="id < 3").filter(expr=sfm.col("id") > 0).count() == 2
    with pytest.raises(ValueError, match="scanner_options"):
        sfm.read_lance(uri, scanner_options={"fragments": []})
    with pytest.raises(ValueError, match="not found"):
        sfm.read_lance(uri, columns=["missing"])


@differs(
    "read_audio",
    reason="a file soundfile cannot decode raises ValueError naming the file and libsndfile's reason "
    "(Ray Data raises soundfile's LibsndfileError); on_bad_file='skip' skips and counts it.",
)
def test_read_audio_bad_file_error(rd, sfm, tmp_path):
    pytest.importorskip("soundfile")
    (tmp_path / "broken.wav").write_bytes(b"RIFF garbage")
    with pytest.raises(ValueError, match=r"broken\.wav.*cannot decode it as audio"):
        sfm.read_audio(str(tmp_path)).take_all()
    with pytest.raises(Exception, match="Format not recognised"):
        rd.read_audio(str(tmp_path)).take_all()
    assert sfm.read_audio(str(tmp_path), on_bad_file="skip").count() == 0


@differs(
    "read_videos",
    reason="frames are decoded with PyAV (FFmpeg) rather than decord: the same frames, indices and "
    "timestamps, but with resize= the pixel values may differ by a few levels (decord scales before "
    "converting to RGB; both use FFmpeg's bicubic scaler). An MP4/MOV file is cut into time ranges "
    "read by several tasks. A file FFmpeg cannot open raises ValueError naming it (Ray Data: "
    "decord's DECORDError).",
)
def test_read_videos_resize_values_and_bad_files(rd, sfm, tmp_path):
    av = pytest.importorskip("av")
    pytest.importorskip("decord")
    import numpy as np

    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=24)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "yuv420p"
        for i in range(4):
            image = np.zeros((96, 128, 3), np.uint8)
            image[:, 8 * i :, 0] = 200
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    ours = sfm.read_videos(str(path), resize=(48, 64)).take(1)[0]["frame"].astype(int)
    theirs = rd.read_videos(str(path), resize=(48, 64)).take(1)[0]["frame"].astype(int)
    assert ours.shape == theirs.shape == (48, 64, 3)
    assert np.abs(ours - theirs).max() <= 40 and np.abs(ours - theirs).mean() < 4
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    with pytest.raises(ValueError, match=r"broken\.mp4"):
        sfm.read_videos(str(tmp_path / "broken.mp4")).take_all()


def _movies(path, rows):
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE movie (id INTEGER PRIMARY KEY, title TEXT)")
        connection.executemany("INSERT INTO movie VALUES (?, ?)", rows)
    connection.close()


@differs(
    "read_sql",
    reason="the default shard_hash_fn='MD5' shards PostgreSQL (hashtextextended) and SQLite (a "
    "function registered on the connection) where Ray Data raises or falls back to one task; rows "
    "whose shard keys are NULL are read (Ray Data's MOD(ABS(hash(keys)), n) drops them); columns are "
    "typed from the cursor's description; read tasks claim no row counts they do not know.",
)
def test_read_sql_shards_sqlite_and_keeps_null_keys(rd, sfm, tmp_path):
    import functools
    import sqlite3

    path = str(tmp_path / "db.sqlite")
    _movies(path, [(i, None if i % 4 == 0 else f"t{i % 3}") for i in range(200)])
    connect = functools.partial(sqlite3.connect, path)
    with pytest.raises(ValueError, match="does not support sharding"):
        rd.read_sql("SELECT * FROM movie", connect, shard_keys=["title"], override_num_blocks=2)
    ds = sfm.read_sql("SELECT * FROM movie", connect, shard_keys=["title"], override_num_blocks=2)
    assert sorted(r["id"] for r in ds.take_all()) == list(range(200))


@differs(
    "Dataset.write_sql",
    reason="a plain INSERT ... VALUES is all or nothing: tasks write into a staging table whose rows "
    "move into the target in one transaction at the end, so a failed write leaves the table as it "
    "was (Ray Data commits each task's rows on its own, in batches of 128); atomic= is added.",
)
def test_write_sql_is_all_or_nothing(rd, sfm, tmp_path):
    import functools
    import sqlite3

    def fail_late(batch):
        if batch["id"].max() >= 80:
            raise RuntimeError("injected failure")
        return batch

    results = {}
    for name, m in (("ray", rd), ("sf", sfm)):
        path = str(tmp_path / f"{name}.sqlite")
        _movies(path, [])
        connect = functools.partial(sqlite3.connect, path)
        ds = m.from_items(
            [{"id": i, "title": "t"} for i in range(100)], override_num_blocks=5
        ).map_batches(fail_late)
        with pytest.raises(Exception, match="injected failure"):
            ds.write_sql("INSERT INTO movie VALUES (?, ?)", connect)
        results[name] = connect().execute("SELECT count(*) FROM movie").fetchone()[0]
    assert results["sf"] == 0
    assert results["ray"] >= 0  # the rows of Ray Data's tasks that finished stay (often 80)


@differs(
    "Dataset.write_delta",
    reason="a write is exactly one Delta commit: a column the table lacks raises (Ray Data's default "
    "schema_mode='merge' adds it in a commit of its own first; schema_mode is not taken); "
    "partition_cols is also taken as deltalake's older name of partition_by.",
)
def test_write_delta_does_not_evolve_the_schema(rd, sfm, tmp_path):
    from deltalake import DeltaTable

    for name, m in (("ray", rd), ("sf", sfm)):
        path = str(tmp_path / name)
        m.from_items([{"id": 1}]).write_delta(path)
        wider = m.from_items([{"id": 2, "extra": "x"}])
        if m is rd:
            wider.write_delta(path)
            assert DeltaTable(path).version() == 2  # a schema commit, then the data commit
        else:
            with pytest.raises(ValueError, match="not in the table"):
                wider.write_delta(path)
            assert DeltaTable(path).version() == 0


@differs(
    "read_delta",
    reason="filter= (a shardflow or pyarrow expression) is added and pushed into the scan with "
    "partition and statistics pruning; filesystem, catalog, shuffle, include_paths and "
    "**arrow_parquet_args are not taken.",
)
def test_read_delta_filter(rd, sfm, tmp_path):
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3], "day": ["a", "b", "b"]}), partition_by=["day"])
    assert sfm.read_delta(path, filter=sfm.col("day") == "b").count() == 2
    assert rd.read_delta(path).count() == 3


@differs(
    "read_hudi",
    reason="filters select rows exactly (Ray Data prunes partitions with them and keeps every row of "
    "the files it reads, so a filter on another column keeps every row), and a filter on a column "
    "the table lacks raises ValueError; a missing table raises FileNotFoundError and a table or "
    "file hudi cannot read a ValueError naming it (Ray Data: hudi's HudiCoreError); a relative "
    "path is taken; hudi 0.5 works too (Ray Data 2.60 calls hudi 0.4's API). The Ray task "
    "arguments are checked and not applied.",
)
def test_read_hudi_filters_rows_and_names_the_table(rd, sfm, tmp_path):
    from shardflow.connectors.hudi.sample_tables import SampleHudiTable

    table = SampleHudiTable(tmp_path / "t", partition_field="city")
    table.commit(pa.table({"id": [1, 2, 3], "city": ["a", "a", "b"], "fare": [1.0, 5.0, 9.0]}))
    cheap = [("fare", "<", "2")]
    assert sorted(r["id"] for r in rd.read_hudi(table.path, filters=cheap).take_all()) == [1, 2, 3]
    assert [r["id"] for r in sfm.read_hudi(table.path, filters=cheap).take_all()] == [1]

    missing = str(tmp_path / "missing")
    with pytest.raises(Exception, match="hoodie.properties") as info:
        rd.read_hudi(missing).take_all()
    assert type(info.value).__name__ == "HudiCoreError"
    with pytest.raises(FileNotFoundError, match="No Hudi table at .*missing"):
        sfm.read_hudi(missing).take_all()


# -- WebDataset, TFRecords, Avro ---------------------------------------------------------------


@differs(
    "Dataset.write_webdataset",
    "Dataset.write_tfrecords",
    reason="mode defaults to 'error' (Ray Data: 'append'), and writes are all-or-nothing.",
)
def test_format_writes_refuse_existing_data_by_default(rd, sfm, tmp_path):
    rows = [{"__key__": f"k{i}", "cls": i} for i in range(3)]
    rd.from_items(rows).write_webdataset(str(tmp_path / "ray"))
    rd.from_items(rows).write_webdataset(str(tmp_path / "ray"))  # Ray appends
    assert rd.read_webdataset(str(tmp_path / "ray")).count() == 6
    sfm.from_items(rows).write_webdataset(str(tmp_path / "sf"))
    with pytest.raises(ValueError, match="already holds data"):
        sfm.from_items(rows).write_webdataset(str(tmp_path / "sf"))
    sfm.range(2).write_tfrecords(str(tmp_path / "tfr"))
    with pytest.raises(ValueError, match="already holds data"):
        sfm.range(2).write_tfrecords(str(tmp_path / "tfr"))


@differs(
    "read_webdataset",
    reason="blocks are Arrow tables built from the samples, so the schema shows Arrow types "
    "(struct for .json, binary for raw members; Ray Data's pandas blocks show object); a "
    "decoder's one-element list stays a list (Ray Data unwraps it); columns no longer needed "
    "after select_columns are not decoded.",
)
def test_webdataset_schema_is_arrow_types(rd, sfm, tmp_path):
    import io
    import json
    import tarfile

    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for name, data in [("a.json", json.dumps({"x": [1]}).encode()), ("a.raw", b"\x00")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = str(tmp_path / "s.tar")
    sf_types = dict(
        zip(sfm.read_webdataset(path).schema().names, sfm.read_webdataset(path).schema().types)
    )
    assert sf_types["json"] == pa.struct([("x", pa.list_(pa.int64()))])
    assert sf_types["raw"] == pa.binary()
    ray_schema = rd.read_webdataset(path).schema()
    ray_types = dict(zip(ray_schema.names, ray_schema.types))
    assert "object" in str(ray_types["raw"])
    one = lambda sample: {**sample, "raw": [sample["raw"]]}  # noqa: E731
    assert sfm.read_webdataset(path, decoder=[True, one]).take_all()[0]["raw"] == [b"\x00"]
    assert rd.read_webdataset(path, decoder=[True, one]).take_all()[0]["raw"] == b"\x00"


@differs(
    "read_tfrecords",
    reason="both checksums of every record are verified: a corrupt record raises an error naming "
    "the file, the record and its byte offset (Ray Data reads it); columns are sorted by feature "
    "name (Ray Data's order changes from process to process); TensorFlow is not needed, and "
    "tf_schema may also be a dict of feature name to 'bytes', 'int' or 'float'; with tf_schema "
    "every declared feature is a column; a feature empty in every record of a block is a list of "
    "its kind when the records say it (Ray Data: list<null>).",
)
def test_tfrecords_checksums_are_verified(rd, sfm, tmp_path):
    pytest.importorskip("tensorflow")
    from shardflow.connectors.tfrecords.example_proto import example_class
    from shardflow.connectors.tfrecords.framing import frame_record

    example = example_class()()
    example.features.feature["a"].int64_list.value.append(7)
    data = bytearray(frame_record(example.SerializeToString()))
    data[-1] ^= 0xFF  # the data's checksum, which Ray Data does not check
    (tmp_path / "x.tfrecords").write_bytes(bytes(data))
    path = str(tmp_path / "x.tfrecords")
    assert rd.read_tfrecords(path).take_all() == [{"a": 7}]
    with pytest.raises(ValueError, match="record 0 at byte offset 0: the checksum of its"):
        sfm.read_tfrecords(path).take_all()


@differs(
    "Dataset.write_tfrecords",
    reason="files end in .tfrecords (Ray Data 2.60 names them .tar); features are written sorted "
    "by name; TensorFlow and crc32c are not needed.",
)
def test_tfrecords_files_are_named_tfrecords(rd, sfm, tmp_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("crc32c")
    rd.range(3).write_tfrecords(str(tmp_path / "ray"))
    sfm.range(3).write_tfrecords(str(tmp_path / "sf"))
    assert {p.suffix for p in (tmp_path / "ray").iterdir()} == {".tar"}
    assert {p.suffix for p in (tmp_path / "sf").iterdir()} == {".tfrecords"}


@differs(
    "read_avro",
    reason="column types come from the file's Avro schema (Ray Data infers them from the values): "
    "a map is map<string, ...> (Ray Data: a struct of the keys seen), a decimal has the schema's "
    "precision and a timestamp its unit, a field null in every record keeps its type, a union "
    "of types of one Arrow type has that type, and an empty file has its schema.",
)
def test_avro_types_come_from_the_schema(rd, sfm, tmp_path):
    import decimal

    import fastavro

    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "n", "type": ["null", "string"]},
        ],
    }
    with open(tmp_path / "x.avro", "wb") as f:
        fastavro.writer(f, schema, [{"m": {"a": 1}, "d": decimal.Decimal("1.50"), "n": None}])
    path = str(tmp_path / "x.avro")
    sf_schema = sfm.read_avro(path).schema()
    assert list(sf_schema.types) == [
        pa.map_(pa.string(), pa.int64()),
        pa.decimal128(9, 2),
        pa.string(),
    ]
    ray_types = [str(t) for t in rd.read_avro(path).schema().types]
    assert ray_types == ["struct<a: int64>", "decimal128(3, 2)", "null"]


@differs(
    "DataContext.debug_limit_shuffle_execution_to_num_blocks",
    reason="set_config('debug_limit_shuffle_execution_to_num_blocks', n) makes random_shuffle "
    "shuffle the rows of its first n input blocks, as the setting's name says; Ray Data 2.60 "
    "(with the sort-based shuffle) returns no rows at all. Sorts, aggregations and "
    "repartitions ignore it here.",
)
def test_debug_limit_shuffles_the_first_blocks(rd, sfm):
    def limited(m):
        context = m.DataContext.get_current()
        context.set_config("debug_limit_shuffle_execution_to_num_blocks", 2)
        try:
            return sorted(
                r["id"] for r in m.range(8, override_num_blocks=4).random_shuffle(seed=1).take_all()
            )
        finally:
            context.remove_config("debug_limit_shuffle_execution_to_num_blocks")

    assert limited(rd) == []
    assert limited(sfm) == [0, 1, 2, 3]


@differs(
    "from_dask",
    reason="the partitions are computed when the dataset runs, one read task each, so they "
    "stream under the memory budget (Ray Data computes the whole frame when from_dask is "
    "called); blocks are Arrow tables, so pandas string columns are large_string and "
    "to_pandas gives ArrowDtype columns (Ray Data keeps the pandas partitions as blocks).",
)
def test_from_dask_is_lazy_and_arrow(rd, sfm):
    pytest.importorskip("dask.dataframe")
    import dask.dataframe as dd
    import pandas as pd

    calls = []

    def mark(frame):
        calls.append(len(frame))
        return frame

    ddf = dd.from_pandas(pd.DataFrame({"a": range(6), "s": list("abcdef")}), npartitions=2)
    ddf = ddf.map_partitions(mark, meta=ddf._meta)
    ours = sfm.from_dask(ddf)
    assert calls == []  # nothing computed yet
    assert [r["a"] for r in ours.take_all()] == list(range(6))
    assert ours.schema().base_schema.field("s").type == pa.large_string()
    theirs = rd.from_dask(ddf)
    assert [r["a"] for r in theirs.take_all()] == list(range(6))
    assert isinstance(next(iter(theirs.iter_batches(batch_format=None))), pd.DataFrame)


@differs(
    "from_tf",
    reason="the elements are read when the dataset runs, by one streaming task in the driver "
    "(Ray Data loads every element when from_tf is called).",
)
def test_from_tf_is_lazy(rd, sfm):
    tf = pytest.importorskip("tensorflow")

    seen = []

    def note(x):
        seen.append(1)
        return x

    data = tf.data.Dataset.range(5).map(lambda x: tf.py_function(note, [x], tf.int64))
    ours = sfm.from_tf(data)
    assert seen == []
    assert [r["item"] for r in ours.take_all()] == list(range(5))
    assert [r["item"] for r in rd.from_tf(data).take_all()] == list(range(5))


@differs(
    "Dataset.to_torch",
    "DataIterator.to_torch",
    reason="kept on Dataset and DataIterator (Ray Data 2.60 has only the deprecated "
    "DataIterator.to_torch, to be removed after October 2026), and its IterableDataset may be "
    "read by a torch DataLoader with several workers, each reading its share of the read "
    "tasks, so every row comes once per epoch (Ray Data's repeats the whole dataset in every "
    "worker); an empty feature column list raises when to_torch is called (Ray Data: when "
    "iterated).",
)
def test_to_torch_shares_rows_among_dataloader_workers(rd, sfm):
    torch = pytest.importorskip("torch")

    ds = sfm.range(40, override_num_blocks=4).to_torch(batch_size=5)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    ids = sorted(int(v) for features, _ in loader for v in features.flatten())
    assert ids == list(range(40))
    assert not hasattr(rd.range(8), "to_torch")
    theirs = rd.range(8, override_num_blocks=2).iterator().to_torch(batch_size=4)
    assert sum(len(f) for f, _ in theirs) == 8
    rd.range(2).iterator().to_torch(feature_columns={"x": []})  # no error until iterated
    with pytest.raises(ValueError, match="may not be empty"):
        sfm.range(2).iterator().to_torch(feature_columns={"x": []})


@differs(
    "from_spark",
    "Dataset.to_spark",
    "from_modin",
    "Dataset.to_modin",
    reason="work with any SparkSession and any Modin engine (Ray Data needs RayDP for Spark and "
    "Modin on Ray); from_spark streams Spark's Arrow batches through the driver one partition "
    "at a time, to_spark stages Parquet files that Spark's executors read "
    "(tests/engine/api/interop/).",
)
def test_spark_and_modin_need_no_ray_plugins(rd, sfm):
    pytest.importorskip("pyspark")
    with pytest.raises(Exception):  # noqa: B017 (without RayDP Ray Data cannot start)
        rd.from_spark(object())
    with pytest.raises(TypeError, match="pyspark.sql.DataFrame"):
        sfm.from_spark(object())


@differs(
    "Dataset.write_orc",
    reason="mode defaults to 'error' (Ray Data: 'append'), as for the other file writes; "
    "writes are all-or-nothing.",
)
def test_write_orc_default_mode_refuses_existing_data(rd, sfm, tmp_path):
    rd.range(3).write_orc(str(tmp_path / "ray"))
    rd.range(3).write_orc(str(tmp_path / "ray"))  # Ray appends by default
    assert rd.read_orc(str(tmp_path / "ray")).count() == 6

    sfm.range(3).write_orc(tmp_path / "sf")
    with pytest.raises(ValueError, match="already holds data"):
        sfm.range(3).write_orc(tmp_path / "sf")
    assert sfm.read_orc(tmp_path / "sf").count() == 3


@differs(
    "read_zarr",
    reason="arrays stored big-endian (dtype '>i4', ...) are read as their values, in native "
    "byte order (Ray Data 2.60 reinterprets their bytes as native: 1 reads as 16777216).",
)
def test_read_zarr_big_endian_values(rd, sfm, tmp_path):
    zarr = pytest.importorskip("zarr")
    values = np.arange(4, dtype=">i4")
    zarr.save_array(str(tmp_path / "big.zarr"), values, chunks=(4,))

    (row,) = sfm.read_zarr(str(tmp_path / "big.zarr")).take_all()
    np.testing.assert_array_equal(row["chunk"], values)
    assert row["chunk"].dtype == np.dtype("int32")

    (ray_row,) = rd.read_zarr(str(tmp_path / "big.zarr")).take_all()
    np.testing.assert_array_equal(ray_row["chunk"], np.frombuffer(values.tobytes(), "<i4"))


@differs(
    "read_zarr",
    reason="a chunk whose read fails (a throttled or dropped request) is retried, then raised, "
    "naming the store and the array; only a chunk that does not exist reads as the fill value "
    "(Ray Data 2.60, through zarr's fsspec store, reads any failed chunk as the fill value).",
)
def test_read_zarr_failed_chunk_reads_raise(rd, sfm, tmp_path, fresh_context):
    zarr = pytest.importorskip("zarr")
    from fsspec.implementations.local import LocalFileSystem

    fresh_context.retry = sfm.RetryPolicy(max_attempts=2, initial_backoff_s=0.001)

    class FailingChunks(LocalFileSystem):  # defined here: Ray's workers get it by value
        cachable = False

        def _open(self, path, mode="rb", **kwargs):
            if not path.rsplit("/", 1)[-1].startswith("."):
                raise OSError(f"AWS Error SLOW_DOWN during GetObject operation ({path})")
            return super()._open(path, mode, **kwargs)

    zarr.save_array(str(tmp_path / "s.zarr"), np.arange(1, 5), chunks=(4,))
    zarr.consolidate_metadata(str(tmp_path / "s.zarr"))
    with pytest.raises(OSError, match="SLOW_DOWN"):
        sfm.read_zarr(str(tmp_path / "s.zarr"), filesystem=FailingChunks()).take_all()

    # Ray Data's chunk reader over the store as its ZarrV2Datasource opens it (a filesystem
    # like this one cannot be sent to Ray's workers): the fill value, and no error.
    from ray.data._internal.datasource.zarrv2_datasource import _read_chunk

    root = zarr.open_consolidated(FailingChunks().get_mapper(str(tmp_path / "s.zarr")), mode="r")
    assert _read_chunk(root, "", ((0, 4),)).tolist() == [0, 0, 0, 0]


@differs(
    "expressions.UnaryExpr",
    "expressions.BinaryExpr",
    reason="an operation that does not fit the node (UnaryExpr(Operation.ADD, x), "
    "BinaryExpr(Operation.NOT, x, y)) raises ValueError when the expression is built, naming "
    "the operations that fit (Ray Data accepts it and fails when the dataset runs).",
)
def test_expression_nodes_check_their_operation(rd, sfm):
    import ray.data.expressions as ray_expressions

    import shardflow.expressions as sf_expressions

    ray_add = ray_expressions.UnaryExpr(ray_expressions.Operation.ADD, ray_expressions.col("id"))
    with pytest.raises(Exception):  # noqa: B017 (a UserCodeException when the dataset runs)
        rd.range(2).with_column("c", ray_add).take_all()
    with pytest.raises(ValueError, match="not a unary operation"):
        sf_expressions.UnaryExpr(sf_expressions.Operation.ADD, sf_expressions.col("id"))
    with pytest.raises(ValueError, match="not a binary operation"):
        sf_expressions.BinaryExpr(
            sf_expressions.Operation.NOT, sf_expressions.col("id"), sf_expressions.lit(1)
        )


@differs(
    "expressions.random",
    reason="with a seed and reseed_after_execution=True (the default), execution k draws numpy's "
    "default_rng([block, task, k, seed]), as in Ray Data, but k counts the executions of the "
    "random() expression (every dataset using it), where Ray Data counts those of the Dataset "
    "(a dataset derived from another starts from the other's count). Executing one dataset "
    "again and again gives Ray Data's numbers; with reseed_after_execution=False they are "
    "always Ray Data's (cases: random_with_a_fixed_seed). A seed that is not a non-negative "
    "int raises TypeError when random() is called (Ray Data fails when the dataset runs).",
)
def test_random_reseeds_by_the_expressions_own_executions(rd, sfm):
    import numpy as np
    import ray.data.expressions as ray_expressions

    import shardflow.expressions as sf_expressions

    def draws(m, expr):
        ds = m.from_items([{"i": i} for i in range(3)], override_num_blocks=1)
        ds = ds.with_column("r", expr)
        return [[row["r"] for row in ds.take_all()] for _ in range(2)]

    expected = [list(np.random.default_rng([0, 0, k, 11]).random(3)) for k in range(4)]
    ray_random = ray_expressions.random(seed=11)
    assert draws(rd, ray_random) == expected[:2]  # one dataset: executions 0 and 1
    assert draws(rd, ray_random) == expected[:2]  # a new dataset counts from 0 again
    sf_random = sf_expressions.random(seed=11)
    assert draws(sfm, sf_random) == expected[:2]
    assert draws(sfm, sf_random) == expected[2:]  # the expression's executions 2 and 3
    ray_expressions.random(seed=-1)  # accepted until a dataset runs it
    with pytest.raises(TypeError, match="non-negative int"):
        sf_expressions.random(seed=-1)


@differs(
    "Dataset.context",
    reason="is the DataContext that was current when the dataset was created, not a copy of "
    "it (Ray Data gives each new dataset a copy, which its executions then use); shardflow's "
    "executions take their settings from DataContext.get_current(), so a setting changed on "
    "ds.context applies to every dataset. Datasets derived from one share its context in both.",
)
def test_dataset_context_is_the_current_context(rd, sfm):
    assert rd.range(3).context is not rd.DataContext.get_current()
    ds = sfm.range(3)
    assert ds.context is sfm.DataContext.get_current()
    assert ds.map(lambda r: r).context is ds.context
    assert isinstance(rd.range(3).context, rd.DataContext)


@differs(
    "Dataset.explain",
    reason="prints the same four sections (logical plan, optimized logical plan, physical plan, "
    "optimized physical plan) as trees laid out as Ray Data's, with shardflow's operators "
    "(ReadSource[ReadRange], MapOperator[ReadRange->Map(<lambda>)], ...), whose names and "
    "fusion differ from Ray Data's.",
)
def test_explain_prints_shardflow_operators(rd, sfm, capsys):
    def sections(m):
        m.range(4).map(lambda r: r).explain()
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("---")]

    assert sections(rd) == sections(sfm)
    sfm.range(4).map(lambda r: r).explain()
    assert "MapOperator[ReadRange->Map(<lambda>)]" in capsys.readouterr().out


@differs(
    "from_arrow_refs",
    "from_pandas_refs",
    "from_numpy_refs",
    reason="take the objects themselves as well as ObjectRefs of them (Ray Data raises "
    "ValueError), since Dataset.to_arrow_refs / to_pandas_refs / to_numpy_refs return the "
    "objects on the local backend, which has no object store; on the Ray backend refs stay "
    "in the object store and conversions run in Ray tasks, as in Ray Data.",
)
def test_from_refs_take_plain_objects(rd, sfm):
    import pandas as pd

    frame = pd.DataFrame({"a": [1, 2]})
    with pytest.raises(ValueError):
        rd.from_pandas_refs([frame])
    assert sfm.from_pandas_refs([frame]).to_pandas().equals(frame)
    assert sfm.from_arrow_refs(pa.table({"a": [1]})).take_all() == [{"a": 1}]


@differs(
    "Dataset.summary",
    reason="summarizes decimal columns (the numeric statistics, min and max as decimals); "
    "Ray Data 2.60 computes them but its DatasetSummary.to_pandas raises IndexError.",
)
def test_summary_of_decimal_columns(rd, sfm):
    import decimal

    values = [decimal.Decimal("1.5"), None, decimal.Decimal("0"), decimal.Decimal("2")]
    table = pa.table({"d": pa.array(values)})
    with pytest.raises(IndexError):
        rd.from_arrow(table).summary().to_pandas()
    stats = sfm.from_arrow(table).summary().to_pandas().set_index("statistic")["d"]
    assert stats["count"] == 4 and stats["missing_pct"] == 25.0
    assert stats["max"] == decimal.Decimal("2") and stats["min"] == decimal.Decimal("0")
    assert stats["mean"] == pytest.approx(3.5 / 3)
