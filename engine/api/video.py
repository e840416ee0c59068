"""Video files: :func:`read_videos`.

The connector lives in :mod:`shardflow.connectors.video` and needs PyAV
(``pip install 'shardflow[video]'``), imported only when video is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.connectors.video.datasource import VIDEO_EXTENSIONS
from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_videos(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    include_timestamps: bool = False,
    fps: int | None = None,
    resize: tuple[int, int] | None = None,
    ignore_missing_paths: bool = False,
    file_extensions: list[str] | None = VIDEO_EXTENSIONS,
    shuffle: ShuffleArg = None,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read video files into a Dataset, one row per frame.

    Frames are decoded with PyAV (FFmpeg) in the read tasks and streamed in blocks of at most
    ~32 MiB, so a long video never sits whole in memory. An MP4 or MOV file larger than a
    read task's share of the input is cut at keyframes into time ranges that different
    tasks decode in parallel; each task numbers its frames as a read of the whole file would.
    Other containers (Matroska, WebM, AVI, MPEG-TS, ...) are read whole by one task each.

    The columns are Ray Data's: ``frame`` (uint8 RGB, ``(height, width, 3)``),
    ``frame_index`` (int64, the frame's position in the video, from 0) and, with
    ``include_timestamps``, ``frame_timestamp`` (float32 ``[start, end]`` of the frame in
    seconds). The first video stream of each file is read; audio is ignored.

    Differences from Ray Data 2.60: frames are decoded with PyAV instead of decord (the same
    pixels; with ``resize`` both use FFmpeg's bicubic scaler, but decord scales before
    converting to RGB and the values may differ by a few levels); a file that cannot be
    decoded raises ValueError naming it.

    Examples:
        >>> import av, numpy as np, os, tempfile
        >>> import shardflow as sf
        >>> path = os.path.join(tempfile.mkdtemp(), "clip.mp4")
        >>> with av.open(path, "w") as container:
        ...     stream = container.add_stream("mpeg4", rate=24)
        ...     stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        ...     for i in range(12):
        ...         image = np.full((48, 64, 3), 20 * i, np.uint8)
        ...         container.mux(stream.encode(av.VideoFrame.from_ndarray(image)))
        ...     container.mux(stream.encode())
        >>> ds = sf.read_videos(path, include_timestamps=True, fps=12)
        >>> [row["frame_index"] for row in ds.take_all()]
        [0, 2, 4, 6, 8, 10]
        >>> ds.take(1)[0]["frame"].shape
        (48, 64, 3)

    Args:
        paths: A file, a folder (read recursively), a glob, or a list of them; local,
            ``s3://``, ``gs://`` or any fsspec URL.
        filesystem: An fsspec or ``pyarrow.fs`` filesystem; inferred from the paths when None.
        arrow_open_stream_args: Arguments for opening each file.
        partition_filter: Read only the files whose partition values it accepts.
        partitioning: How partition values are encoded in the paths; None (default) reads
            none, as in Ray Data.
        include_paths: Add a ``path`` column naming each row's file.
        include_timestamps: Add the ``frame_timestamp`` column.
        fps: Keep every ``round(source fps / fps)``-th frame (all frames are still decoded);
            ``frame_index`` stays the frame's index in the video. All frames when None.
        resize: ``(height, width)`` to resize every frame to while decoding.
        ignore_missing_paths: Skip paths that do not exist instead of raising.
        file_extensions: Read only files with these extensions (Ray Data's list of video
            extensions by default); None reads every file.
        shuffle: ``"files"`` or a :class:`~shardflow.FileShuffleConfig` to shuffle the
            order of files.
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Number of read tasks; by default from the data size.
        storage_options: fsspec options of the inferred filesystem (credentials, endpoint).
        on_bad_file: ``"raise"`` (default): a file FFmpeg cannot decode raises an error
            naming it and the reason; ``"skip"``: it is logged, skipped and counted in
            ``Dataset.stats()``.

    Returns:
        A lazy Dataset; a missing path raises here, a bad file when it is read.
    """
    from shardflow.connectors.video.datasource import VideoDatasource
    from shardflow.engine.api.create import read_datasource

    datasource = VideoDatasource(
        paths,
        include_timestamps=include_timestamps,
        fps=fps,
        resize=resize,
        **_common(locals()),
    )
    datasource._file_units()  # list now, so a missing path fails here and not at execution
    return read_datasource(
        datasource, concurrency=concurrency, override_num_blocks=override_num_blocks
    )
