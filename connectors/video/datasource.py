"""VideoDatasource: one row per frame, decoded with PyAV, a long file split across read tasks.

Columns, as in Ray Data: ``frame`` (uint8 RGB, ``(height, width, 3)``), ``frame_index``
(int64) and, with ``include_timestamps``, ``frame_timestamp`` (the frame's start and end in
seconds, float32). A read task streams its frames in blocks of at most ~32 MiB, so a long
video never sits whole in memory; an MP4 or MOV file larger than a task's share of the input
is cut at keyframes into time ranges read by different tasks (see
:mod:`shardflow.connectors.video.time_ranges`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.video.decoding import (
    FRAME_COLUMN,
    FRAME_INDEX_COLUMN,
    FRAME_TIMESTAMP_COLUMN,
    DecodeOptions,
    decode_frames,
    open_container,
    pyav,
    video_stream,
)
from shardflow.connectors.video.time_ranges import TimeRange, plan_time_ranges
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.file_reading import FileUnit

# Ray Data's list: what read_videos picks from a folder.
VIDEO_EXTENSIONS = [
    *("mp4", "mkv", "mov", "avi", "wmv", "flv", "webm", "m4v", "3gp", "mpeg", "mpg", "ts"),
    *("ogv", "rm", "rmvb", "vob", "asf", "f4v", "m2ts", "mts", "divx", "xvid", "mxf"),
]
# A time range holds at least this much encoded video: each task opens the container and
# seeks, which costs about as much as decoding a few frames.
MIN_RANGE_BYTES = 4 * 1024 * 1024  # the default of VideoDatasource._MIN_RANGE_BYTES


def _check_fps(fps: Any) -> int | None:
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, int) or fps <= 0):
        raise ValueError(f"Expected `fps` to be a positive integer, but got {fps} instead.")
    return fps


def _check_resize(resize: Any) -> tuple[int, int] | None:
    if resize is None:
        return None
    if (
        not isinstance(resize, (tuple, list))
        or len(resize) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in resize)
    ):
        raise ValueError(
            "Expected `resize` to contain two integers for height and width, but got "
            f"{resize} instead."
        )
    if resize[0] <= 0 or resize[1] <= 0:
        raise ValueError(
            f"Expected `resize` to contain positive integers, but got {resize} instead."
        )
    return int(resize[0]), int(resize[1])


class VideoDatasource(FileBasedDatasource):
    """Reads video files with PyAV. See :func:`shardflow.read_videos` for the arguments."""

    _FILE_EXTENSIONS = VIDEO_EXTENSIONS
    _RANDOM_ACCESS = True  # containers seek (MP4 indexes, time ranges)
    _ENCODING_RATIO = 40.0  # RGB frames per byte of compressed video, roughly
    _MIN_RANGE_BYTES = MIN_RANGE_BYTES

    def __init__(
        self,
        paths: Any,
        *,
        include_timestamps: bool = False,
        fps: int | None = None,
        resize: tuple[int, int] | None = None,
        **kwargs: Any,
    ):
        pyav()  # a missing PyAV is reported when read_videos is called
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_videos: {sorted(self._file_args)}.")
        self._options = DecodeOptions(
            include_timestamps=bool(include_timestamps),
            fps=_check_fps(fps),
            resize=_check_resize(resize),
        )

    def get_name(self) -> str:
        return "Video"

    def _static_schema(self) -> pa.Schema | None:
        if self._options.resize is None:
            return None
        shape = [*self._options.resize, 3]
        fields = [
            (FRAME_COLUMN, pa.fixed_shape_tensor(pa.uint8(), shape, permutation=[0, 1, 2])),
            (FRAME_INDEX_COLUMN, pa.int64()),
        ]
        if self._options.include_timestamps:
            fields.append((FRAME_TIMESTAMP_COLUMN, pa.fixed_shape_tensor(pa.float32(), [2])))
        return pa.schema(fields)

    # -- planning (driver) ----------------------------------------------------------------

    def _split_file(self, unit: FileUnit, target_bytes: int) -> list[FileUnit]:
        target = max(target_bytes, self._MIN_RANGE_BYTES)
        if unit.size is None or unit.size < 2 * target:
            return [unit]
        try:
            with self._open_file(unit.path) as f:
                container = open_container(self._local_or(unit.path, f))
                try:
                    ranges = plan_time_ranges(video_stream(container), target)
                finally:
                    container.close()
        except Exception:  # the read reports what is wrong with the file
            return [unit]
        if ranges is None:
            return [unit]
        return [dataclasses.replace(unit, size=size, split=r) for r, size in ranges]

    def _local_or(self, path: str, f: Any) -> Any:
        """The local path when FFmpeg can open it itself (no Python call per read), else
        the open file."""
        if self._reads_local_disk() and not self._open_stream_args:
            return path
        return f

    # -- reading (worker) -----------------------------------------------------------------

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        options = dataclasses.replace(self._options, threads=self.arrow_threads_help())
        container = open_container(self._local_or(unit.path, f))
        try:
            time_range: TimeRange | None = unit.split
            yield from decode_frames(container, options, time_range)
        finally:
            container.close()

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        container = open_container(f)
        try:
            yield from decode_frames(container, self._options)
        finally:
            container.close()
