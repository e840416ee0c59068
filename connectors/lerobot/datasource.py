"""LeRobotDatasource: the frames of LeRobot v3 datasets, one row per frame."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shardflow.connectors.lerobot.metadata import DatasetRoot, frames_of, load_root
from shardflow.connectors.lerobot.planning import (
    Segment,
    episode_ranges,
    episodes_overlapping,
    file_group_ranges,
    plan_tasks,
)
from shardflow.connectors.lerobot.reading import read_segment
from shardflow.connectors.lerobot.windows import check_delta_timestamps
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.optional import require

#: Blocks are cut at about this many bytes of decoded rows when the execution's context
#: does not say (Ray Data's ``target_max_block_size``).
DEFAULT_BLOCK_BYTES = 128 * 1024 * 1024
GRANULARITIES = ("file", "episode")


class LeRobotDatasource(Datasource):
    """Reads LeRobot v3 datasets, one row per frame. See :func:`shardflow.read_lerobot`.

    Args:
        root: A dataset root (local path or URI), or a list of roots read as one dataset
            (``dataset_index`` tells them apart). Roots must share cameras, fps and features.
        episodes: Read only these ``episode_index`` values (in every root).
        read_granularity: ``"file"``: a read task per file group; ``"episode"``: per episode.
        filesystem: An fsspec or ``pyarrow.fs`` filesystem for every file of the dataset.
        storage_options: fsspec options of the filesystem inferred from the root.
        frame_tolerance_s: Largest distance between a row's timestamp and its video frame's
            (default ``0.5 / fps``).
        delta_timestamps: ``{feature: [offsets in seconds]}``: temporal windows.
        delta_tolerance_s: Tolerance of the offsets' alignment to the frame grid.

    Examples:
        >>> import os, tempfile
        >>> import shardflow as sf
        >>> from shardflow.connectors.lerobot.sample import write_sample_dataset
        >>> from shardflow.datasource import LeRobotDatasource
        >>> root = os.path.join(tempfile.mkdtemp(), "robot")
        >>> _ = write_sample_dataset(root, episode_lengths=[3, 2])
        >>> source = LeRobotDatasource(root, episodes=[1])
        >>> [row["index"] for row in sf.read_datasource(source).take_all()]
        [3, 4]
    """

    def __init__(
        self,
        root: str | PurePath | list[str | PurePath],
        *,
        episodes: list[int] | None = None,
        read_granularity: str = "file",
        filesystem: Any = None,
        storage_options: dict[str, Any] | None = None,
        frame_tolerance_s: float | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        delta_tolerance_s: float = 1e-4,
    ):
        # The extra's libraries are checked first, as Ray Data checks lerobot's.
        require("av", "lerobot", "read_lerobot")
        require("PIL.Image", "lerobot", "read_lerobot")
        roots = [root] if isinstance(root, (str, PurePath)) else root
        if not isinstance(roots, (list, tuple)) or not roots:
            raise TypeError(f"root must be a path or a non-empty list of paths, got {root!r}.")
        for r in roots:
            if not isinstance(r, (str, PurePath)):
                raise TypeError(f"root must be a path or a list of paths, got {r!r} in it.")
        if read_granularity not in GRANULARITIES:
            raise ValueError(
                f"read_granularity must be one of {list(GRANULARITIES)}, got {read_granularity!r}."
            )
        if frame_tolerance_s is not None and (
            isinstance(frame_tolerance_s, bool)
            or not isinstance(frame_tolerance_s, (int, float))
            or not frame_tolerance_s > 0
        ):
            raise ValueError(
                f"frame_tolerance_s must be a positive number of seconds, got {frame_tolerance_s!r}."
            )
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(
                f"storage_options must be a dict, got {type(storage_options).__name__}."
            )
        check_delta_timestamps(delta_timestamps, delta_tolerance_s)
        self._granularity = read_granularity
        self._delta = bool(delta_timestamps)
        self.roots: list[DatasetRoot] = []
        self._episodes: list[pa.Table] = []
        for r in roots:
            loaded, table = load_root(
                r,
                filesystem,
                storage_options,
                frame_tolerance_s,
                delta_timestamps,
                delta_tolerance_s,
            )
            self.roots.append(loaded)
            self._episodes.append(table)
        _check_same_shape(self.roots)
        if episodes is not None:
            self._keep_episodes(episodes)

    def _keep_episodes(self, episodes: Any) -> None:
        if isinstance(episodes, (str, bytes)) or not hasattr(episodes, "__iter__"):
            raise TypeError(f"episodes must be a list of episode_index values, got {episodes!r}.")
        wanted = list(episodes)
        if not wanted:
            raise ValueError(
                "episodes must be a non-empty list of episode_index values, or None to read "
                "every episode."
            )
        if not all(isinstance(e, int) and not isinstance(e, bool) for e in wanted):
            raise TypeError(f"episodes must hold ints (episode_index values), got {wanted!r}.")
        requested = sorted(set(wanted))
        found: set[int] = set()
        for i, table in enumerate(self._episodes):
            kept = table.filter(
                pc.is_in(table.column("episode_index"), pa.array(requested, pa.int64()))
            )
            found.update(kept.column("episode_index").to_pylist())
            self._episodes[i] = kept
            self.roots[i] = self.roots[i].with_(total_frames=frames_of(kept))
        missing = sorted(set(requested) - found)
        if missing:
            raise ValueError(
                f"episodes {missing} were not found in any dataset root (requested {requested})."
            )

    def get_name(self) -> str:
        return "LeRobot"

    def reads_hold_the_gil(self) -> bool:
        return False  # FFmpeg, Pillow and Arrow do the work

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(r.total_frames * r.row_bytes for r in self.roots) or None

    def _ranges(self) -> list[Segment]:
        ranges: list[Segment] = []
        for number, (root, table) in enumerate(zip(self.roots, self._episodes)):
            if self._granularity == "episode":
                spans = episode_ranges(table)
            else:
                spans = file_group_ranges(table, root.video_keys)
            ranges += [(number, start, end) for start, end in sorted(spans)]
        return ranges

    def default_num_blocks(self) -> int:
        """Read tasks of the chosen granularity: one per file group or per episode."""
        return len(self._ranges())

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        ranges = self._ranges()
        if self._delta and parallelism > len(ranges):
            raise ValueError(
                f"delta_timestamps needs read tasks of whole episodes, so override_num_blocks "
                f"({parallelism}) may not exceed the number of "
                f"{'episodes' if self._granularity == 'episode' else 'file groups'} "
                f"({len(ranges)})."
            )
        block_bytes = int(
            getattr(data_context, "target_max_block_size", None) or DEFAULT_BLOCK_BYTES
        )
        tasks = []
        for segments in plan_tasks(ranges, parallelism):
            planned = []
            rows = 0
            files: list[str] = []
            for number, start, end in segments:
                table = episodes_overlapping(self._episodes[number], start, end)
                planned.append((number, start, end, table))
                rows += end - start
                files += _files_of(self.roots[number], table)
            roots = {n: self.roots[n] for n in sorted({s[0] for s in segments})}
            metadata = BlockMetadata(
                num_rows=rows,
                size_bytes=sum((e - s) * self.roots[n].row_bytes for n, s, e in segments),
                input_files=files,
            )
            read = functools.partial(_read_task, roots, planned, block_bytes)
            tasks.append(
                ReadTask(read, metadata, self.roots[segments[0][0]].schema, per_task_row_limit)
            )
        return tasks


def _read_task(
    roots: dict[int, DatasetRoot],
    planned: list[tuple[int, int, int, pa.Table]],
    block_bytes: int,
) -> Iterator[pa.Table]:
    for number, start, end, episodes in planned:
        yield from read_segment(roots[number], number, start, end, episodes, block_bytes)


def _files_of(root: DatasetRoot, episodes: pa.Table) -> list[str]:
    from shardflow.connectors.lerobot.metadata import DATA_CHUNK, DATA_FILE, video_columns

    def pairs(chunk: str, file: str) -> list[tuple[int, int]]:
        return sorted(
            set(zip(episodes.column(chunk).to_pylist(), episodes.column(file).to_pylist()))
        )

    files = [root.shown(root.data_file(c, f)) for c, f in pairs(DATA_CHUNK, DATA_FILE)]
    for key in root.video_keys:
        chunk, file, _ = video_columns(key)
        files += [root.shown(root.video_file(key, c, f)) for c, f in pairs(chunk, file)]
    return files


def _check_same_shape(roots: list[DatasetRoot]) -> None:
    """Roots read together must give one schema: the same cameras, fps and other features."""
    first = roots[0]

    def others(root: DatasetRoot) -> dict[str, tuple]:
        return {
            k: (v["dtype"], tuple(v.get("shape") or ()))
            for k, v in root.features.items()
            if v["dtype"] not in ("video", "image")
        }

    for root in roots[1:]:
        for what, mine, theirs in (
            ("video_keys", sorted(first.video_keys), sorted(root.video_keys)),
            ("image_keys", sorted(first.image_keys), sorted(root.image_keys)),
            ("fps", first.fps, root.fps),
            ("features", sorted(others(first).items()), sorted(others(root).items())),
        ):
            if mine != theirs:
                raise ValueError(
                    f"{what} mismatch: {first.uri!r} has {mine} but {root.uri!r} has {theirs}; "
                    "roots read together must share cameras, fps and features."
                )
