"""read_videos against PyAV decoding each file itself: whole files, time ranges, options."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import shardflow as sf

av = pytest.importorskip("av")

from shardflow.connectors.video import decoding
from shardflow.connectors.video.conformance_suite import (
    decode_with_pyav,
    write_video,
)
from shardflow.connectors.video.datasource import VideoDatasource
from shardflow.sdk.testing import assert_same_rows
from shardflow.sdk.testing.checks import run_task

# (file name, codec, B-frames): libx264 with B-frames (an MP4 edit list, closed GOPs),
# mpeg4 with B-frames (keyframes followed by frames shown before them: open GOPs), and a
# Matroska file (an index of keyframes only: read whole).
VIDEOS = [("h264.mp4", "libx264"), ("mpeg4.mp4", "mpeg4"), ("h264.mkv", "libx264")]


def _rows_by_index(table):
    frames = table.column("frame").combine_chunks().to_numpy_ndarray()
    indices = table.column("frame_index").to_pylist()
    return dict(zip(indices, frames))


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("videos")
    for name, codec in VIDEOS:
        write_video(folder / name, 40, seed=len(name), codec=codec, gop=6)
    return folder


@pytest.mark.parametrize("name", [name for name, _ in VIDEOS])
def test_whole_file_matches_pyav(videos, name):
    got = sf.read_videos(str(videos / name), include_timestamps=True).to_arrow()
    expected = decode_with_pyav(videos / name)
    assert got.num_rows == 40
    assert_same_rows(got, expected, name)


@pytest.mark.parametrize("name", ["h264.mp4", "mpeg4.mp4"])
def test_time_ranges_give_the_frames_of_the_whole_file(videos, name):
    source = VideoDatasource(str(videos / name), include_timestamps=True)
    source._MIN_RANGE_BYTES = 1
    tasks = source.get_read_tasks(16)
    assert len(tasks) >= 3, "the file should be cut at several keyframes"
    parts = [pa.concat_tables(run_task(t)) for t in tasks]
    indices = [i for part in parts for i in part.column("frame_index").to_pylist()]
    assert sorted(indices) == list(range(40)), "every frame exactly once, numbered as a whole"
    assert_same_rows(pa.concat_tables(parts), decode_with_pyav(videos / name), name)


def test_matroska_is_read_whole(videos):
    source = VideoDatasource(str(videos / "h264.mkv"))
    source._MIN_RANGE_BYTES = 1
    assert len(source.get_read_tasks(16)) == 1


def test_fps_keeps_every_nth_frame_with_its_index(videos):
    rows = sf.read_videos(str(videos / "h264.mp4"), fps=8).take_all()  # 24 fps source
    assert [r["frame_index"] for r in rows] == list(range(0, 40, 3))
    oracle = _rows_by_index(decode_with_pyav(videos / "h264.mp4"))
    for row in rows:
        np.testing.assert_array_equal(row["frame"], oracle[row["frame_index"]])


def test_resize_gives_frames_of_that_size(videos):
    table = sf.read_videos(str(videos / "mpeg4.mp4"), resize=(20, 30)).to_arrow()
    assert table.column("frame").type.shape == [20, 30, 3]
    assert table.num_rows == 40


def test_blocks_stay_under_the_block_size(videos, monkeypatch):
    frame_bytes = 32 * 48 * 3
    monkeypatch.setattr(decoding, "BLOCK_BYTES", 5 * frame_bytes)
    source = VideoDatasource(str(videos / "h264.mkv"))
    blocks = [b for t in source.get_read_tasks(1) for b in decoding_blocks(source, t)]
    assert sum(b.num_rows for b in blocks) == 40
    assert max(b.num_rows for b in blocks) <= 5


def decoding_blocks(source, task):
    """The blocks a task's decoder yields, before the file layer joins small ones."""
    units = task.read_fn.units
    for unit in units:
        with source._open_file(unit.path) as f:
            yield from source._read_file(f, unit)


def test_reads_from_s3_in_time_ranges(s3_store, videos):
    s3_store.write_bytes("v/clip.mp4", (videos / "h264.mp4").read_bytes())
    source = VideoDatasource(s3_store.path("v"), **s3_store.options())
    source._MIN_RANGE_BYTES = 1
    tasks = source.get_read_tasks(8)
    assert len(tasks) > 1
    got = pa.concat_tables([b for t in tasks for b in run_task(t)])
    expected = decode_with_pyav(videos / "h264.mp4").drop_columns(["frame_timestamp"])
    assert_same_rows(got, expected, "S3")


def test_corrupt_file_names_the_file_and_the_reason(tmp_path):
    write_video(tmp_path / "good.mp4", 4, seed=1)
    (tmp_path / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 truncated")
    with pytest.raises(ValueError, match=r"broken\.mp4.*cannot open it as a video"):
        sf.read_videos(str(tmp_path)).take_all()
    assert sf.read_videos(str(tmp_path), on_bad_file="skip").count() == 4


@pytest.mark.parametrize(
    "kwargs", [{"fps": 0}, {"fps": 2.5}, {"resize": (10,)}, {"resize": (0, 4)}, {"resize": "x"}]
)
def test_arguments_are_checked(videos, kwargs):
    with pytest.raises(ValueError, match="Expected"):
        sf.read_videos(str(videos), **kwargs)
