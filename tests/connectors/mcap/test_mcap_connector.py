"""read_mcap: the messages of MCAP files written with mcap's writer, compared with what mcap's
own reader gives; filters, indexed and unindexed files, files cut short, S3, and errors
naming the file."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf
from shardflow.datasource import MCAPDatasource, TimeRange

mcap_writer = pytest.importorskip("mcap.writer")
from mcap.reader import NonSeekingReader

TOPICS = ("/pose", "/scan", "/log")


def _write(path, messages=30, chunked=True, compression="zstd"):
    """Messages on three topics: JSON poses, raw scan bytes, JSON logs without a schema."""
    compressions = {
        "zstd": mcap_writer.CompressionType.ZSTD,
        "none": mcap_writer.CompressionType.NONE,
    }
    with open(path, "wb") as f:
        writer = mcap_writer.Writer(
            f,
            chunk_size=512,
            compression=compressions[compression],
            use_chunking=chunked,
            index_types=mcap_writer.IndexType.ALL if chunked else mcap_writer.IndexType.NONE,
        )
        writer.start(profile="test", library="shardflow")
        pose = writer.register_schema("geometry/Pose", "jsonschema", b'{"type": "object"}')
        scan = writer.register_schema("sensor/Scan", "ros2msg", b"uint8[] ranges")
        channels = [
            writer.register_channel("/pose", "json", schema_id=pose),
            writer.register_channel("/scan", "cdr", schema_id=scan),
            writer.register_channel("/log", "json", schema_id=0),
        ]
        for i in range(messages):
            topic = i % 3
            data = [
                json.dumps({"x": i, "q": [i / 2, 1.0]}).encode(),
                bytes([i % 256]) * (i % 5 + 1),
                json.dumps({"text": f"m{i}"}).encode(),
            ][topic]
            writer.add_message(
                channels[topic],
                log_time=1_000 * i,
                publish_time=1_000 * i + 3,
                data=data,
                sequence=i,
            )
        writer.finish()
    return str(path)


def _oracle(path, topics=None, start=None, end=None, types=None, metadata=True):
    """The rows read_mcap gives, built from mcap's linear reader."""
    rows = []
    with open(path, "rb") as f:
        for schema, channel, message in NonSeekingReader(f).iter_messages():
            if topics and channel.topic not in topics:
                continue
            if start is not None and not (start <= message.log_time < end):
                continue
            if types and schema is not None and schema.name not in types:
                continue
            data = message.data
            if channel.message_encoding == "json":
                data = json.loads(data)
            row = {
                "data": data,
                "topic": channel.topic,
                "log_time": message.log_time,
                "publish_time": message.publish_time,
                "sequence": message.sequence,
            }
            if metadata:
                row.update(
                    channel_id=channel.id,
                    message_encoding=channel.message_encoding,
                    schema_name=schema.name if schema else None,
                    schema_encoding=schema.encoding if schema else None,
                    schema_data=schema.data if schema else None,
                )
            rows.append(row)
    payloads = [r["data"] for r in rows]
    if payloads and all(isinstance(p, dict) for p in payloads):
        # JSON payloads of one block form one struct column: every field, null where absent
        fields = list(dict.fromkeys(k for p in payloads for k in p))
        for row in rows:
            row["data"] = {k: row["data"].get(k) for k in fields}
    return rows


def test_reads_every_message_as_the_mcap_reader_does(backend, tmp_path):
    path = _write(tmp_path / "run.mcap")
    ds = sf.read_mcap(path)
    assert ds.take_all() == _oracle(path)
    assert ds.count() == 30
    assert ds.filter(expr=sf.col("topic") == "/scan").count() == 10


@given(
    topics=st.one_of(st.none(), st.sets(st.sampled_from(TOPICS + ("/absent",)), min_size=1)),
    window=st.one_of(
        st.none(),
        st.tuples(st.integers(0, 40_000), st.integers(1, 40_000)).filter(lambda w: w[0] < w[1]),
    ),
    types=st.one_of(st.none(), st.sets(st.sampled_from(["geometry/Pose", "sensor/Scan"]))),
    metadata=st.booleans(),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_property_filters_keep_exactly_the_matching_messages(
    tmp_path_factory, topics, window, types, metadata
):
    path = _write(tmp_path_factory.mktemp("mcap") / "run.mcap")
    ds = sf.read_mcap(
        path, topics=topics, time_range=window, message_types=types, include_metadata=metadata
    )
    start, end = window if window else (None, None)
    assert ds.take_all() == _oracle(path, topics, start, end, types, metadata)


@pytest.mark.parametrize("chunked", [True, False], ids=["indexed", "unindexed"])
def test_indexed_and_unindexed_files_read_alike(tmp_path, chunked):
    path = _write(tmp_path / "run.mcap", chunked=chunked, compression="none")
    window = TimeRange(start_time=5_000, end_time=20_000)
    ds = sf.read_mcap(path, topics=["/pose", "/log"], time_range=window)
    assert ds.take_all() == _oracle(path, {"/pose", "/log"}, 5_000, 20_000)


def test_a_long_file_is_read_in_several_blocks(tmp_path, monkeypatch):
    from shardflow.connectors.mcap import datasource

    monkeypatch.setattr(datasource, "_BLOCK_MESSAGES", 7)
    path = _write(tmp_path / "run.mcap", messages=40)
    source = MCAPDatasource(path, topics=["/scan"], include_metadata=False)
    with open(path, "rb") as f:  # the file layer would join these small blocks again
        blocks = list(source._read_stream(f, path))
    assert [b.num_rows for b in blocks] == [7, 6]
    assert sum((b.to_pylist() for b in blocks), []) == _oracle(path, {"/scan"}, metadata=False)


def test_a_file_cut_short_names_the_file(tmp_path):
    data = open(_write(tmp_path / "run.mcap"), "rb").read()
    (tmp_path / "cut.mcap").write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception, match="cut.mcap"):
        sf.read_mcap(str(tmp_path / "cut.mcap")).take_all()
    (tmp_path / "junk.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(Exception, match="junk.mcap.*invalid magic"):
        sf.read_mcap(str(tmp_path / "junk.mcap")).take_all()
    assert sf.read_mcap(str(tmp_path), on_bad_file="skip").count() == 30


def test_reads_from_s3_with_paths(s3_store, tmp_path):
    data = open(_write(tmp_path / "run.mcap"), "rb").read()
    s3_store.write_bytes("logs/a.mcap", data)
    s3_store.write_bytes("logs/notes.txt", b"not mcap")
    ds = sf.read_mcap(s3_store.path("logs"), include_paths=True, **s3_store.options())
    rows = ds.take_all()
    assert [{k: v for k, v in r.items() if k != "path"} for r in rows] == _oracle(
        str(tmp_path / "run.mcap")
    )
    assert {r["path"] for r in rows} == {s3_store.path("logs/a.mcap")}


def test_arguments_are_checked(tmp_path):
    path = _write(tmp_path / "run.mcap")
    with pytest.raises(TypeError, match="topics"):
        sf.read_mcap(path, topics="/pose")
    with pytest.raises(TypeError, match="time_range"):
        sf.read_mcap(path, time_range=[1, 2])
    with pytest.raises(ValueError, match="must be less than"):
        sf.read_mcap(path, time_range=(2, 1))
    with pytest.raises(TypeError, match="Unknown arguments"):
        MCAPDatasource(path, decoder="ros2")
