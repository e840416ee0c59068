"""Differential cases: ORC files, Zarr v2 stores and MCAP files.

Ray Data's Zarr reader needs zarr-python 2, its MCAP reader the mcap package: the cases that
need them name them in ``requires``. Both sides read the same files, written here with
pyarrow.orc, zarr and mcap's writer.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _files(folder) -> list:
    out = []
    for root, _, names in os.walk(folder):
        out += [os.path.relpath(os.path.join(root, n), folder) for n in names]
    return sorted(out)


def _shape(name: str) -> str:
    """A file name with its ids replaced, to compare naming schemes."""
    return re.sub(r"([0-9A-Za-z]{22}_)?[0-9a-f]{32}", "<uuid>", name)


# -- ORC --------------------------------------------------------------------------------------

_ORC_TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "name": ["a", None, "c", "d"],
        "score": pa.array([0.5, 1.5, None, 3.5], pa.float32()),
        "tags": [[1], [2, 3], [], None],
        "when": pa.array([0, 1, 2, 3], pa.timestamp("us")),
    }
)


def _orc_folder(tmp):
    """Two ORC files in hive folders, and a file of another format beside them."""
    for key, rows in (("1", slice(0, 2)), ("2", slice(2, 4))):
        os.makedirs(tmp / "orc" / f"k={key}")
        po.write_table(_ORC_TABLE[rows], str(tmp / "orc" / f"k={key}" / f"part-{key}.orc"))
    (tmp / "orc" / "notes.txt").write_text("not orc")
    return str(tmp / "orc")


@case("read_orc", note="types, row counts and schema of ORC files; other extensions skipped")
def orc_read_types(m, tmp):
    ds = m.read_orc(_orc_folder(tmp))
    return [sorted(ds.take_all(), key=lambda r: r["id"]), ds.count(), ds.schema()]


@case("read_orc", "datasource.Partitioning", note="hive partitions, include_paths, select_columns")
def orc_read_partitions_and_paths(m, tmp):
    folder = _orc_folder(tmp)
    ds = m.read_orc(folder, partitioning=m.datasource.Partitioning("hive"), include_paths=True)
    rows = sorted(ds.select_columns(["id", "k", "path"]).take_all(), key=lambda r: r["id"])
    return [rows, ds.schema(), m.read_orc(folder).select_columns(["name"]).take_all()]


@case("read_orc", note="file_extensions=None reads every file; a non-ORC file raises")
def orc_read_extensions_and_bad_file(m, tmp):
    folder = _orc_folder(tmp)
    every = _raises(lambda: m.read_orc(folder, file_extensions=None).take_all())
    (tmp / "bad.orc").write_bytes(b"ORC this is not an ORC file")
    bad = _raises(lambda: m.read_orc(str(tmp / "bad.orc")).take_all())
    missing = _raises(lambda: m.read_orc(str(tmp / "missing.orc")))
    return [every, bad, missing]


@case("Dataset.write_orc", note="one file per task, {uuid}_{task:06}.orc, read back by pyarrow")
def orc_write_round_trip(m, tmp):
    ds = m.from_items([{"id": i, "name": f"n{i}", "v": [i, i]} for i in range(6)])
    ds.repartition(2).write_orc(str(tmp / "out"), mode="append")
    names = _files(tmp / "out")
    table = pa.concat_tables([po.read_table(str(tmp / "out" / n)) for n in names])
    rows = sorted(table.to_pylist(), key=lambda r: r["id"])
    return [[_shape(n) for n in names], rows, table.schema, m.read_orc(str(tmp / "out")).count()]


@case("Dataset.write_orc", note="ORC arguments: compression, arrow_orc_args_fn; min_rows_per_file")
def orc_write_arguments(m, tmp):
    ds = m.range(8, override_num_blocks=4)
    ds.write_orc(str(tmp / "zlib"), compression="zlib", mode="append")
    ds.write_orc(
        str(tmp / "fn"),
        arrow_orc_args_fn=lambda: {"compression": "zstd"},
        min_rows_per_file=8,
        mode="append",
    )
    codecs = {
        folder: sorted(po.ORCFile(str(tmp / folder / n)).compression for n in _files(tmp / folder))
        for folder in ("zlib", "fn")
    }
    stream = _raises(
        lambda: ds.write_orc(
            str(tmp / "gz"), arrow_open_stream_args={"compression": "gzip"}, mode="append"
        )
    )
    return [codecs, stream, sorted(os.listdir(tmp))]


# -- Zarr ---------------------------------------------------------------------------------------


def _zarr_store(path, consolidated=True):
    """A Zarr v2 group: a 5 x 4 int32 array in 2 x 3 chunks, a float array of 5 in chunks of
    3 in a subgroup, a uint8 array of 3 in one chunk, and a 0-d array."""
    import zarr

    root = zarr.open_group(str(path), mode="w")
    root.create_dataset("a", data=np.arange(20, dtype="int32").reshape(5, 4), chunks=(2, 3))
    root.create_dataset("g/b", data=np.linspace(0, 1, 5), chunks=(3,))
    root.create_dataset("short", data=np.arange(3, dtype="uint8"), chunks=(3,))
    root.create_dataset("scalar", data=np.array(7, dtype="int16"), shape=())
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return str(path)


def _chunk_rows(ds):
    return sorted(ds.take_all(), key=lambda r: (r["array"], r["chunk_index"]))


@case("read_zarr", requires=("zarr",), note="long form: one row per chunk, edge chunks cut")
def zarr_long_form(m, tmp):
    store = _zarr_store(tmp / "s.zarr")
    ds = m.read_zarr(store, array_paths=["a", "g/b", "short", "scalar"])
    return [_chunk_rows(ds), ds.count(), ds.schema().names]


@case("read_zarr", requires=("zarr",), note="chunk_shapes as a shared prefix and per array")
def zarr_chunk_shapes(m, tmp):
    store = _zarr_store(tmp / "s.zarr")
    shared = m.read_zarr(store, array_paths=["a", "g/b"], chunk_shapes=[4])
    per_array = m.read_zarr(store, array_paths=["/a/", "g/b"], chunk_shapes={"a": [5, 4]})
    return [_chunk_rows(shared), _chunk_rows(per_array)]


@case("read_zarr", requires=("zarr",), note="align_axis_0: one wide row per axis-0 chunk")
def zarr_aligned_with_overlap(m, tmp):
    store = _zarr_store(tmp / "s.zarr")
    ds = m.read_zarr(store, array_paths=["a", "g/b"], align_axis_0=True, chunk_shapes=[2])
    wide = m.read_zarr(
        store, array_paths=["a", "g/b"], align_axis_0=True, chunk_shapes=[2], overlap=1
    )
    rows = [sorted(d.take_all(), key=lambda r: r["t_start"]) for d in (ds, wide)]
    return [rows, ds.schema().names, wide.count()]


@case("read_zarr", requires=("zarr",), note="discovery without .zmetadata; a root-level array")
def zarr_discovery(m, tmp):
    store = _zarr_store(tmp / "plain.zarr", consolidated=False)
    needs_paths = _raises(lambda: m.read_zarr(store))
    scanned = m.read_zarr(store, allow_full_metadata_scan=True)
    named = m.read_zarr(store, array_paths=["g/b"])
    import zarr

    zarr.save_array(str(tmp / "root.zarr"), np.arange(6, dtype="uint8"), chunks=(4,))
    root = m.read_zarr(str(tmp / "root.zarr"))
    return [
        needs_paths,
        sorted({r["array"] for r in scanned.take_all()}),
        _chunk_rows(named),
        _chunk_rows(root),
    ]


@case("read_zarr", requires=("zarr",), note="argument and store errors raise ValueError")
def zarr_errors(m, tmp):
    store = _zarr_store(tmp / "s.zarr")
    tries = {
        "missing array": lambda: m.read_zarr(store, array_paths=["nope"]),
        "overlap without align": lambda: m.read_zarr(store, array_paths=["a"], overlap=1),
        "negative overlap": lambda: m.read_zarr(store, align_axis_0=True, overlap=-1),
        "scalar aligned": lambda: m.read_zarr(
            store, array_paths=["a", "scalar"], align_axis_0=True
        ),
        "unaligned lengths": lambda: m.read_zarr(
            store, array_paths=["a", "short"], align_axis_0=True
        ),
        "unaligned chunks": lambda: m.read_zarr(store, array_paths=["a", "g/b"], align_axis_0=True),
        "bad chunk_shapes": lambda: m.read_zarr(store, chunk_shapes=[0]),
        "chunk_shapes too long": lambda: m.read_zarr(
            store, array_paths=["g/b"], chunk_shapes=[1, 1]
        ),
        "unknown chunk_shapes key": lambda: m.read_zarr(
            store, array_paths=["a"], chunk_shapes={"b": [1]}
        ),
        "chunk_shapes not a list": lambda: m.read_zarr(store, chunk_shapes=3),
        "root array, other path": lambda: m.read_zarr(store + "/a", array_paths=["x"]),
    }
    return {name: _raises(fn) for name, fn in tries.items()}


# -- MCAP ---------------------------------------------------------------------------------------


def _mcap(path, topics=("/pose", "/raw", "/bare")):
    """An MCAP file: JSON poses, raw CDR-like bytes, and a JSON channel without a schema."""
    from mcap.writer import Writer

    with open(path, "wb") as f:
        writer = Writer(f)
        writer.start(profile="test", library="shardflow-tests")
        pose = writer.register_schema(name="Pose", encoding="jsonschema", data=b'{"type":"object"}')
        raw = writer.register_schema(name="Raw", encoding="ros2msg", data=b"uint8[] data")
        channels = {
            "/pose": writer.register_channel("/pose", "json", schema_id=pose),
            "/raw": writer.register_channel("/raw", "cdr", schema_id=raw),
            "/bare": writer.register_channel("/bare", "json", schema_id=0),
        }
        for i in range(4):
            for offset, topic in enumerate(topics):
                data = {
                    "/pose": json.dumps({"x": i, "y": [i, i + 1]}).encode(),
                    "/raw": bytes([i]) * 3,
                    "/bare": b'{"z": "%d"}' % i,
                }[topic]
                t = 10 * i + offset
                writer.add_message(
                    channels[topic], log_time=t, publish_time=t + 100, data=data, sequence=i
                )
        writer.finish()
    return str(path)


@case("read_mcap", requires=("mcap",), note="one row per message with channel and schema columns")
def mcap_read_all(m, tmp):
    os.makedirs(tmp / "logs")
    _mcap(tmp / "logs" / "poses.mcap", topics=("/pose",))
    _mcap(tmp / "logs" / "mixed.mcap")
    (tmp / "logs" / "readme.txt").write_text("not mcap")
    one = m.read_mcap(str(tmp / "logs" / "poses.mcap"))
    mixed = m.read_mcap(str(tmp / "logs" / "mixed.mcap"), include_paths=True)
    folder = m.read_mcap(str(tmp / "logs"), include_metadata=False)
    return [
        one.take_all(),
        one.schema(),
        mixed.take_all(),
        mixed.schema().names,
        folder.count(),
    ]


@case(
    "read_mcap",
    "datasource.TimeRange",
    requires=("mcap",),
    note="topics, time_range (tuple or TimeRange) and message_types filter messages",
)
def mcap_filters(m, tmp):
    path = _mcap(tmp / "run.mcap")
    time_range = m.datasource.TimeRange(start_time=10, end_time=30)
    cases = {
        "topics": m.read_mcap(path, topics=["/raw"], include_metadata=False),
        "tuple": m.read_mcap(path, time_range=(10, 30), include_metadata=False),
        "TimeRange": m.read_mcap(path, topics={"/pose"}, time_range=time_range),
        "types": m.read_mcap(path, message_types={"Raw"}, include_metadata=False),
        "nothing": m.read_mcap(path, topics=["/absent"]),
    }
    return {name: ds.take_all() for name, ds in cases.items()}


@case(
    "read_mcap",
    "datasource.TimeRange",
    requires=("mcap",),
    note="invalid time ranges raise ValueError; a corrupt or missing file raises",
)
def mcap_errors(m, tmp):
    path = _mcap(tmp / "run.mcap")
    (tmp / "bad.mcap").write_bytes(b"garbage, not an MCAP file")
    tries = {
        "start after end": lambda: m.datasource.TimeRange(start_time=5, end_time=1),
        "negative": lambda: m.datasource.TimeRange(start_time=-5, end_time=1),
        "tuple of three": lambda: m.read_mcap(path, time_range=(1, 2, 3)),
        "empty tuple range": lambda: m.read_mcap(path, time_range=(3, 3)),
        "corrupt file": lambda: m.read_mcap(str(tmp / "bad.mcap")).take_all(),
        "missing file": lambda: m.read_mcap(str(tmp / "missing.mcap")),
        "bad shuffle": lambda: m.read_mcap(path, shuffle="rows"),
    }
    return {name: _raises(fn) for name, fn in tries.items()}


@case(
    "datasource.MCAPDatasource",
    requires=("mcap",),
    note="the datasource read through read_datasource, with its filters",
)
def mcap_datasource(m, tmp):
    path = _mcap(tmp / "run.mcap")
    source = m.datasource.MCAPDatasource(
        path, topics=["/pose", "/bare"], message_types=["Pose"], include_metadata=False
    )
    ds = m.read_datasource(source)
    return [ds.take_all(), source.get_name()]
