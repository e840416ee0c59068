"""A LeRobot read task: the rows of its segments, with camera frames decoded, as blocks.

A segment's data rows are read from its Parquet files (``index`` in ``[start, end)``, pushed
into the Parquet reader), then cut into batches of about ``max_block_bytes`` of decoded rows;
each batch's video frames are decoded from the MP4 files (kept open across the batches) and
its images with Pillow. Columns are in :func:`~.metadata.output_schema`'s order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shardflow.connectors.lerobot.frames import VideoReader, decode_image
from shardflow.connectors.lerobot.metadata import (
    DATA_CHUNK,
    DATA_FILE,
    FROM,
    TO,
    DatasetRoot,
    video_columns,
)
from shardflow.connectors.lerobot.windows import column_to_numpy, window_targets
from shardflow.sdk.tensor_types import ArrowVariableShapedTensorArray


def read_segment(
    root: DatasetRoot,
    dataset_index: int,
    start: int,
    end: int,
    episodes: pa.Table,
    max_block_bytes: int,
) -> Iterator[pa.Table]:
    """Blocks of the rows of ``root`` whose ``index`` is in ``[start, end)``; ``episodes``
    holds (at least) the episodes of those rows."""
    if end <= start:  # an episode of no frames
        return
    rows = _data_rows(root, start, end, episodes)
    if rows.num_rows == 0:
        return
    tasks = rows.column("task_index").to_pylist()
    unknown = sorted({t for t in tasks if t not in root.tasks})
    if unknown:
        raise ValueError(
            f"{root.shown(root.file('meta/tasks.parquet'))}: task_index values {unknown} of the "
            "data rows are not in it; the data and the tasks metadata disagree."
        )
    placement = _video_placement(episodes, root.video_keys)
    spans = dict(
        zip(
            episodes.column("episode_index").to_pylist(),
            zip(episodes.column(FROM).to_pylist(), episodes.column(TO).to_pylist()),
        )
    )
    window = _SegmentWindows(root, rows, spans) if root.delta_steps else None
    widest = max((len(s) for s in root.delta_steps.values()), default=1)
    batch_rows = max(1, max_block_bytes // max(1, root.row_bytes) // widest)
    videos = VideoReader(root.fs)
    try:
        for first in range(0, rows.num_rows, batch_rows):
            batch = rows.slice(first, batch_rows)
            yield _batch(root, dataset_index, batch, first, tasks, placement, videos, window)
    finally:
        videos.close()


def _data_rows(root: DatasetRoot, start: int, end: int, episodes: pa.Table) -> pa.Table:
    files = sorted(
        set(zip(episodes.column(DATA_CHUNK).to_pylist(), episodes.column(DATA_FILE).to_pylist()))
    )
    tables = []
    for chunk, number in files:
        path = root.data_file(chunk, number)
        try:
            with root.fs.open(path, "rb") as f:
                tables.append(
                    pq.read_table(f, filters=[("index", ">=", start), ("index", "<", end)])
                )
        except FileNotFoundError:
            raise FileNotFoundError(f"{root.shown(path)}: data file is missing.") from None
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"{root.shown(path)}: cannot read it as Parquet ({exc}).") from exc
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return table.replace_schema_metadata(None)


def _video_placement(episodes: pa.Table, video_keys: list[str]) -> dict[str, dict[int, tuple]]:
    """Per camera: episode to ``(chunk, file, from_timestamp)`` of its MP4."""
    numbers = episodes.column("episode_index").to_pylist()
    return {
        key: dict(zip(numbers, zip(*(episodes.column(c).to_pylist() for c in video_columns(key)))))
        for key in video_keys
    }


def _video_frames(
    root: DatasetRoot,
    key: str,
    requests: list[tuple[Any, int, float]],
    placement: dict[int, tuple],
    videos: VideoReader,
) -> dict[Any, np.ndarray]:
    """Frames of camera ``key`` for ``(slot, episode, seconds into the episode)`` requests,
    decoded file by file; returns slot to frame."""
    by_file: dict[tuple[int, int], list[tuple[Any, float]]] = {}
    for slot, episode, seconds in requests:
        chunk, number, offset = placement[episode]
        by_file.setdefault((chunk, number), []).append((slot, offset + seconds))
    frames: dict[Any, np.ndarray] = {}
    for (chunk, number), wanted in by_file.items():
        path = root.video_file(key, chunk, number)
        decoded = videos.frames_at(
            path, root.shown(path), [t for _, t in wanted], root.frame_tolerance_s
        )
        frames.update(zip((slot for slot, _ in wanted), decoded))
    return frames


def _images(root: DatasetRoot, column: Any, key: str) -> list[np.ndarray]:
    return [decode_image(cell, root.fs, root.path, key) for cell in column.to_pylist()]


def _tensors(arrays: list[np.ndarray]) -> pa.Array:
    return ArrowVariableShapedTensorArray.from_numpy(arrays)


class _SegmentWindows:
    """What the windows of a segment need, made once for all its batches: each row's
    episode span, and the windowed data columns (and images) of the whole segment, since
    a window near a batch's edge reaches rows of the next batch."""

    def __init__(self, root: DatasetRoot, rows: pa.Table, spans: dict[int, tuple[int, int]]):
        self.index = np.asarray(rows.column("index").to_pylist(), np.int64)
        self.episode = rows.column("episode_index").to_pylist()
        self.low = np.asarray([spans[e][0] for e in self.episode], np.int64)
        self.high = np.asarray([spans[e][1] for e in self.episode], np.int64)
        self.start = int(self.index[0]) if len(self.index) else 0
        end = int(self.index[-1]) + 1 if len(self.index) else 0
        contiguous = end - self.start == len(self.index)
        if len(self.index) and (
            not contiguous or self.low.min() < self.start or self.high.max() > end
        ):
            raise RuntimeError(
                "delta_timestamps needs read segments of whole episodes with contiguous "
                f"index values; {root.uri!r} has a segment that is not."
            )
        self.values: dict[str, np.ndarray] = {}
        for name in rows.column_names:
            if name not in root.delta_steps:
                continue
            if name in root.image_keys:
                self.values[name] = np.stack(_images(root, rows.column(name), name))
            else:
                self.values[name] = column_to_numpy(rows.column(name), name)

    def targets(self, first: int, count: int, steps: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Frames (global ``index``) of the windows of rows ``first..first+count`` of the
        segment, and their pad masks."""
        part = slice(first, first + count)
        return window_targets(self.index[part], self.low[part], self.high[part], steps)


def _batch(
    root: DatasetRoot,
    dataset_index: int,
    batch: pa.Table,
    first: int,
    tasks: list[int],
    placement: dict[str, dict[int, tuple]],
    videos: VideoReader,
    window: _SegmentWindows | None,
) -> pa.Table:
    count = batch.num_rows
    episodes = batch.column("episode_index").to_pylist()
    pads: dict[str, list[np.ndarray]] = {}
    columns: dict[str, Any] = {}
    for name in batch.column_names:
        steps = root.delta_steps.get(name)
        if steps is not None and window is not None:
            targets, pad = window.targets(first, count, steps)
            columns[name] = _tensors(list(window.values[name][targets - window.start]))
            pads[name] = list(pad)
        elif name in root.image_keys:
            columns[name] = _tensors(_images(root, batch.column(name), name))
        else:
            columns[name] = batch.column(name)
    seconds = batch.column("timestamp").to_pylist()
    for key in root.video_keys:
        steps = root.delta_steps.get(key)
        if steps is not None and window is not None:
            targets, pad = window.targets(first, count, steps)
            low = window.low[first : first + count]
            requests: list[tuple[Any, int, float]] = [
                ((row, j), episodes[row], (int(targets[row, j]) - int(low[row])) / float(root.fps))
                for row in range(count)
                for j in range(len(steps))
            ]
            frames = _video_frames(root, key, requests, placement[key], videos)
            columns[key] = _tensors(
                [np.stack([frames[(row, j)] for j in range(len(steps))]) for row in range(count)]
            )
            pads[key] = list(pad)
        else:
            rows: list[tuple[Any, int, float]] = [
                (row, episodes[row], seconds[row]) for row in range(count)
            ]
            frames = _video_frames(root, key, rows, placement[key], videos)
            columns[key] = _tensors([frames[row] for row in range(count)])
    columns["task"] = pa.array(
        [root.tasks[t] for t in tasks[first : first + count]], pa.string()
    ).dictionary_encode()
    columns["dataset_index"] = pa.array(np.full(count, dataset_index, np.int32))
    columns["stats"] = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(count, np.int32)), pa.array([root.stats_json], pa.string())
    )
    for name in [n for n in batch.column_names if n in pads] + [
        k for k in root.video_keys if k in pads
    ]:
        columns[f"{name}_is_pad"] = _tensors([np.asarray(p, bool) for p in pads[name]])
    return pa.table(columns)
