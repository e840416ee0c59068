"""read_lerobot against Ray Data 2.60's LeRobot reader, piece by piece.

Ray Data's ``read_lerobot`` needs lerobot >= 0.5 (its metadata loader and torchcodec video
path), which requires Python >= 3.12, torch < 2.11 and numpy < 2.3: it cannot be installed
beside this project's pins, so the whole reader cannot run here. Its own functions that do
not touch lerobot can: the planner (file groups, splits, merges), the window arithmetic, and
the segment reader (Parquet rows, images, tasks, windows, column order and types) given the
per-root state that lerobot's metadata would give it. These tests run those on the same
datasets as shardflow and compare; video frames are checked against the writer's truth in
tests/connectors/lerobot/.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from harness import differs
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("av")
lerobot_ray = pytest.importorskip("ray.data._internal.datasource.lerobot_datasource")

from shardflow.connectors.lerobot import planning
from shardflow.connectors.lerobot.sample import write_sample_dataset
from shardflow.connectors.lerobot.windows import window_targets
from shardflow.datasource import LeRobotDatasource

RaySource = lerobot_ray.LeRobotDatasource


@st.composite
def episode_tables(draw):
    lengths = draw(st.lists(st.integers(1, 30), min_size=1, max_size=12))
    per_file = draw(st.integers(1, 4))
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    kept = draw(st.lists(st.booleans(), min_size=len(lengths), max_size=len(lengths)))
    if not any(kept):
        kept[0] = True
    rows = [i for i in range(len(lengths)) if kept[i]]
    table = pa.table(
        {
            "episode_index": pa.array(rows, pa.int64()),
            "dataset_from_index": pa.array([starts[i] for i in rows], pa.int64()),
            "dataset_to_index": pa.array([starts[i + 1] for i in rows], pa.int64()),
            "data/chunk_index": pa.array([0] * len(rows), pa.int64()),
            "data/file_index": pa.array([i // (per_file + 1) for i in rows], pa.int64()),
            "videos/cam/chunk_index": pa.array([i // 7 for i in rows], pa.int64()),
            "videos/cam/file_index": pa.array([i // per_file for i in rows], pa.int64()),
        }
    )
    return table


def _as_ray(table: pa.Table) -> pa.Table:
    return table.append_column(
        "_global_from_index", table.column("dataset_from_index")
    ).append_column("_global_to_index", table.column("dataset_to_index"))


@settings(max_examples=150, deadline=None)
@given(episode_tables(), st.sampled_from([[], ["cam"]]), st.integers(-1, 40))
def test_plans_match_rays_planner(table, video_keys, parallelism):
    ours = planning.file_group_ranges(table, video_keys)
    assert ours == RaySource._slices_by_file_group(_as_ray(table), video_keys)
    assert planning.episode_ranges(table) == RaySource._slices_by_episode(_as_ray(table))
    ranges = [(0, s, e) for s, e in sorted(ours)]
    if parallelism > 0:
        assert planning.split_ranges(ranges, parallelism) == RaySource._split_ranges(
            ranges, parallelism
        )
    for group in planning.plan_tasks(ranges, parallelism):
        assert group == RaySource._merge_segments(group)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(1, 20)), min_size=1, max_size=10),
    st.lists(st.integers(-6, 6), min_size=1, max_size=5),
)
def test_window_targets_match_ray(episodes, steps):
    anchors, low, high = [], [], []
    for start, length in episodes:
        for i in range(start, start + length):
            anchors.append(i), low.append(start), high.append(start + length)
    ours = window_targets(np.asarray(anchors), np.asarray(low), np.asarray(high), steps)
    theirs = lerobot_ray._delta_targets(
        np.asarray(anchors), np.asarray(low), np.asarray(high), steps
    )
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


def _ray_blocks(source: LeRobotDatasource, block_bytes: int, without_video: bool) -> pa.Table:
    """Ray Data's segment reader over shardflow's plan and per-root state."""
    blocks = []
    for number, root in enumerate(source.roots):
        ray_root = lerobot_ray._LeRobotRoot(
            root=root.path, fs=root.fs, fs_root=root.path, data_path=root.data_path,
            video_path=root.video_path, video_keys=[] if without_video else root.video_keys,
            image_keys=root.image_keys, tasks_dict=root.tasks, schema=root.schema,
            row_size_bytes=root.row_bytes, total_frames=root.total_frames, fps=root.fps,
            storage_options={}, stats_json=root.stats_json,
            frame_tolerance_s=root.frame_tolerance_s, delta_steps=root.delta_steps,
        )  # fmt: skip
        for _, start, end in [r for r in source._ranges() if r[0] == number]:
            episodes = _as_ray(planning.episodes_overlapping(source._episodes[number], start, end))
            parquet, _ = lerobot_ray._resolve_paths(ray_root, episodes)
            blocks += lerobot_ray._read_lerobot_segment(
                ray_root, start, end, number, parquet, episodes, block_bytes
            )
    return pa.concat_tables(blocks)


def _cells(column: pa.ChunkedArray) -> list:
    """A column's values: tensors as nested lists (each side's tensor type aside)."""
    if isinstance(column.type, pa.BaseExtensionType):
        return [_tensor(column, i) for i in range(len(column))]
    return column.to_pylist()


def _tensor(column: pa.ChunkedArray, i: int) -> list:
    value = column.combine_chunks()[i].as_py()
    if isinstance(value, dict):  # Arrow's variable-shape tensor: its data and shape
        return np.reshape(value["data"], value["shape"]).tolist()
    return np.asarray(value).tolist()


@pytest.mark.parametrize(
    "variant",
    [
        {"video_keys": (), "image_keys": ("observation.images.top",)},
        {"video_keys": (), "image_keys": ("observation.images.top",), "delta": True},
        {"video_keys": ("observation.images.front",), "image_keys": ()},
        {"video_keys": ("observation.images.front",), "image_keys": (), "delta": True},
    ],
)
def test_rows_match_rays_segment_reader(sfm, tmp_path, variant):
    sample = write_sample_dataset(
        str(tmp_path / "d"), episode_lengths=(4, 6, 3), video_keys=variant["video_keys"],
        image_keys=variant["image_keys"], height=6, width=8,
    )  # fmt: skip
    delta = None
    if variant.get("delta"):
        delta = {"action": [-0.1, 0.0, 0.2], "observation.state": [0.0, 0.1]}
        delta.update({k: [-0.1, 0.0] for k in variant["image_keys"]})
    ours = sfm.read_lerobot(sample.root, delta_timestamps=delta, override_num_blocks=2).to_arrow()
    source = LeRobotDatasource(sample.root, delta_timestamps=delta)
    theirs = _ray_blocks(source, 1 << 20, without_video=True)
    video = set(sample.video_keys)
    assert [c for c in ours.column_names if c not in video] == theirs.column_names
    for name in theirs.column_names:
        a, b = ours.schema.field(name).type, theirs.schema.field(name).type
        if isinstance(b, pa.BaseExtensionType):  # Ray's own tensor type; ours is Arrow's
            storage = a.storage_type
            ours_type = (
                storage.field("data").type.value_type,
                storage.field("shape").type.list_size,
            )
            assert ours_type == (b.storage_type.field("data").type.value_type, b.ndim), name
        else:
            assert a == b, name
        assert _cells(ours.column(name)) == _cells(theirs.column(name)), name


@differs(
    "read_lerobot",
    "datasource.LeRobotDatasource",
    reason="video is decoded with PyAV instead of torchcodec, picking the same frame "
    "(round(t * average_fps), nearest within frame_tolerance_s; pixel values may differ by a "
    "level where the YUV to RGB conversions differ); a frame outside the tolerance, or a "
    "missing or corrupt file, raises ValueError / FileNotFoundError naming the file; with "
    "filesystem= every file, videos included, is read through it; num_cpus, num_gpus, memory "
    "and Ray's remote arguments are checked but not applied. Ray Data's reader needs lerobot "
    ">= 0.5 (Python >= 3.12), so tests/compat/test_lerobot_vs_ray.py compares shardflow with "
    "its planner, window arithmetic and segment reader, and the frames with the files' truth.",
)
def test_documented_lerobot_differences(sfm, tmp_path):
    sample = write_sample_dataset(str(tmp_path / "d"), episode_lengths=(2, 3), height=6, width=8)
    import pyarrow.fs as pafs

    # Every file, videos included, through the filesystem given.
    ds = sfm.read_lerobot(sample.root, filesystem=pafs.LocalFileSystem(), num_gpus=1)
    assert [r["index"] for r in ds.take_all()] == [0, 1, 2, 3, 4]
    video = tmp_path / "d" / "videos" / "observation.images.front" / "chunk-000" / "file-000.mp4"
    video.write_bytes(b"not a video")
    with pytest.raises(ValueError, match=r"file-000\.mp4: cannot decode it as a video"):
        sfm.read_lerobot(sample.root).take_all()
