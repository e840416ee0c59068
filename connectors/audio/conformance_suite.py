"""The conformance suite of the audio connector: WAV and FLAC files written with soundfile.

The samples are multiples of 1/32768, which 16-bit FLAC and float WAV both store exactly, so
the expected table is the generated samples themselves.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

CHANNELS, SAMPLES = 2, 400
RATES = (8000, 16000, 22050, 44100, 48000)


def _clips() -> list[np.ndarray]:
    rng = np.random.default_rng(27)
    return [
        (rng.integers(-32768, 32767, (CHANNELS, SAMPLES)) / 32768).astype(np.float32) for _ in RATES
    ]


class AudioSuite(DatasourceConformance):
    name = "audio"

    def _soundfile(self):
        return require("soundfile", "audio", "The audio conformance suite")

    def expected_table(self):
        clips = np.stack(_clips())
        return pa.table(
            {
                "amplitude": pa.FixedShapeTensorArray.from_numpy_ndarray(clips),
                "sample_rate": pa.array(RATES, pa.int64()),
            }
        )

    def make_datasource(self, tmp_path):
        soundfile = self._soundfile()
        folder = tmp_path / "data"
        folder.mkdir()
        for i, (clip, rate) in enumerate(zip(_clips(), RATES)):
            if i % 2:
                soundfile.write(folder / f"clip-{i}.flac", clip.T, rate, subtype="PCM_16")
            else:
                soundfile.write(folder / f"clip-{i}.wav", clip.T, rate, subtype="FLOAT")
        (folder / "notes.txt").write_text("not audio: left out by the extension filter")
        return get_registry().get(self.name).datasource(str(folder))

    def make_empty_datasource(self, tmp_path):
        (tmp_path / "empty").mkdir()
        return get_registry().get(self.name).datasource(str(tmp_path / "empty"))

    def make_bad_datasource(self, tmp_path):
        folder = tmp_path / "bad"
        folder.mkdir()
        self._soundfile().write(folder / "good.wav", _clips()[0].T, 8000, subtype="FLOAT")
        (folder / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt truncated")
        return get_registry().get(self.name).datasource(str(folder))

    def bad_source_mentions(self, tmp_path):
        return ["broken.wav"]
