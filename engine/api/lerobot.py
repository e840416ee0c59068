"""LeRobot v3 datasets: :func:`read_lerobot`.

The connector lives in :mod:`shardflow.connectors.lerobot` and needs PyAV and Pillow
(``pip install 'shardflow[lerobot]'``), imported only when a dataset is read.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_lerobot(
    root: str | PurePath | list[str | PurePath],
    *,
    episodes: list[int] | None = None,
    read_granularity: str = "file",
    filesystem: Any = None,
    frame_tolerance_s: float | None = None,
    delta_timestamps: dict[str, list[float]] | None = None,
    delta_tolerance_s: float = 1e-4,
    storage_options: dict[str, Any] | None = None,
    num_cpus: float | None = None,
    num_gpus: float | None = None,
    memory: float | None = None,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    label_selector: dict[str, str] | None = None,
    fallback_strategy: list[dict[str, Any]] | None = None,
    max_calls: int | None = None,
    resources: dict[str, float] | None = None,
    accelerator_type: str | None = None,
    runtime_env: dict[str, Any] | None = None,
    ray_remote_args: dict[str, Any] | None = None,
) -> Dataset:
    """Read a `LeRobot <https://huggingface.co/lerobot>`_ v3 dataset, one row per frame.

    A LeRobot v3 dataset keeps state, action and timestamps in chunked Parquet files
    (``data/chunk-*/file-*.parquet``) and each camera either as MP4 files holding several
    episodes one after another (``videos/<camera>/chunk-*/file-*.mp4``) or as encoded images
    in the Parquet rows; ``meta/`` says where each episode is. Video frames are decoded with
    PyAV (FFmpeg), images with Pillow, in the read tasks, and matched to the rows by
    timestamp.

    Columns, as Ray Data's: the data file's (``index``, ``episode_index``, ``frame_index``,
    ``timestamp``, state and action vectors, ...; image cameras decoded in place), then each
    video camera, as uint8 ``(height, width, 3)`` tensors (Arrow's variable-shape tensor
    type); ``task`` (the task string, dictionary-encoded); ``dataset_index`` (int32, which
    root the row comes from); ``stats`` (the root's ``meta/stats.json`` as one JSON string,
    dictionary-encoded; ``"{}"`` without it). With ``delta_timestamps``, each listed
    feature is stacked over its offsets along a new leading axis and a boolean
    ``<feature>_is_pad`` column follows the others.

    A row's video frame is the one Ray Data's torchcodec decoding picks: the frame at index
    ``round(t * average_fps)`` of the MP4, where ``t`` is the episode's start in the file
    plus the row's timestamp; it must lie within ``frame_tolerance_s`` of ``t``.

    Differences from Ray Data 2.60: video is decoded with PyAV rather than torchcodec
    (the same frames; pixel values may differ by a level where the two convert YUV to RGB
    differently); a frame outside ``frame_tolerance_s``, a missing or corrupt file raise
    ValueError or FileNotFoundError naming the file; with ``filesystem=`` every file, videos
    included, is read through it; ``num_cpus``, ``num_gpus``, ``memory`` and Ray's remote
    arguments are checked and accepted but not applied (read tasks run with the engine's
    defaults); the ``stats`` JSON is shardflow's own serialization of ``meta/stats.json``.

    Examples:
        >>> import os, tempfile
        >>> import shardflow as sf
        >>> from shardflow.connectors.lerobot.sample import write_sample_dataset
        >>> root = os.path.join(tempfile.mkdtemp(), "robot")
        >>> _ = write_sample_dataset(root, episode_lengths=[3, 2])
        >>> ds = sf.read_lerobot(root)
        >>> row = ds.take(1)[0]
        >>> row["task"], row["observation.images.front"].shape
        ('pick the cube', (24, 32, 3))
        >>> ds = sf.read_lerobot(root, delta_timestamps={"action": [-0.1, 0.0]})
        >>> [r["action_is_pad"].tolist() for r in ds.take(2)]
        [[True, False], [False, False]]

    Args:
        root: The dataset's root (a local path or a URI: ``s3://``, ``gs://``, ...; a public
            bucket as ``s3://anonymous@bucket/...``), or a list of roots read as one dataset.
            Roots must share cameras, fps and features.
        episodes: Read only these ``episode_index`` values (other episodes' files are never
            opened); values are kept, not renumbered. Applied in every root; an episode in
            none of them raises ValueError. None reads every episode.
        read_granularity: ``"file"`` (default): one read task per file group (the adjacent
            episodes that share their files), so each file is opened once; ``"episode"``:
            one per episode.
        filesystem: An fsspec or ``pyarrow.fs`` filesystem for every file of the dataset;
            inferred from the root when None.
        frame_tolerance_s: Largest distance in seconds between a row's timestamp and its
            video frame's; ``0.5 / fps`` when None.
        delta_timestamps: ``{feature: [offsets in seconds]}``: a window per frame; offsets
            must be multiples of ``1 / fps`` and are clamped to the frame's episode (clamped
            slots are True in ``<feature>_is_pad``). Read tasks then hold whole episodes, and
            ``override_num_blocks`` may not exceed their number.
        delta_tolerance_s: Tolerance of the offsets' alignment to the frame grid.
        storage_options: fsspec options (credentials, endpoint) of the inferred filesystem.
        num_cpus, num_gpus, memory: Resources of each read task on Ray (accepted, not applied).
        concurrency: The most read tasks running at once.
        override_num_blocks: Number of read tasks; by default one per file group or episode.
            More splits file groups (their files are opened by each part), fewer merge them.
        label_selector, fallback_strategy, max_calls, resources, accelerator_type,
            runtime_env, ray_remote_args: Ray's remote arguments of the read tasks (accepted,
            not applied).

    Returns:
        A lazy Dataset of decoded frames; metadata is read here, frames when it runs.
    """
    from shardflow.connectors.lerobot import LeRobotDatasource
    from shardflow.engine.api.create import read_datasource
    from shardflow.engine.api.read_task_args import check_read_task_args

    check_read_task_args(
        "read_lerobot",
        {
            "num_cpus": num_cpus,
            "num_gpus": num_gpus,
            "memory": memory,
            "label_selector": label_selector,
            "fallback_strategy": fallback_strategy,
            "max_calls": max_calls,
            "resources": resources,
            "accelerator_type": accelerator_type,
            "runtime_env": runtime_env,
            "ray_remote_args": ray_remote_args,
        },
    )
    datasource = LeRobotDatasource(
        root,
        episodes=episodes,
        read_granularity=read_granularity,
        filesystem=filesystem,
        storage_options=storage_options,
        frame_tolerance_s=frame_tolerance_s,
        delta_timestamps=delta_timestamps,
        delta_tolerance_s=delta_tolerance_s,
    )
    if override_num_blocks is None:
        # One task per file group: more would reopen files that a small dataset cannot
        # amortize, as Ray Data reasons.
        override_num_blocks = datasource.default_num_blocks()
    return read_datasource(
        datasource, concurrency=concurrency, override_num_blocks=override_num_blocks
    )
