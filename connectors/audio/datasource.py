"""AudioDatasource: one row per audio file, its samples as a ``(channels, samples)`` tensor.

Columns, as in Ray Data: ``amplitude`` (float32 samples, one row of the tensor per channel,
values in [-1, 1] for integer PCM files) and ``sample_rate`` (int64, Hz). Files keep their own
sample rate: resampling is left to the user (``map_batches`` with a resampler of their
choice), as in Ray Data.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.file_reading import FileUnit
from shardflow.sdk.optional import require

AMPLITUDE_COLUMN = "amplitude"
SAMPLE_RATE_COLUMN = "sample_rate"

# Ray Data's list: what read_audio picks from a folder. soundfile decodes those libsndfile
# knows (WAV, FLAC, OGG/Vorbis/Opus, MP3, AIFF, AU, CAF, ...); others fail naming the file.
AUDIO_EXTENSIONS = [
    "mp3",
    "wav",
    "aac",
    "flac",
    "ogg",
    "m4a",
    "wma",
    "alac",
    "aiff",
    "pcm",
    "amr",
    "opus",
    "ra",
    "rm",
    "au",
    "mid",
    "midi",
    "caf",
]


def _soundfile() -> Any:
    return require("soundfile", "audio", "Reading audio")


def decode_audio(source: Any) -> tuple[np.ndarray, int]:
    """Decode an audio file into ``(channels, samples)`` float32 samples and its sample rate.

    Args:
        source: A local path, or a binary file object (``io.BytesIO`` of the file's bytes).

    Returns:
        The samples, C-contiguous, and the sample rate in Hz.

    Raises:
        ValueError: when soundfile cannot decode it, with libsndfile's reason.

    Examples:
        >>> import io, numpy as np, soundfile
        >>> from shardflow.connectors.audio.datasource import decode_audio
        >>> buffer = io.BytesIO()
        >>> soundfile.write(buffer, np.zeros((8, 2)), 16000, format="WAV")
        >>> _ = buffer.seek(0)
        >>> samples, rate = decode_audio(buffer)
        >>> samples.shape, samples.dtype, rate
        ((2, 8), dtype('float32'), 16000)
    """
    soundfile = _soundfile()
    try:
        samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
    except soundfile.SoundFileError as exc:
        raise ValueError(f"cannot decode it as audio ({type(exc).__name__}: {exc})") from exc
    # soundfile gives (samples, channels), interleaved; Ray Data's layout is one row per
    # channel, and a tensor column needs it contiguous.
    return np.ascontiguousarray(samples.T), int(rate)


def audio_table(samples: np.ndarray, rate: int) -> pa.Table:
    """The one-row block of a decoded file."""
    # From the array's buffer, not pa.array: that imports pandas (a quarter of a second on
    # the first file) to ask whether a NumPy array is a pandas object.
    values = np.ascontiguousarray(samples, dtype=np.float32)
    flat = pa.Array.from_buffers(pa.float32(), values.size, [None, pa.py_buffer(values)])
    storage = pa.FixedSizeListArray.from_arrays(flat, values.size)
    amplitude = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), values.shape), storage
    )
    rates = pa.Array.from_buffers(pa.int64(), 1, [None, pa.py_buffer(np.array([rate], np.int64))])
    return pa.table({AMPLITUDE_COLUMN: amplitude, SAMPLE_RATE_COLUMN: rates})


class AudioDatasource(FileBasedDatasource):
    """Reads audio files with soundfile. See :func:`shardflow.read_audio` for the arguments."""

    _FILE_EXTENSIONS = AUDIO_EXTENSIONS
    _ROWS_PER_FILE = 1
    _ENCODING_RATIO = 3.0  # float32 samples from 16-bit PCM (2x) or FLAC (~4x)

    def __init__(self, paths: Any, **kwargs: Any):
        _soundfile()  # a missing soundfile is reported when read_audio is called
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_audio: {sorted(self._file_args)}.")
        if self._on_bad_file == "skip":
            self._ROWS_PER_FILE = None  # a skipped file makes no row

    def get_name(self) -> str:
        return "Audio"

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        if self._reads_local_disk() and not self._open_stream_args:
            # libsndfile reads a local file itself, without a Python callback per read
            yield audio_table(*decode_audio(unit.path))
            return
        yield from self._read_stream(f, self._display(unit.path))

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        data = f.read()  # outside the decoding: storage errors stay storage errors
        yield audio_table(*decode_audio(io.BytesIO(data)))
