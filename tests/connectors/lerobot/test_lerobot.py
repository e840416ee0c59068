"""read_lerobot against what the sample writer wrote: rows, frames, windows, plans, errors.

The oracle is the writer's own record (connectors/lerobot/sample.py): each frame's index,
state, action, timestamp and task, and each camera frame's flat colour, which names the
frame even after lossy MP4 coding (colours of neighbouring frames are 8 levels apart).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shardflow as sf

pytest.importorskip("av")
pytest.importorskip("PIL")

from shardflow.connectors.lerobot.conformance_suite import expected_rows
from shardflow.connectors.lerobot.sample import frame_colour, write_sample_dataset
from shardflow.datasource import LeRobotDatasource
from shardflow.sdk.testing import assert_same_rows

H, W = 24, 32
LENGTHS = (5, 7, 4, 6)
VIDEO_KEYS = ["observation.images.front", "observation.images.wrist"]


@pytest.fixture(scope="module")
def video_ds(tmp_path_factory):
    return write_sample_dataset(
        str(tmp_path_factory.mktemp("lerobot") / "v"), episode_lengths=LENGTHS
    )


@pytest.fixture(scope="module")
def image_ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("lerobot") / "i"
    return write_sample_dataset(
        str(root), episode_lengths=LENGTHS, video_keys=(), image_keys=("observation.images.top",),
        chunks_size=1, height=H, width=W,
    )  # fmt: skip


def _frame_index(frame: np.ndarray, camera: int) -> int:
    """The frame whose colour is nearest to ``frame``'s mean colour (within 1,024 frames)."""
    colours = np.asarray([frame_colour(g, camera) for g in range(1024)], float)
    mean = frame.reshape(-1, 3).mean(axis=0)
    return int(np.abs(colours - mean).sum(axis=1).argmin())


def _check_frames(rows, sample, keys, tolerance=6):
    for row in rows:
        for key in keys:
            frame = row[key]
            assert frame.shape == (H, W, 3) and frame.dtype == np.uint8
            expected = sample.expected_frame(row["index"], key, H, W)
            assert np.abs(frame.astype(int) - expected).max() <= tolerance, (row["index"], key)
            assert _frame_index(frame, sample.cameras.index(key)) == row["index"]


def _check_columns(rows, sample, dataset_index=0):
    truth = {r["index"]: r for r in sample.rows}
    for row in rows:
        want = truth[row["index"]]
        for name in ("frame_index", "episode_index", "task_index", "task"):
            assert row[name] == want[name], name
        assert row["timestamp"] == pytest.approx(want["timestamp"])
        np.testing.assert_array_equal(
            row["observation.state"], np.float32(want["observation.state"])
        )
        np.testing.assert_array_equal(row["action"], np.float32(want["action"]))
        assert row["dataset_index"] == dataset_index
        assert json.loads(row["stats"]) == sample.stats


def test_video_dataset_rows_frames_and_schema(video_ds, backend):
    ds = sf.read_lerobot(video_ds.root)
    table = ds.to_arrow()
    assert table.column("index").to_pylist() == list(range(sum(LENGTHS)))
    assert table.column_names == [
        *("observation.state", "action", "timestamp", "frame_index", "episode_index"),
        *("index", "task_index", *VIDEO_KEYS, "task", "dataset_index", "stats"),
    ]
    assert table.schema.field("task").type == pa.dictionary(pa.int32(), pa.string())
    assert table.schema.field("dataset_index").type == pa.int32()
    frame_type = table.schema.field(VIDEO_KEYS[0]).type
    assert frame_type.extension_name == "arrow.variable_shape_tensor"
    assert ds.schema().base_schema == table.schema  # the planned schema is the one read
    rows = ds.take_all()
    _check_columns(rows, video_ds)
    _check_frames(rows, video_ds, VIDEO_KEYS)


def test_image_dataset_equals_the_written_table(image_ds, backend):
    expected = expected_rows(image_ds, H, W)
    table = sf.read_lerobot(image_ds.root, read_granularity="episode").to_arrow()
    assert table.schema == expected.schema
    assert_same_rows(table, expected, "read_lerobot of an image dataset")
    # chunks_size=1: every data file in a chunk folder of its own
    assert any(f.startswith("data/chunk-001/") for f in image_ds.files)


def test_b_frames_and_an_edit_list(tmp_path):
    """libx264 with B-frames: frames decode out of order, and the MP4 shifts its timeline."""
    sample = write_sample_dataset(
        str(tmp_path / "x264"), episode_lengths=(9, 6, 11), codec="libx264",
        episodes_per_video_file=3, height=H, width=W,
    )  # fmt: skip
    rows = sf.read_lerobot(sample.root, episodes=[2, 1]).take_all()
    assert [r["index"] for r in rows] == list(range(9, 26))
    _check_frames(rows, sample, VIDEO_KEYS, tolerance=10)


