"""read_orc and Dataset.write_orc: files pyarrow.orc wrote are read stripe by stripe with the
rows and types pyarrow reads, shardflow's files are read back by pyarrow, writes are all or
nothing on local disk, S3 and GCS, and errors name the file."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("score", pa.float64()),
        ("tags", pa.list_(pa.int64())),
        ("flag", pa.bool_()),
    ]
)


def _table(n: int, offset: int = 0) -> pa.Table:
    ids = list(range(offset, offset + n))
    columns = [
        ids,
        [None if i % 7 == 0 else f"n{i % 5}" for i in ids],
        [i / 4 for i in ids],
        [[i, i + 1] if i % 3 else [] for i in ids],
        [i % 2 == 0 for i in ids],
    ]
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns, SCHEMA)], schema=SCHEMA
    )


def _visible(folder) -> list[str]:
    return sorted(
        os.path.join(folder, n) for n in os.listdir(folder) if not n.startswith((".", "_"))
    )


def _by_id(table: pa.Table) -> pa.Table:
    return table.sort_by("id")


def test_reads_what_pyarrow_wrote_stripe_by_stripe(backend, tmp_path):
    """Files of many small stripes read as pyarrow reads them; each stripe is a block."""
    folder = tmp_path / "orc"
    folder.mkdir()
    for i in range(3):
        po.write_table(_table(3000, i * 3000), str(folder / f"p{i}.orc"), stripe_size=4096)
    assert po.ORCFile(str(folder / "p0.orc")).nstripes > 1
    expected = pa.concat_tables([po.read_table(str(folder / f"p{i}.orc")) for i in range(3)])

    ds = sf.read_orc(str(folder))
    assert ds.schema().base_schema == expected.schema
    got = ds.to_arrow()
    assert _by_id(got).equals(_by_id(expected))
    assert ds.count() == 9000
    assert ds.filter(expr=sf.col("flag")).count() == 4500


def test_projection_reads_only_the_columns_asked_for(tmp_path):
    path = str(tmp_path / "t.orc")
    po.write_table(_table(50), path)
    ds = sf.read_orc(path, include_paths=True).select_columns(["score", "path"])
    got = ds.to_arrow()
    assert got.column_names == ["score", "path"]
    assert got.column("score").equals(po.read_table(path, columns=["score"]).column("score"))
    assert set(got.column("path").to_pylist()) == {path}
    # only columns that are not in the file: the stripes still give the row count
    paths_only = sf.read_orc(path, include_paths=True).select_columns(["path"])
    assert paths_only.take_all() == [{"path": path}] * 50
    assert sf.read_orc(path).select_columns([]).count() == 50


def test_schema_is_known_from_the_footer_before_reading(tmp_path):
    path = str(tmp_path / "empty.orc")
    po.write_table(_table(0), path)
    ds = sf.read_orc(path)
    assert ds.schema().base_schema == po.ORCFile(path).schema
    assert ds.count() == 0


def test_hive_partitions_and_partition_filter(tmp_path):
    for key in ("a", "b"):
        (tmp_path / f"k={key}").mkdir()
        po.write_table(_table(4, 0 if key == "a" else 4), str(tmp_path / f"k={key}" / "f.orc"))
    assert "k" not in sf.read_orc(str(tmp_path)).schema().names  # none by default, as Ray Data
    ds = sf.read_orc(
        str(tmp_path),
        partitioning=sf.Partitioning("hive"),
        partition_filter=sf.PathPartitionFilter.of(lambda values: values["k"] == "b"),
    )
    assert sorted((r["id"], r["k"]) for r in ds.select_columns(["id", "k"]).take_all()) == [
        (i, "b") for i in range(4, 8)
    ]


@given(
    rows=st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.one_of(st.none(), st.text(max_size=8)),
            st.one_of(st.none(), st.floats(allow_nan=False, width=32)),
            st.lists(st.integers(-100, 100), max_size=3),
        ),
        max_size=30,
    ),
    blocks=st.integers(1, 4),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_property_write_orc_then_pyarrow_reads_the_same_rows(tmp_path_factory, rows, blocks):
    table = pa.table(
        {
            "i": pa.array([r[0] for r in rows], pa.int64()),
            "s": pa.array([r[1] for r in rows], pa.string()),
            "f": pa.array([r[2] for r in rows], pa.float32()),
            "l": pa.array([r[3] for r in rows], pa.list_(pa.int64())),
        }
    )
    out = str(tmp_path_factory.mktemp("orc") / "out")
    sf.from_arrow(table).repartition(blocks).write_orc(out)
    files = _visible(out) if os.path.exists(out) else []
    back = pa.concat_tables([po.read_table(f) for f in files]) if files else table.slice(0, 0)
    assert back.schema == table.schema or not rows
    assert sorted(back.to_pylist(), key=repr) == sorted(table.to_pylist(), key=repr)
    if rows:
        assert sf.read_orc(out).count() == len(rows)


def test_write_streams_blocks_into_one_file_per_task(tmp_path):
    ds = sf.range(1000, override_num_blocks=10).repartition(2)
    ds.write_orc(str(tmp_path / "out"), min_rows_per_file=1000, compression="zstd")
    files = _visible(str(tmp_path / "out"))
    assert all(f.endswith(".orc") for f in files)
    assert {po.ORCFile(f).compression for f in files} == {"ZSTD"}
    back = pa.concat_tables([po.read_table(f) for f in files])
    assert sorted(back.column("id").to_pylist()) == list(range(1000))


def test_store_round_trip_is_all_or_nothing(store):
    """Local disk, S3 (moto) and GCS (emulator): a failed write leaves nothing; a good one
    reads back."""

    def fail_late(batch):
        if batch["id"].max() >= 90:
            raise RuntimeError("injected failure")
        return batch

    with pytest.raises(Exception, match="injected failure"):
        sf.range(100, override_num_blocks=5).map_batches(fail_late).write_orc(
            store.path("out"), **store.options()
        )
    assert store.data_files("out") == []

    sf.from_arrow(_table(40)).write_orc(store.path("out"), **store.options())
    files = store.data_files("out")
    assert files and all(f.endswith(".orc") for f in files)
    back = sf.read_orc(store.path("out"), **store.options()).to_arrow()
    assert _by_id(back).equals(_table(40))


def test_bad_and_missing_files_are_named(tmp_path):
    po.write_table(_table(5), str(tmp_path / "good.orc"))
    (tmp_path / "broken.orc").write_bytes(b"ORC but nothing else")
    with pytest.raises(OSError, match="broken.orc"):
        sf.read_orc(str(tmp_path)).take_all()
    assert sf.read_orc(str(tmp_path), on_bad_file="skip").count() == 5
    with pytest.raises(FileNotFoundError, match="absent.orc"):
        sf.read_orc(str(tmp_path / "absent.orc"))


def test_arguments_are_checked(tmp_path):
    ds = sf.range(3)
    with pytest.raises(ValueError, match="Stream compression isn't supported"):
        ds.write_orc(str(tmp_path / "a"), arrow_open_stream_args={"compression": "gzip"})
    with pytest.raises(TypeError, match="arrow_orc_args_fn"):
        ds.write_orc(str(tmp_path / "b"), arrow_orc_args_fn={"compression": "zlib"})
    with pytest.raises(TypeError, match="file_extensions"):
        sf.read_orc(str(tmp_path), file_extensions="orc")
    with pytest.raises(pa.ArrowNotImplementedError, match="column 'small' of type uint8"):
        sf.from_arrow(pa.table({"id": [1], "small": pa.array([1], pa.uint8())})).write_orc(
            str(tmp_path / "d")
        )
    assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match="at least one column"):
        sf.range(3).select_columns([]).write_orc(str(tmp_path / "c"))
