"""The conformance suite of the video connector: MP4 files encoded with PyAV.

The expected table comes from decoding the same files with PyAV alone, frame by frame; the
source is built with a small minimum range, so that the checks' higher parallelisms cut the
files into time ranges read by different tasks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

FILES, FRAMES, HEIGHT, WIDTH = 2, 12, 32, 48


def write_video(path: Path, frames: int, seed: int, codec: str = "mpeg4", gop: int = 4) -> None:
    """A short test video: moving bands over noise, a keyframe every ``gop`` frames."""
    av = require("av", "video", "Writing test videos")
    rng = np.random.default_rng(seed)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=24, options={"g": str(gop), "bf": "1"})
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for i in range(frames):
            image = rng.integers(0, 40, (HEIGHT, WIDTH, 3), dtype=np.uint8)
            image[:, (3 * i) % WIDTH :, i % 3] += 180
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())


def decode_with_pyav(path: Path) -> pa.Table:
    """Every frame of ``path`` decoded by PyAV directly: the oracle of the suite."""
    av = require("av", "video", "Decoding test videos")
    frames, times = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            start = float(frame.pts * stream.time_base)
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append((start, start + float(frame.duration * stream.time_base)))
    return pa.table(
        {
            "frame": pa.FixedShapeTensorArray.from_numpy_ndarray(np.stack(frames)),
            "frame_index": pa.array(range(len(frames)), pa.int64()),
            "frame_timestamp": pa.FixedShapeTensorArray.from_numpy_ndarray(
                np.asarray(times, np.float32)
            ),
        }
    )


class VideoSuite(DatasourceConformance):
    name = "videos"

    def _source(self, folder: Path):
        source = get_registry().get(self.name).datasource(str(folder), include_timestamps=True)
        source._MIN_RANGE_BYTES = 1  # cut even these small files into time ranges
        return source

    def _write(self, tmp_path: Path) -> Path:
        folder = tmp_path / "data"
        if not folder.exists():
            folder.mkdir()
            for i in range(FILES):
                write_video(folder / f"clip-{i}.mp4", FRAMES, seed=i)
        return folder

    def expected_table(self):
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            folder = self._write(Path(scratch))
            return pa.concat_tables(
                [decode_with_pyav(folder / f"clip-{i}.mp4") for i in range(FILES)]
            )

    def make_datasource(self, tmp_path):
        return self._source(self._write(tmp_path))

    def make_empty_datasource(self, tmp_path):
        (tmp_path / "empty").mkdir()
        return self._source(tmp_path / "empty")

    def make_bad_datasource(self, tmp_path):
        folder = tmp_path / "bad"
        folder.mkdir()
        write_video(folder / "good.mp4", 4, seed=5)
        (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
        return self._source(folder)

    def bad_source_mentions(self, tmp_path):
        return ["broken.mp4"]
