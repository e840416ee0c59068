"""Audio files: :func:`read_audio`.

The connector lives in :mod:`shardflow.connectors.audio` and needs soundfile
(``pip install 'shardflow[audio]'``), imported only when audio is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.connectors.audio.datasource import AUDIO_EXTENSIONS
from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_audio(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    file_extensions: list[str] | None = AUDIO_EXTENSIONS,
    shuffle: ShuffleArg = None,
    concurrency: int | None = None,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read audio files into a Dataset, one row per file.

    Each file is decoded with soundfile (libsndfile: WAV, FLAC, OGG Vorbis and Opus, MP3,
    AIFF, AU, CAF, ...) in the read tasks. The columns are Ray Data's: ``amplitude``, the
    samples as a float32 tensor of shape ``(channels, samples)`` (integer PCM scaled to
    [-1, 1]), and ``sample_rate`` (int64, Hz). Files of different lengths or channel counts
    make a variable-shape tensor column.

    Files keep their own sample rate: shardflow does not resample. To bring files to one
    rate, resample in ``map_batches`` with the library of your choice (for example
    ``scipy.signal.resample_poly`` or ``soxr``).

    Examples:
        >>> import numpy as np, os, soundfile, tempfile
        >>> import shardflow as sf
        >>> folder = tempfile.mkdtemp()
        >>> tone = np.sin(np.linspace(0, 440 * 2 * np.pi, 16000))
        >>> soundfile.write(os.path.join(folder, "tone.flac"), tone, 16000)
        >>> row = sf.read_audio(folder).take(1)[0]
        >>> row["amplitude"].shape, row["amplitude"].dtype, row["sample_rate"]
        ((1, 16000), dtype('float32'), 16000)

    Args:
        paths: A file, a folder (read recursively), a glob, or a list of them; local,
            ``s3://``, ``gs://`` or any fsspec URL.
        filesystem: An fsspec or ``pyarrow.fs`` filesystem; inferred from the paths when None.
        arrow_open_stream_args: Arguments for opening each file.
        partition_filter: Read only the files whose partition values it accepts.
        partitioning: How partition values are encoded in the paths; None (default) reads
            none, as in Ray Data.
        include_paths: Add a ``path`` column naming each row's file.
        ignore_missing_paths: Skip paths that do not exist instead of raising.
        file_extensions: Read only files with these extensions (Ray Data's list of audio
            extensions by default); None reads every file.
        shuffle: ``"files"`` or a :class:`~shardflow.FileShuffleConfig` to shuffle the
            order of files.
        concurrency: The most read tasks running at once; automatic by default.
        override_num_blocks: Number of read tasks; by default from the data size.
        storage_options: fsspec options of the inferred filesystem (credentials, endpoint).
        on_bad_file: ``"raise"`` (default): a file soundfile cannot decode raises an error
            naming it and the reason; ``"skip"``: it is logged, skipped and counted in
            ``Dataset.stats()``.

    Returns:
        A lazy Dataset; a missing path raises here, a bad file when it is read.
    """
    from shardflow.connectors.audio.datasource import AudioDatasource
    from shardflow.engine.api.create import read_datasource

    datasource = AudioDatasource(paths, **_common(locals()))
    datasource._file_units()  # list now, so a missing path fails here and not at execution
    return read_datasource(
        datasource, concurrency=concurrency, override_num_blocks=override_num_blocks
    )
