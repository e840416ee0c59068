"""Decoding frames with PyAV into blocks, streaming: a block holds at most ~32 MiB of frames.

Frames keep the numbering and timestamps of Ray Data's ``read_videos`` (which decodes with
decord): ``frame_index`` counts every frame of the video stream in presentation order, from
0, whatever the subsampling or the range a task decodes; ``frame_timestamp`` is the frame's
start and end in seconds (float32), from its presentation timestamp and duration.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.video.time_ranges import TimeRange
from shardflow.sdk.optional import require

FRAME_COLUMN = "frame"
FRAME_INDEX_COLUMN = "frame_index"
FRAME_TIMESTAMP_COLUMN = "frame_timestamp"
BLOCK_BYTES = 32 * 1024 * 1024


def pyav() -> Any:
    return require("av", "video", "Reading video")


@dataclass(frozen=True)
class DecodeOptions:
    """What ``read_videos`` asks of each frame.

    Args:
        include_timestamps: Add ``frame_timestamp``.
        fps: Keep every ``round(source fps / fps)``-th frame (all when None).
        resize: ``(height, width)`` of the frames; the source's size when None.
        threads: Let FFmpeg decode on several threads (when the read has fewer tasks than
            cores).
    """

    include_timestamps: bool = False
    fps: int | None = None
    resize: tuple[int, int] | None = None
    threads: bool = False


def open_container(source: Any) -> Any:
    """Open a video container (a local path or a seekable binary file) for reading.

    Raises:
        ValueError: when FFmpeg cannot open it, with FFmpeg's reason.
    """
    av = pyav()
    try:
        return av.open(source, mode="r")
    except av.FFmpegError as exc:
        raise ValueError(f"cannot open it as a video ({type(exc).__name__}: {exc})") from exc


def video_stream(container: Any) -> Any:
    """The container's first video stream, or a ValueError saying there is none."""
    streams = container.streams.video
    if not streams:
        kinds = sorted({s.type for s in container.streams}) or ["no streams"]
        raise ValueError(f"it holds no video stream (it has: {', '.join(kinds)}).")
    return streams[0]


def decode_frames(
    container: Any, options: DecodeOptions, time_range: TimeRange | None = None
) -> Iterator[pa.Table]:
    """Decode the frames of ``container``'s video stream (or of one time range of it).

    Yields:
        Blocks of columns ``frame`` (uint8 ``(height, width, 3)`` RGB tensors),
        ``frame_index`` (int64) and, with ``include_timestamps``, ``frame_timestamp``.

    Raises:
        ValueError: when FFmpeg fails to decode the stream, with FFmpeg's reason.
    """
    av = pyav()
    stream = video_stream(container)
    if options.threads:
        stream.thread_type = "AUTO"
    stride = 1
    if options.fps is not None and stream.average_rate:
        stride = max(1, round(float(stream.average_rate) / options.fps))
    try:
        yield from _decode(container, stream, options, stride, time_range)
    except av.FFmpegError as exc:
        raise ValueError(f"cannot decode its video ({type(exc).__name__}: {exc})") from exc


def _decode(
    container: Any,
    stream: Any,
    options: DecodeOptions,
    stride: int,
    time_range: TimeRange | None,
) -> Iterator[pa.Table]:
    start_pts = end_pts = None
    index = 0
    packets: Iterable[Any] = container.demux(stream)
    if time_range is not None:
        index = time_range.first_index
        if time_range.start_dts is not None:
            packets, start_pts, leading = _seek(container, stream, time_range.start_dts)
            index += leading
    end_dts = time_range.end_dts if time_range is not None else None
    reformat: dict[str, Any] = {"format": "rgb24"}
    if options.resize is not None:
        reformat.update(height=options.resize[0], width=options.resize[1])
        reformat["interpolation"] = "BICUBIC"  # FFmpeg's scale default, as decord's
    block = _BlockBuilder(options.include_timestamps)
    time_base = float(stream.time_base) if stream.time_base else 0.0
    default_duration = 1.0 / float(stream.average_rate) if stream.average_rate else 0.0
    for packet in packets:
        if end_dts is not None and end_pts is None and packet.dts is not None:
            if packet.dts >= end_dts:
                end_pts = packet.pts  # the next range starts at this keyframe
        for frame in packet.decode():
            pts = frame.pts
            if start_pts is not None and pts is not None and pts < start_pts:
                continue  # shown before this range's keyframe: the previous range's
            if end_pts is not None and pts is not None and pts >= end_pts:
                yield from block.flush()
                return
            if index % stride == 0:
                start = frame.time if frame.time is not None else index * default_duration
                duration = frame.duration * time_base if frame.duration else default_duration
                block.add(frame.to_ndarray(**reformat), index, start, start + duration)
                if block.nbytes >= BLOCK_BYTES:
                    yield from block.flush()
            index += 1
    yield from block.flush()


def _seek(container: Any, stream: Any, start_dts: int) -> tuple[Iterator[Any], int, int]:
    """Position the demuxer on the keyframe whose decoding timestamp is ``start_dts``.

    Returns:
        The packets from that keyframe on, its presentation timestamp, and how many of the
        packets that follow it (up to the next keyframe) are shown before it (the leading
        pictures of an open GOP, which belong to the previous range).
    """
    container.seek(start_dts, stream=stream, backward=True, any_frame=False)
    demuxed = container.demux(stream)
    keyframe = next((p for p in demuxed if p.dts is not None and p.dts >= start_dts), None)
    if keyframe is None or keyframe.dts != start_dts:
        # The seek landed past the keyframe: read from the start and skip up to it.
        container.seek(0, stream=stream, backward=True, any_frame=False)
        demuxed = container.demux(stream)
        keyframe = next((p for p in demuxed if p.dts is not None and p.dts >= start_dts), None)
    if keyframe is None or keyframe.dts != start_dts or keyframe.pts is None:
        raise ValueError(
            f"its index lists a keyframe at decoding timestamp {start_dts}, which the demuxer "
            "does not find; the file may be damaged."
        )
    group = [keyframe]
    for packet in demuxed:
        group.append(packet)
        if packet.is_keyframe or not packet.size:
            break
    leading = sum(1 for p in group[1:] if p.pts is not None and p.pts < keyframe.pts)
    return itertools.chain(group, demuxed), keyframe.pts, leading


class _BlockBuilder:
    """Frames gathered into one block, as columns."""

    def __init__(self, include_timestamps: bool):
        self.include_timestamps = include_timestamps
        self._reset()

    def _reset(self) -> None:
        self.frames: list[np.ndarray] = []
        self.indices: list[int] = []
        self.times: list[tuple[float, float]] = []
        self.nbytes = 0

    def add(self, frame: np.ndarray, index: int, start: float, end: float) -> None:
        self.frames.append(frame)
        self.indices.append(index)
        self.times.append((start, end))
        self.nbytes += frame.nbytes

    def flush(self) -> Iterator[pa.Table]:
        if not self.frames:
            return
        columns = {
            FRAME_COLUMN: pa.FixedShapeTensorArray.from_numpy_ndarray(np.stack(self.frames)),
            FRAME_INDEX_COLUMN: pa.array(self.indices, pa.int64()),
        }
        if self.include_timestamps:
            times = np.asarray(self.times, dtype=np.float32)
            columns[FRAME_TIMESTAMP_COLUMN] = pa.FixedShapeTensorArray.from_numpy_ndarray(times)
        self._reset()
        yield pa.table(columns)
