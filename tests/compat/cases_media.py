"""Differential cases: read_audio (soundfile), read_videos (decord on Ray Data's side, PyAV on
shardflow's) and read_lance (pylance)."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pyarrow as pa
from harness import case, submodule


def _audio_files(tmp):
    import soundfile

    folder = tmp / "audio"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    soundfile.write(folder / "a.wav", rng.uniform(-0.5, 0.5, (300, 2)), 8000, subtype="PCM_16")
    soundfile.write(folder / "b.flac", rng.uniform(-0.5, 0.5, (500, 1)), 16000)
    soundfile.write(folder / "c.ogg", rng.uniform(-0.5, 0.5, (700, 1)), 22050)
    (folder / "notes.txt").write_text("not audio")
    return folder


@case("read_audio", requires=("soundfile",), note="WAV, FLAC and OGG files with their paths")
def audio_rows_and_columns(m, tmp):
    """amplitude (channels x samples, float32) and sample_rate (int64) per file"""
    folder = _audio_files(tmp)
    ds = m.read_audio(str(folder), include_paths=True)
    rows = sorted(ds.take_all(), key=lambda r: r["path"])
    single = m.read_audio(str(folder / "a.wav"))
    return [
        rows,
        ds.count(),
        ds.schema().names,
        str(single.take_batch(batch_format="pyarrow").schema.field("sample_rate").type),
    ]


def _digest(array):
    """An array's dtype, shape and a hash of its values (frames are too long to show)."""
    return (str(array.dtype), array.shape, hashlib.sha1(np.ascontiguousarray(array)).hexdigest())


def _video(tmp, frames=10):
    import av

    path = tmp / "clip.mp4"
    tmp.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(4)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=24, options={"g": "4"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(frames):
            image = rng.integers(0, 60, (48, 64, 3), dtype=np.uint8)
            image[:, i * 3 :, 1] += 150
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return path


@case(
    "read_videos",
    requires=("av", "decord"),
    note="frames, frame_index, frame_timestamp; fps subsampling; resize's shape",
)
def video_frames_and_timestamps(m, tmp):
    """one row per frame with its index and [start, end] timestamps; fps keeps every nth"""
    path = str(_video(tmp))
    ds = m.read_videos(path, include_timestamps=True)
    rows = sorted(ds.take_all(), key=lambda r: r["frame_index"])
    return [
        [{**r, "frame": _digest(r["frame"])} for r in rows],
        ds.schema().names,
        [r["frame_index"] for r in m.read_videos(path, fps=12).take_all()],
        # decord (Ray Data's decoder) returns malformed frames for widths not a multiple of 64
        m.read_videos(path, resize=(24, 64)).take(1)[0]["frame"].shape,
        m.read_videos(path, include_paths=True).schema().names,
    ]


def _lance_dataset(tmp):
    import lance

    uri = str(tmp / "t.lance")
    table = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "label": pa.array([i % 4 for i in range(40)], pa.int64()),
            "text": [f"t{i}" if i % 5 else None for i in range(40)],
        }
    )
    lance.write_dataset(table, uri, max_rows_per_file=12)
    return uri


@case(
    "read_lance", requires=("lance",), note="columns, a SQL filter, an expression filter", slow=True
)
def lance_columns_and_filters(m, tmp):
    """columns= and filter= in the scan; Dataset.filter(expr=...) after the read"""
    uri = _lance_dataset(tmp)
    col = submodule(m, "expressions").col
    ds = m.read_lance(uri)
    picked = m.read_lance(uri, columns=["id", "text"], filter="label = 2 AND text IS NOT NULL")
    return [
        sorted(ds.take_all(), key=lambda r: r["id"]),
        ds.count(),
        ds.schema().names,
        sorted(picked.take_all(), key=lambda r: r["id"]),
        sorted(r["id"] for r in ds.filter(expr=col("id") >= 35).take_all()),
        sorted(r["id"] for r in m.read_lance([uri, uri]).select_columns(["id"]).take_all())[:4],
    ]


@case("read_lance", requires=("lance",), note="a version of a dataset that has several")
def lance_versions(m, tmp):
    """version= reads an older version"""
    import lance

    uri = _lance_dataset(tmp)
    lance.write_dataset(pa.table({"id": [100], "label": [1], "text": ["x"]}), uri, mode="append")
    return [m.read_lance(uri).count(), m.read_lance(uri, version=1).count(), os.path.isdir(uri)]
