"""Camera frames of LeRobot datasets: MP4 frames picked by timestamp (PyAV), images (Pillow).

A row's video frame is chosen as Ray Data 2.60 chooses it (lerobot's torchcodec decoding in
approximate seek mode): the timestamp ``t`` (the episode's start in the MP4 plus the row's
``timestamp``) names frame ``round(t * average_fps)``, the frame shown at
``index / average_fps``; among the frames loaded for one request the one nearest to ``t`` is
returned, and it must lie within ``frame_tolerance_s`` of ``t``, or the read fails naming the
file. Frames are HWC uint8 RGB.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from shardflow.sdk.optional import require


def pyav() -> Any:
    return require("av", "lerobot", "read_lerobot (video cameras)")


class _OpenVideo:
    """One MP4 file open for decoding: its container, first video stream and frame rate."""

    def __init__(self, fs: Any, path: str, shown: str):
        av = pyav()
        self.shown = shown
        try:
            self.file = fs.open(path, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"{shown}: video file is missing.") from None
        try:
            self.container = av.open(self.file, mode="r")
            streams = self.container.streams.video
            if not streams:
                raise ValueError("it holds no video stream")
        except (av.FFmpegError, ValueError) as exc:
            self.file.close()
            raise ValueError(f"{shown}: cannot decode it as a video ({exc}).") from exc
        self.stream = streams[0]
        rate = self.stream.average_rate or self.stream.guessed_rate
        if not rate:
            self.close()
            raise ValueError(f"{shown}: the video stream has no frame rate.")
        self.fps = float(rate)
        self.frames = int(self.stream.frames or 0)  # 0 when the container does not say

    def close(self) -> None:
        try:
            self.container.close()
        finally:
            self.file.close()

    def decode_at(self, indices: list[int]) -> dict[int, tuple[float, np.ndarray]]:
        """For each frame index, ``(pts seconds, frame)`` of the frame shown at
        ``index / fps``: the last frame whose timestamp is not after it."""
        av = pyav()
        targets = sorted(set(indices))
        time_base = self.stream.time_base
        tick = float(time_base) / 2 if time_base else 1e-9
        first_time = targets[0] / self.fps
        found: dict[int, tuple[float, np.ndarray]] = {}
        previous: Any = None
        position = 0
        try:
            self.container.seek(
                int(first_time / float(time_base)) if time_base else 0,
                stream=self.stream,
                backward=True,
                any_frame=False,
            )
            for frame in self.container.decode(self.stream):
                if frame.pts is None:
                    continue
                time = float(frame.pts * time_base)
                while position < len(targets) and time > targets[position] / self.fps + tick:
                    if previous is None:  # the first frame decoded is already past it
                        previous = (time, frame)
                    found[targets[position]] = _picture(previous)
                    position += 1
                if position == len(targets):
                    break
                previous = (time, frame)
        except av.FFmpegError as exc:
            raise ValueError(f"{self.shown}: cannot decode it as a video ({exc}).") from exc
        if position < len(targets) and previous is None:
            raise ValueError(f"{self.shown}: the video stream holds no frames.")
        for index in targets[position:]:  # after the last frame
            if self.frames and index >= self.frames:
                raise ValueError(
                    f"{self.shown}: frame {index} (at {index / self.fps:.4f} s) is past the "
                    f"video's last frame ({self.frames} frames at {self.fps:g} fps)."
                )
            found[index] = _picture(previous)
        return found


def _picture(entry: tuple[float, Any]) -> tuple[float, np.ndarray]:
    time, frame = entry
    if not isinstance(frame, np.ndarray):
        frame = frame.to_ndarray(format="rgb24")
    return time, frame


class VideoReader:
    """Decodes frames by timestamp from the MP4 files of one read task, keeping each file
    open until :meth:`close` (a task reads its files' frames in several batches)."""

    def __init__(self, fs: Any):
        self._fs = fs
        self._open: dict[str, _OpenVideo] = {}

    def close(self) -> None:
        videos, self._open = self._open, {}
        for video in videos.values():
            video.close()

    def frames_at(
        self, path: str, shown: str, timestamps: list[float], tolerance_s: float
    ) -> list[np.ndarray]:
        """The frames of ``path`` for ``timestamps`` (seconds from the file's start)."""
        video = self._open.get(path)
        if video is None:
            video = self._open[path] = _OpenVideo(self._fs, path, shown)
        indices = [round(t * video.fps) for t in timestamps]
        negative = [t for t, i in zip(timestamps, indices) if i < 0]
        if negative:
            raise ValueError(f"{shown}: timestamps {negative[:3]} are before the video's start.")
        decoded = video.decode_at(indices)
        # Distances in float32, as lerobot compares them (torch tensors of Python floats).
        loaded = np.asarray([decoded[i][0] for i in indices], np.float32)
        queries = np.asarray(timestamps, np.float32)
        distance = np.abs(queries[:, None] - loaded[None, :])
        nearest = distance.argmin(axis=1)
        gaps = distance[np.arange(len(indices)), nearest]
        late = np.flatnonzero(gaps >= np.float32(tolerance_s))
        if late.size:
            k = int(late[0])
            raise ValueError(
                f"{shown}: no frame within frame_tolerance_s={tolerance_s} s of timestamp "
                f"{timestamps[k]:.6f} s (the nearest is at {float(loaded[nearest[k]]):.6f} s); "
                "the episode's from_timestamp in meta/episodes or the rows' timestamps do not "
                "match the video. Raise frame_tolerance_s to accept it."
            )
        return [decoded[indices[int(j)]][1] for j in nearest]


def decode_image(cell: Any, fs: Any, root_path: str, key: str) -> np.ndarray:
    """An image cell (Hugging Face's ``{bytes, path}`` struct, or raw bytes) as HWC uint8
    RGB; a cell without bytes is read from its path (relative to the dataset's root)."""
    image_module = require("PIL.Image", "lerobot", "read_lerobot (image cameras)")
    data = cell.get("bytes") if isinstance(cell, dict) else cell
    if data is None and isinstance(cell, dict) and cell.get("path"):
        path = cell["path"]
        path = path if path.startswith(root_path) else f"{root_path}/{path}"
        with fs.open(path, "rb") as f:
            data = f.read()
    if data is None:
        raise ValueError(f"image column {key!r}: a row has neither image bytes nor a path.")
    try:
        with image_module.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise ValueError(f"image column {key!r}: cannot decode an image ({exc}).") from exc
