"""Small LeRobot v3 datasets written from scratch, for tests, examples and the conformance kit.

:func:`write_sample_dataset` writes a real v3 layout (``meta/info.json``, ``meta/stats.json``,
``meta/tasks.parquet``, ``meta/episodes/chunk-*/file-*.parquet``,
``data/chunk-*/file-*.parquet`` and ``videos/<camera>/chunk-*/file-*.mp4`` with several
episodes per file) with PyAV, pyarrow and Pillow, and returns what it wrote, so a reader's
output can be checked against it. Every camera frame is one flat colour that says which
frame it is (:func:`frame_colour`), so lossy video coding still tells frames apart.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shardflow.sdk.filesystems import resolve_filesystem
from shardflow.sdk.optional import require

DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


def frame_colour(global_index: int, camera: int) -> tuple[int, int, int]:
    """The RGB colour of frame ``global_index`` of camera number ``camera``: red and green
    count frames in steps of 8 levels (1,024 frames before they repeat), blue tells the
    camera. Codec noise is a few levels, so the nearest colour names the frame."""
    return (8 * (global_index % 32) + 4, 8 * ((global_index // 32) % 32) + 4, 60 + 90 * camera)


@dataclass
class SampleDataset:
    """What :func:`write_sample_dataset` wrote.

    Attributes:
        root: The dataset's root, as given.
        rows: One dict per frame, in ``index`` order, with the non-camera columns
            (``observation.state``, ``action``, ``timestamp``, ``frame_index``,
            ``episode_index``, ``index``, ``task_index``) and ``task``.
        cameras: The camera keys, video ones first.
        video_keys: Cameras stored as MP4 files.
        image_keys: Cameras stored as PNG images inside the data rows.
        fps: Frames per second.
        stats: The contents of ``meta/stats.json``.
        files: Relative paths of every file written.
    """

    root: str
    rows: list[dict[str, Any]]
    video_keys: list[str]
    image_keys: list[str]
    fps: int
    stats: dict[str, Any]
    files: list[str] = field(default_factory=list)

    @property
    def cameras(self) -> list[str]:
        return self.video_keys + self.image_keys

    def expected_frame(self, global_index: int, camera_key: str, height: int, width: int) -> Any:
        """The frame the dataset holds for ``camera_key`` at ``global_index`` (HWC uint8)."""
        colour = frame_colour(global_index, self.cameras.index(camera_key))
        return np.broadcast_to(np.asarray(colour, np.uint8), (height, width, 3))


def _chunked(number: int, chunks_size: int) -> tuple[int, int]:
    return number // chunks_size, number % chunks_size


def _groups(count: int, size: int) -> list[list[int]]:
    return [list(range(s, min(s + size, count))) for s in range(0, count, size)]


def write_sample_dataset(
    root: str,
    *,
    episode_lengths: Sequence[int] = (5, 7, 4),
    fps: int = 10,
    video_keys: Sequence[str] = ("observation.images.front", "observation.images.wrist"),
    image_keys: Sequence[str] = (),
    episodes_per_video_file: int = 2,
    episodes_per_data_file: int = 2,
    chunks_size: int = 1000,
    height: int = 24,
    width: int = 32,
    state_dim: int = 3,
    tasks: Sequence[str] = ("pick the cube", "open the drawer"),
    storage_options: dict[str, Any] | None = None,
    write_stats: bool = True,
    codec: str = "mpeg4",
) -> SampleDataset:
    """Write a LeRobot v3 dataset of ``len(episode_lengths)`` episodes under ``root``.

    Episode ``e`` does task ``tasks[e % len(tasks)]``; frame ``f`` of it has timestamp
    ``f / fps``, ``observation.state[j] = index + j / 10`` (float32, a fixed-size list) and
    ``action = [-index, 2 * index]`` (float32, a list); camera ``c``'s frame is the flat colour
    ``frame_colour(index, c)``.

    Args:
        root: A local folder or a URI (``s3://bucket/x``) to write the dataset under.
        episode_lengths: Frames of each episode.
        fps: Frames per second.
        video_keys: Cameras written as MP4 (mpeg4) files.
        image_keys: Cameras written as PNG images in the data rows.
        episodes_per_video_file: Episodes that share one MP4 file, one after another.
        episodes_per_data_file: Episodes that share one data Parquet file.
        chunks_size: Files per ``chunk-*`` folder.
        height, width: Size of the frames.
        state_dim: Length of ``observation.state``.
        tasks: Task strings, given to the episodes in turn.
        storage_options: fsspec options of the filesystem ``root`` is on.
        write_stats: Write ``meta/stats.json``.
        codec: FFmpeg encoder of the MP4 files (``"libx264"`` writes B-frames).

    Returns:
        A :class:`SampleDataset` saying what was written.
    """
    fs, (base,) = resolve_filesystem([root], None, storage_options)
    written: list[str] = []

    def put(relative: str, data: bytes) -> None:
        path = f"{base}/{relative}"
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "wb") as f:
            f.write(data)
        written.append(relative)

    episode_tasks = [e % len(tasks) for e in range(len(episode_lengths))]
    starts = np.concatenate([[0], np.cumsum(episode_lengths)]).astype(int).tolist()
    rows: list[dict[str, Any]] = []
    for e, length in enumerate(episode_lengths):
        for f in range(length):
            index = starts[e] + f
            rows.append(
                {
                    "observation.state": [
                        float(np.float32(index + j / 10)) for j in range(state_dim)
                    ],
                    "action": [float(-index), float(2 * index)],
                    "timestamp": float(np.float32(f / fps)),
                    "frame_index": f,
                    "episode_index": e,
                    "index": index,
                    "task_index": episode_tasks[e],
                    "task": tasks[episode_tasks[e]],
                }
            )
    sample = SampleDataset(str(root), rows, list(video_keys), list(image_keys), fps, {})

    episode_columns: dict[str, list[Any]] = {
        "episode_index": list(range(len(episode_lengths))),
        "tasks": [[tasks[t]] for t in episode_tasks],
        "length": list(episode_lengths),
        "data/chunk_index": [],
        "data/file_index": [],
        "dataset_from_index": starts[:-1],
        "dataset_to_index": starts[1:],
    }
    for data_file, episodes in enumerate(_groups(len(episode_lengths), episodes_per_data_file)):
        chunk, number = _chunked(data_file, chunks_size)
        first, last = starts[episodes[0]], starts[episodes[-1] + 1]
        put(
            DATA_PATH.format(chunk_index=chunk, file_index=number),
            _data_parquet(sample, rows[first:last], height, width, state_dim),
        )
        episode_columns["data/chunk_index"] += [chunk] * len(episodes)
        episode_columns["data/file_index"] += [number] * len(episodes)

    for camera, key in enumerate(video_keys):
        columns: dict[str, list[Any]] = {"chunk_index": [], "file_index": [], "from": [], "to": []}
        for video_file, episodes in enumerate(
            _groups(len(episode_lengths), episodes_per_video_file)
        ):
            chunk, number = _chunked(video_file, chunks_size)
            first = starts[episodes[0]]
            indices = list(range(first, starts[episodes[-1] + 1]))
            put(
                VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=number),
                _mp4([frame_colour(i, camera) for i in indices], fps, height, width, codec),
            )
            for e in episodes:
                columns["chunk_index"].append(chunk)
                columns["file_index"].append(number)
                columns["from"].append((starts[e] - first) / fps)
                columns["to"].append((starts[e + 1] - first) / fps)
        for name, values in columns.items():
            suffix = {"from": "from_timestamp", "to": "to_timestamp"}.get(name, name)
            episode_columns[f"videos/{key}/{suffix}"] = values
    episode_columns["meta/episodes/chunk_index"] = [0] * len(episode_lengths)
    episode_columns["meta/episodes/file_index"] = [0] * len(episode_lengths)
    put(EPISODES_PATH.format(chunk_index=0, file_index=0), _parquet(pa.table(episode_columns)))

    import pandas

    task_frame = pandas.DataFrame({"task_index": range(len(tasks))}, index=list(tasks))
    task_frame.index.name = "task"
    buffer = io.BytesIO()
    task_frame.to_parquet(buffer)
    put("meta/tasks.parquet", buffer.getvalue())

    if write_stats and rows:
        sample.stats = _stats(rows)
        put("meta/stats.json", json.dumps(sample.stats, indent=2).encode())
    info = _info(sample, episode_lengths, tasks, chunks_size, height, width, state_dim)
    put("meta/info.json", json.dumps(info, indent=4).encode())
    sample.files = written
    return sample


def _parquet(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _png(colour: tuple[int, int, int], height: int, width: int) -> bytes:
    image_module = require("PIL.Image", "images", "Writing sample LeRobot datasets")
    image = np.broadcast_to(np.asarray(colour, np.uint8), (height, width, 3))
    buffer = io.BytesIO()
    image_module.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
    return buffer.getvalue()


def _data_parquet(
    sample: SampleDataset, rows: list[dict[str, Any]], height: int, width: int, state_dim: int
) -> bytes:
    columns: dict[str, pa.Array] = {
        "observation.state": pa.array(
            [r["observation.state"] for r in rows], pa.list_(pa.float32(), state_dim)
        ),
        "action": pa.array([r["action"] for r in rows], pa.list_(pa.float32())),
    }
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    for key in sample.image_keys:
        camera = sample.cameras.index(key)
        cells = [
            {"bytes": _png(frame_colour(r["index"], camera), height, width), "path": None}
            for r in rows
        ]
        columns[key] = pa.array(cells, image_type)
    columns["timestamp"] = pa.array([r["timestamp"] for r in rows], pa.float32())
    for name in ("frame_index", "episode_index", "index", "task_index"):
        columns[name] = pa.array([r[name] for r in rows], pa.int64())
    return _parquet(pa.table(columns))


def _mp4(
    colours: list[tuple[int, int, int]], fps: int, height: int, width: int, codec: str
) -> bytes:
    av = require("av", "lerobot", "Writing sample LeRobot datasets")
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        options = (
            {"g": "4", "qscale": "2"} if codec == "mpeg4" else {"g": "4", "bf": "2", "crf": "10"}
        )
        stream = container.add_stream(codec, rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.bit_rate = 4_000_000
        for colour in colours:
            image = np.ascontiguousarray(
                np.broadcast_to(np.asarray(colour, np.uint8), (height, width, 3))
            )
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
    return buffer.getvalue()


def _stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for name in ("observation.state", "action"):
        values = np.asarray([r[name] for r in rows], np.float64)
        stats[name] = {
            "min": values.min(axis=0).tolist(),
            "max": values.max(axis=0).tolist(),
            "mean": values.mean(axis=0).tolist(),
            "std": values.std(axis=0).tolist(),
            "count": [len(rows)],
        }
    return stats


def _info(
    sample: SampleDataset,
    episode_lengths: Sequence[int],
    tasks: Sequence[str],
    chunks_size: int,
    height: int,
    width: int,
    state_dim: int,
) -> dict[str, Any]:
    camera = {"shape": [height, width, 3], "names": ["height", "width", "channels"]}
    features: dict[str, Any] = {
        "observation.state": {"dtype": "float32", "shape": [state_dim], "names": None},
        "action": {"dtype": "float32", "shape": [2], "names": None},
    }
    for key in sample.image_keys:
        features[key] = {"dtype": "image", **camera}
    for key in sample.video_keys:
        features[key] = {
            "dtype": "video",
            **camera,
            "info": {"video.fps": sample.fps, "video.codec": "mpeg4", "video.pix_fmt": "yuv420p"},
        }
    for name, dtype in (
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ):
        features[name] = {"dtype": dtype, "shape": [1], "names": None}
    info: dict[str, Any] = {
        "codebase_version": "v3.0",
        "robot_type": "sample",
        "total_episodes": len(episode_lengths),
        "total_frames": int(sum(episode_lengths)),
        "total_tasks": len(tasks),
        "chunks_size": chunks_size,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 500,
        "fps": sample.fps,
        "splits": {"train": f"0:{len(episode_lengths)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if sample.video_keys else None,
        "features": features,
    }
    return info
