"""Planning a LeRobot read: ranges of the global frame ``index``, grouped into read tasks.

A base range is one episode (``read_granularity="episode"``) or one *file group*: the
consecutive episodes whose frames share one file (the MP4 of every video camera, or the data
Parquet file without video), so each file is opened once. More tasks than base ranges split
ranges in proportion to their rows; fewer merge neighbouring ranges. A segment is
``(root number, start, end)``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from shardflow.connectors.lerobot.metadata import DATA_CHUNK, DATA_FILE, FROM, TO, video_columns

Segment = tuple[int, int, int]


def episode_ranges(episodes: pa.Table) -> list[tuple[int, int]]:
    return list(zip(episodes.column(FROM).to_pylist(), episodes.column(TO).to_pylist()))


def file_group_ranges(episodes: pa.Table, video_keys: list[str]) -> list[tuple[int, int]]:
    """One range per run of adjacent episodes in the same files. Episodes of one file that
    are not adjacent (an ``episodes`` subset skipped one between them) make separate runs."""
    if video_keys:
        names = [name for key in video_keys for name in video_columns(key)[:2]]
    else:
        names = [DATA_CHUNK, DATA_FILE]
    locators = list(zip(*(episodes.column(n).to_pylist() for n in names)))
    spans = episode_ranges(episodes)
    ranges: list[tuple[int, int]] = []
    current = None
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0]):
        start, end = spans[i]
        if current is not None and current[0] == locators[i] and current[2] == start:
            current = (current[0], current[1], end)
            continue
        if current is not None:
            ranges.append((current[1], current[2]))
        current = (locators[i], start, end)
    if current is not None:
        ranges.append((current[1], current[2]))
    return ranges


def split_ranges(ranges: list[Segment], target: int) -> list[Segment]:
    """About ``target`` segments, each range cut in parts in proportion to its rows (at
    least one part per range, at most one per row)."""
    total = sum(end - start for _, start, end in ranges)
    if total <= 0 or target <= len(ranges):
        return list(ranges)
    out: list[Segment] = []
    parts_left, rows_left = target, total
    for position, (root, start, end) in enumerate(ranges):
        rows = end - start
        after = len(ranges) - position - 1
        parts = max(1, round(rows * parts_left / rows_left)) if rows_left else 1
        parts = max(1, min(parts, rows, parts_left - after))
        step, extra = divmod(rows, parts)
        cursor = start
        for j in range(parts):
            size = step + (1 if j < extra else 0)
            out.append((root, cursor, cursor + size))
            cursor += size
        parts_left -= parts
        rows_left -= rows
    return out


def merge_adjacent(group: list[Segment]) -> list[Segment]:
    """Neighbouring segments of one root that touch become one."""
    merged: list[Segment] = []
    for root, start, end in group:
        if merged and merged[-1][0] == root and merged[-1][2] == start:
            merged[-1] = (root, merged[-1][1], end)
        else:
            merged.append((root, start, end))
    return merged


def plan_tasks(ranges: list[Segment], parallelism: int) -> list[list[Segment]]:
    """The segments of each read task for ``parallelism`` tasks (<= 0: one per range)."""
    if parallelism > len(ranges):
        groups = [[r] for r in split_ranges(ranges, parallelism)]
    elif 0 < parallelism < len(ranges):
        base, extra = divmod(len(ranges), parallelism)
        groups, cursor = [], 0
        for g in range(parallelism):
            size = base + (1 if g < extra else 0)
            groups.append(ranges[cursor : cursor + size])
            cursor += size
    else:
        groups = [[r] for r in ranges]
    return [merge_adjacent(g) for g in groups]


def episodes_overlapping(episodes: pa.Table, start: int, end: int) -> pa.Table:
    """The episodes (rows of the table) with frames in ``[start, end)``."""
    mask = pc.and_(pc.less(episodes.column(FROM), end), pc.greater(episodes.column(TO), start))
    return episodes.filter(mask).combine_chunks()
