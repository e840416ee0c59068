"""A LeRobot v3 dataset's metadata, read on the driver into what read tasks need.

A v3 root holds ``meta/info.json`` (features, fps, path templates), ``meta/episodes/**.parquet``
(one row per episode: its span in the global frame ``index``, its data file, and per camera
its MP4 file and start time in it), ``meta/tasks.parquet`` (task strings by ``task_index``) and
``meta/stats.json`` (normalization statistics). :func:`load_root` reads them with pyarrow and
fsspec, checks them, and keeps a small picklable :class:`DatasetRoot` for the read tasks and
the episodes table for planning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shardflow.sdk.filesystems import display_path, protocol_of, resolve_paths
from shardflow.sdk.tensor_types import ArrowVariableShapedTensorType

#: Columns of the per-root episodes table the planner and the read tasks use.
FROM, TO = "dataset_from_index", "dataset_to_index"
DATA_CHUNK, DATA_FILE = "data/chunk_index", "data/file_index"


def video_columns(key: str) -> tuple[str, str, str]:
    """The episodes-table columns that place an episode in camera ``key``'s MP4 files."""
    return (f"videos/{key}/chunk_index", f"videos/{key}/file_index", f"videos/{key}/from_timestamp")


@dataclass(frozen=True)
class DatasetRoot:
    """One dataset root, as the read tasks need it (shipped to each of them).

    Attributes:
        uri: The root as the user named it (for messages).
        fs: The fsspec filesystem of metadata, data and video files.
        path: The root as ``fs`` names it.
        data_path: ``info.json``'s template of data Parquet paths.
        video_path: ``info.json``'s template of MP4 paths (None without video cameras).
        video_keys: Cameras stored as MP4 files, in ``info.json``'s order.
        image_keys: Cameras stored as encoded images in the data rows.
        tasks: ``task_index`` to task string.
        schema: The schema of the rows read (before temporal windows).
        row_bytes: Estimated in-memory bytes of one row.
        total_frames: Frames of the episodes read.
        fps: Frames per second.
        stats_json: ``meta/stats.json`` as one JSON string (``"{}"`` without it).
        frame_tolerance_s: Largest distance between a row's timestamp and its video frame's.
        delta_steps: ``delta_timestamps`` in frames, per feature (empty: no windows).
    """

    uri: str
    fs: Any
    path: str
    data_path: str
    video_path: str | None
    video_keys: list[str]
    image_keys: list[str]
    tasks: dict[int, str]
    schema: pa.Schema
    row_bytes: int
    total_frames: int
    fps: int
    stats_json: str
    frame_tolerance_s: float
    delta_steps: dict[str, list[int]] = field(default_factory=dict)
    features: dict[str, Any] = field(default_factory=dict)

    def file(self, relative: str) -> str:
        return f"{self.path}/{relative}"

    def shown(self, path: str) -> str:
        """``path`` (as ``fs`` names it) for messages."""
        return display_path(self.fs, path)

    def data_file(self, chunk: int, number: int) -> str:
        return self.file(self.data_path.format(chunk_index=chunk, file_index=number))

    def video_file(self, key: str, chunk: int, number: int) -> str:
        assert self.video_path is not None
        return self.file(
            self.video_path.format(video_key=key, chunk_index=chunk, file_index=number)
        )

    def with_(self, **changes: Any) -> DatasetRoot:
        return replace(self, **changes)


def open_root(
    root: Any, filesystem: Any, storage_options: dict[str, Any] | None
) -> tuple[Any, str]:
    """The fsspec filesystem of ``root`` and the root as it names it.

    ``s3://anonymous@bucket/...`` reads a public bucket without credentials, as in Ray Data.
    """
    uri = str(root).rstrip("/")
    options = dict(storage_options or {})
    scheme = protocol_of(uri)
    if scheme and uri[len(scheme) + 3 :].startswith("anonymous@"):
        uri = f"{scheme}://{uri[len(scheme) + 3 + len('anonymous@') :]}"
        options.setdefault("anon", True)
    if filesystem is not None:
        resolved = resolve_paths([uri], filesystem)  # every file goes through it
    else:
        resolved = resolve_paths([uri], None, options)
    return resolved.fs, resolved.paths[0].rstrip("/")


def _read_bytes(fs: Any, path: str, what: str) -> bytes:
    try:
        with fs.open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"No LeRobot dataset at {display_path(fs, path.rsplit('/meta/', 1)[0])}: "
            f"{display_path(fs, path)} ({what}) is missing. Make sure the path points to the "
            "dataset's root (the folder holding meta/, data/ and videos/)."
        ) from None