@pytest.mark.parametrize("granularity, tasks", [("file", 2), ("episode", 4)])
def test_read_granularity_and_block_counts(video_ds, granularity, tasks):
    source = LeRobotDatasource(video_ds.root, read_granularity=granularity)
    assert source.default_num_blocks() == tasks
    assert len(source.get_read_tasks(source.default_num_blocks())) == tasks
    for n in (1, 3, 9):
        planned = source.get_read_tasks(n)
        assert len(planned) == n
        assert sum(t.metadata.num_rows for t in planned) == sum(LENGTHS)
    ds = sf.read_lerobot(video_ds.root, read_granularity=granularity, override_num_blocks=7)
    rows = ds.take_all()
    assert sorted(r["index"] for r in rows) == list(range(sum(LENGTHS)))
    _check_frames(rows, video_ds, VIDEO_KEYS)


def test_file_groups_follow_the_files(video_ds):
    source = LeRobotDatasource(video_ds.root)
    ranges = [(s, e) for _, s, e in source._ranges()]
    assert ranges == [(0, 12), (12, 22)]  # two episodes per MP4
    subset = LeRobotDatasource(video_ds.root, episodes=[0, 2, 3])
    assert [(s, e) for _, s, e in subset._ranges()] == [(0, 5), (12, 22)]


def test_episodes_keep_their_values(video_ds):
    rows = sf.read_lerobot(video_ds.root, episodes=[3, 1]).take_all()
    assert [r["index"] for r in rows] == list(range(5, 12)) + list(range(16, 22))
    assert {r["episode_index"] for r in rows} == {1, 3}
    _check_columns(rows, video_ds)
    _check_frames(rows, video_ds, VIDEO_KEYS)
    with pytest.raises(ValueError, match=r"episodes \[9\] were not found"):
        sf.read_lerobot(video_ds.root, episodes=[1, 9])
    with pytest.raises(ValueError, match="non-empty"):
        sf.read_lerobot(video_ds.root, episodes=[])


def test_several_roots(video_ds, tmp_path, backend):
    other = write_sample_dataset(str(tmp_path / "b"), episode_lengths=(3, 2), tasks=("wave",))
    rows = sf.read_lerobot([video_ds.root, other.root]).take_all()
    assert [r["dataset_index"] for r in rows] == [0] * sum(LENGTHS) + [1] * 5
    _check_columns(rows[: sum(LENGTHS)], video_ds, 0)
    _check_columns(rows[sum(LENGTHS) :], other, 1)
    _check_frames(rows[sum(LENGTHS) :], other, VIDEO_KEYS)
    odd = write_sample_dataset(str(tmp_path / "c"), episode_lengths=(2,), fps=5)
    with pytest.raises(ValueError, match="fps mismatch"):
        sf.read_lerobot([video_ds.root, odd.root])


def _windows_oracle(sample, steps):
    """Per row: the window's frame indices and pads, clamped to the row's episode."""
    spans = {}
    for r in sample.rows:
        low, high = spans.get(r["episode_index"], (r["index"], r["index"]))
        spans[r["episode_index"]] = (min(low, r["index"]), max(high, r["index"]))
    out = {}
    for r in sample.rows:
        low, high = spans[r["episode_index"]]
        wanted = [r["index"] + s for s in steps]
        out[r["index"]] = (
            [min(max(w, low), high) for w in wanted],
            [not low <= w <= high for w in wanted],
        )
    return out


def test_delta_timestamps_windows(video_ds, backend):
    delta = {"action": [-0.2, 0.0, 0.1], VIDEO_KEYS[0]: [-0.1, 0.0], "observation.state": [0.3]}
    ds = sf.read_lerobot(video_ds.root, delta_timestamps=delta)
    table = ds.to_arrow()
    assert table.column_names[-3:] == [
        "observation.state_is_pad",
        "action_is_pad",
        f"{VIDEO_KEYS[0]}_is_pad",
    ]
    truth = {r["index"]: r for r in video_ds.rows}
    for row in ds.take_all():
        frames, pads = _windows_oracle(video_ds, [-2, 0, 1])[row["index"]]
        np.testing.assert_array_equal(
            row["action"], np.float32([truth[f]["action"] for f in frames])
        )
        assert row["action_is_pad"].tolist() == pads
        frames, pads = _windows_oracle(video_ds, [3])[row["index"]]
        np.testing.assert_array_equal(
            row["observation.state"], np.float32([truth[f]["observation.state"] for f in frames])
        )
        assert row["observation.state_is_pad"].tolist() == pads
        frames, pads = _windows_oracle(video_ds, [-1, 0])[row["index"]]
        window = row[VIDEO_KEYS[0]]
        assert window.shape == (2, H, W, 3)
        assert [_frame_index(w, 0) for w in window] == frames
        assert row[f"{VIDEO_KEYS[0]}_is_pad"].tolist() == pads
        assert row[VIDEO_KEYS[1]].shape == (H, W, 3)


