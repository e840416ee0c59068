"""Splitting a video file into time ranges that read tasks decode independently.

A container whose index lists every frame of the video stream (MP4 and MOV: their sample
tables are read with the header, without reading any frame) can be cut at keyframes: a read
task seeks to its range's first keyframe and decodes until the next range's first keyframe.
The index gives, without decoding, how many frames come before each keyframe, so every task
numbers its frames as a read of the whole file would. Containers whose index is partial or
missing (Matroska/WebM cues list keyframes only, AVI, MPEG-TS) are read whole by one task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimeRange:
    """The frames of a video between two keyframes of its index.

    Args:
        start_dts: Decoding timestamp (in the stream's time base) of the range's first
            keyframe; None from the start of the file.
        end_dts: Decoding timestamp of the next range's first keyframe; None to the end.
        first_index: Frames of the stream decoded before the first keyframe: its position in
            the index. The range's frames are numbered from there (plus the open-GOP frames
            that follow the keyframe but are shown before it, counted when decoding).
    """

    start_dts: int | None
    end_dts: int | None
    first_index: int


def plan_time_ranges(stream: Any, target_bytes: int) -> list[tuple[TimeRange, int]] | None:
    """Cut a video stream at keyframes into ranges of about ``target_bytes`` each.

    Args:
        stream: PyAV's video stream of an open container.
        target_bytes: The encoded bytes a range should hold (at least).

    Returns:
        ``(range, encoded bytes)`` pairs covering the whole stream in order, or None when the
        container's index does not list every frame (the file is then read whole).
    """
    entries = stream.index_entries
    count = len(entries)
    if count < 2 or not stream.frames or count != stream.frames:
        return None
    timestamps, positions, keyframes = [], [], []
    for i, entry in enumerate(entries):
        timestamps.append(entry.timestamp)
        positions.append(entry.pos)
        if entry.is_keyframe:
            keyframes.append(i)
    if any(b < a for a, b in zip(timestamps, timestamps[1:])) or min(positions) < 0:
        return None
    starts = [0]
    for i in keyframes:
        if i and positions[i] - positions[starts[-1]] >= target_bytes:
            starts.append(i)
    if len(starts) < 2:
        return None
    end_of_data = positions[-1] + entries[count - 1].size
    ranges = []
    for n, first in enumerate(starts):
        last = starts[n + 1] if n + 1 < len(starts) else None
        start_dts = timestamps[first] if n else None
        end_dts = timestamps[last] if last is not None else None
        size = (positions[last] if last is not None else end_of_data) - positions[first]
        ranges.append((TimeRange(start_dts, end_dts, first), max(size, 0)))
    return ranges