def read_info(fs: Any, path: str) -> dict[str, Any]:
    """``meta/info.json``, checked for what the reader needs."""
    info_path = f"{path}/meta/info.json"
    raw = _read_bytes(fs, info_path, "the dataset's info")
    shown = display_path(fs, info_path)
    try:
        info = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{shown}: not valid JSON ({exc}).") from exc
    if not isinstance(info, dict):
        raise ValueError(f"{shown}: expected a JSON object, got {type(info).__name__}.")
    version = str(info.get("codebase_version", "v3.0"))
    if not version.startswith("v3"):
        raise ValueError(
            f"{shown}: codebase_version is {version!r}; read_lerobot reads LeRobot v3 datasets "
            "(convert older ones with lerobot's v2.1 -> v3.0 conversion script)."
        )
    for key, kind in (("fps", (int, float)), ("features", dict), ("data_path", str)):
        if not isinstance(info.get(key), kind):
            raise ValueError(f"{shown}: {key!r} is missing or not a {kind}.")
    for name, feature in info["features"].items():
        if not isinstance(feature, dict) or "dtype" not in feature:
            raise ValueError(f"{shown}: feature {name!r} has no 'dtype'.")
    cameras = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    if cameras and not isinstance(info.get("video_path"), str):
        raise ValueError(f"{shown}: the dataset has video cameras {cameras} but no 'video_path'.")
    return info