def test_delta_timestamps_on_images_and_errors(image_ds, video_ds):
    key = "observation.images.top"
    rows = sf.read_lerobot(image_ds.root, delta_timestamps={key: [0.0, 0.1]}).take_all()
    for row in rows:
        frames, pads = _windows_oracle(image_ds, [0, 1])[row["index"]]
        expected = [image_ds.expected_frame(f, key, H, W) for f in frames]
        np.testing.assert_array_equal(row[key], np.stack(expected))
        assert row[f"{key}_is_pad"].tolist() == pads
    with pytest.raises(ValueError, match="not multiples of 1/10"):
        sf.read_lerobot(video_ds.root, delta_timestamps={"action": [0.05]})
    with pytest.raises(ValueError, match="not dataset features"):
        sf.read_lerobot(video_ds.root, delta_timestamps={"nope": [0.0]})
    with pytest.raises(ValueError, match="may not exceed"):
        sf.read_lerobot(
            video_ds.root, delta_timestamps={"action": [0.0]}, override_num_blocks=3
        ).take_all()


def test_frame_tolerance(tmp_path):
    sample = write_sample_dataset(
        str(tmp_path / "t"), episode_lengths=(4, 4), video_keys=VIDEO_KEYS[:1]
    )
    # Shift the second episode by 0.3 frames in its MP4: still the same frames, 0.03 s off.
    path = tmp_path / "t" / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    table = pq.read_table(path)
    column = f"videos/{VIDEO_KEYS[0]}/from_timestamp"
    shifted = [t + (0.03 if i == 1 else 0) for i, t in enumerate(table.column(column).to_pylist())]
    pq.write_table(
        table.set_column(table.column_names.index(column), column, pa.array(shifted)), path
    )
    _check_frames(sf.read_lerobot(sample.root).take_all(), sample, VIDEO_KEYS[:1])
    with pytest.raises(ValueError, match=r"file-000\.mp4: no frame within frame_tolerance_s=0\.02"):
        sf.read_lerobot(sample.root, frame_tolerance_s=0.02).take_all()
    with pytest.raises(ValueError, match="frame_tolerance_s must be a positive"):
        sf.read_lerobot(sample.root, frame_tolerance_s=0)


def test_missing_and_corrupt_files_are_named(video_ds, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"meta/info\.json .* is missing"):
        sf.read_lerobot(str(tmp_path / "nowhere"))
    root = tmp_path / "copy"
    shutil.copytree(video_ds.root, root)
    info = root / "meta" / "info.json"
    info.write_text("{not json")
    with pytest.raises(ValueError, match=r"meta/info\.json: not valid JSON"):
        sf.read_lerobot(str(root))
    shutil.copy(f"{video_ds.root}/meta/info.json", info)
    video = root / "videos" / VIDEO_KEYS[1] / "chunk-000" / "file-001.mp4"
    video.write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    ds = sf.read_lerobot(str(root), episodes=[0])
    assert len(ds.take_all()) == LENGTHS[0]  # the broken file is never opened
    with pytest.raises(ValueError, match=r"file-001\.mp4: cannot decode it as a video"):
        sf.read_lerobot(str(root)).take_all()
    video.unlink()
    with pytest.raises(FileNotFoundError, match=r"file-001\.mp4: video file is missing"):
        sf.read_lerobot(str(root)).take_all()


def test_argument_errors(video_ds):
    with pytest.raises(ValueError, match="read_granularity must be one of"):
        sf.read_lerobot(video_ds.root, read_granularity="chunk")
    with pytest.raises(TypeError, match="delta_timestamps must be a dict"):
        sf.read_lerobot(video_ds.root, delta_timestamps=[0.0])
    with pytest.raises(ValueError, match="num_cpus must be a number >= 0"):
        sf.read_lerobot(video_ds.root, num_cpus=-1)
    with pytest.raises(TypeError, match="resources must be a dict"):
        sf.read_lerobot(video_ds.root, resources=["GPU"])
    ds = sf.read_lerobot(video_ds.root, num_cpus=1, memory=1e8, ray_remote_args={"max_retries": 1})
    assert ds.count() == sum(LENGTHS)


def test_read_from_s3(video_ds, s3_bucket, s3_options):
    root = f"{s3_bucket}/robot"
    sample = write_sample_dataset(root, episode_lengths=(3, 4, 2), storage_options=s3_options)
    ds = sf.read_lerobot(root, storage_options=s3_options, episodes=[0, 2])
    rows = ds.take_all()
    assert [r["index"] for r in rows] == [0, 1, 2, 7, 8]
    _check_columns(rows, sample)
    _check_frames(rows, sample, VIDEO_KEYS)
    with pytest.raises(FileNotFoundError, match=r"s3://.*/meta/info\.json"):
        sf.read_lerobot(f"{s3_bucket}/absent", storage_options=s3_options)