def read_episodes(fs: Any, path: str, video_keys: list[str]) -> pa.Table:
    """Every episode, from ``meta/episodes/**/*.parquet`` in path order, with the columns
    the reader uses."""
    folder = f"{path}/meta/episodes"
    try:
        files = sorted(p for p in fs.find(folder) if p.endswith(".parquet"))
    except FileNotFoundError:
        files = []
    if not files:
        raise FileNotFoundError(
            f"{display_path(fs, folder)}: no episode metadata (*.parquet) found; a LeRobot v3 "
            "dataset lists its episodes there."
        )
    needed = ["episode_index", FROM, TO, DATA_CHUNK, DATA_FILE]
    for key in video_keys:
        needed += video_columns(key)
    tables = []
    for file in files:
        try:
            with fs.open(file, "rb") as f:
                table = pq.read_table(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(
                f"{display_path(fs, file)}: cannot read it as Parquet ({exc})."
            ) from exc
        missing = [c for c in needed if c not in table.column_names]
        if missing:
            raise ValueError(f"{display_path(fs, file)}: episode metadata lacks columns {missing}.")
        tables.append(table.select(needed).cast(_episodes_schema(table.select(needed).schema)))
    return pa.concat_tables(tables).combine_chunks()


def _episodes_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema(
        [
            pa.field(f.name, pa.float64() if f.name.endswith("timestamp") else pa.int64())
            for f in schema
        ]
    )


def read_tasks(fs: Any, path: str) -> dict[int, str]:
    """``task_index`` to task string, from ``meta/tasks.parquet`` (the task is the frame's
    index, stored as a column ``task`` or as pandas' ``__index_level_0__``)."""
    tasks_path = f"{path}/meta/tasks.parquet"
    raw = _read_bytes(fs, tasks_path, "the task strings")
    try:
        table = pq.read_table(pa.BufferReader(raw))
    except pa.ArrowInvalid as exc:
        raise ValueError(
            f"{display_path(fs, tasks_path)}: cannot read it as Parquet ({exc})."
        ) from exc
    names = [n for n in ("task", "__index_level_0__") if n in table.column_names]
    if "task_index" not in table.column_names or not names:
        raise ValueError(
            f"{display_path(fs, tasks_path)}: expected columns 'task_index' and 'task', got "
            f"{table.column_names}."
        )
    return dict(
        zip(table.column("task_index").to_pylist(), table.column(names[0]).to_pylist(), strict=True)
    )


def read_stats_json(fs: Any, path: str) -> str:
    """``meta/stats.json`` as one JSON string, every list of numbers as NumPy would give it
    back (as Ray Data does); ``"{}"`` when the file is absent."""
    stats_path = f"{path}/meta/stats.json"
    try:
        with fs.open(stats_path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return "{}"
    try:
        stats = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{display_path(fs, stats_path)}: not valid JSON ({exc}).") from exc
    if not stats:
        return "{}"

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return np.asarray(value).tolist()

    return json.dumps(convert(stats))


def row_bytes(features: dict[str, Any]) -> int:
    """Estimated bytes of one decoded row: cameras at one byte a value, other features at
    their dtype's size, and the three int32 of ``task``, ``dataset_index`` and ``stats``."""
    total = 3 * 4
    for feature in features.values():
        shape = feature.get("shape") or [1]
        if feature["dtype"] in ("video", "image"):
            total += int(np.prod(shape))
            continue
        try:
            total += int(np.prod(shape)) * np.dtype(feature["dtype"]).itemsize
        except TypeError:  # a dtype NumPy does not know (string, ...): not counted
            continue
    return total


def frame_type(ndim: int = 3) -> pa.DataType:
    return ArrowVariableShapedTensorType(pa.uint8(), ndim)


def output_schema(
    data_schema: pa.Schema,
    video_keys: list[str],
    image_keys: list[str],
    delta_steps: dict[str, list[int]],
) -> pa.Schema:
    """The columns read: the data file's, with image cameras decoded in place; then the
    video cameras; ``task``, ``dataset_index``, ``stats``; then ``<key>_is_pad`` of each
    windowed feature (data columns in file order, then video cameras)."""
    from shardflow.connectors.lerobot.windows import window_type

    fields = []
    for f in data_schema:
        if f.name in image_keys:
            fields.append(pa.field(f.name, frame_type(4 if f.name in delta_steps else 3)))
        elif f.name in delta_steps:
            fields.append(pa.field(f.name, window_type(f.type)))
        else:
            fields.append(f.remove_metadata())
    for key in video_keys:
        fields.append(pa.field(key, frame_type(4 if key in delta_steps else 3)))
    dictionary = pa.dictionary(pa.int32(), pa.string())
    fields += [
        pa.field("task", dictionary),
        pa.field("dataset_index", pa.int32()),
        pa.field("stats", dictionary),
    ]
    pad = ArrowVariableShapedTensorType(pa.bool_(), 1)
    windowed = [f.name for f in data_schema if f.name in delta_steps]
    windowed += [k for k in video_keys if k in delta_steps]
    fields += [pa.field(f"{name}_is_pad", pad) for name in windowed]
    return pa.schema(fields)


def frames_of(episodes: pa.Table) -> int:
    return int(pc.sum(pc.subtract(episodes.column(TO), episodes.column(FROM))).as_py() or 0)


def load_root(
    root: Any,
    filesystem: Any,
    storage_options: dict[str, Any] | None,
    frame_tolerance_s: float | None,
    delta_timestamps: dict[str, list[float]] | None,
    delta_tolerance_s: float,
) -> tuple[DatasetRoot, pa.Table]:
    """Read one root's metadata: its :class:`DatasetRoot` and its episodes table."""
    from shardflow.connectors.lerobot.windows import delta_steps_for

    fs, path = open_root(root, filesystem, storage_options)
    info = read_info(fs, path)
    features = info["features"]
    video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
    image_keys = [k for k, f in features.items() if f["dtype"] == "image"]
    episodes = read_episodes(fs, path, video_keys)
    if episodes.num_rows == 0:
        raise ValueError(f"{display_path(fs, path)}: the dataset has no episodes.")
    tasks = read_tasks(fs, path)
    fps = info["fps"]
    steps = delta_steps_for(delta_timestamps, features, fps, delta_tolerance_s, str(root))
    first = episodes.slice(0, 1).to_pylist()[0]
    data_file = f"{path}/" + info["data_path"].format(
        chunk_index=first[DATA_CHUNK], file_index=first[DATA_FILE]
    )
    try:
        with fs.open(data_file, "rb") as f:
            data_schema = pq.read_schema(f)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{display_path(fs, data_file)}: data file of episode {first['episode_index']} is missing."
        ) from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(
            f"{display_path(fs, data_file)}: cannot read it as Parquet ({exc})."
        ) from exc
    missing = [
        c
        for c in ("index", "episode_index", "timestamp", "task_index")
        if c not in data_schema.names
    ]
    if missing:
        raise ValueError(f"{display_path(fs, data_file)}: data file lacks columns {missing}.")
    return (
        DatasetRoot(
            uri=str(root),
            fs=fs,
            path=path,
            data_path=info["data_path"],
            video_path=info.get("video_path"),
            video_keys=video_keys,
            image_keys=image_keys,
            tasks=tasks,
            schema=output_schema(data_schema, video_keys, image_keys, steps),
            row_bytes=row_bytes(features),
            total_frames=frames_of(episodes),
            fps=fps,
            stats_json=read_stats_json(fs, path),
            frame_tolerance_s=(
                frame_tolerance_s if frame_tolerance_s is not None else 0.5 / float(fps)
            ),
            delta_steps=steps,
            features=features,
        ),
        episodes,
    )
