"""read_audio against soundfile itself: every format libsndfile writes here, S3, bad files."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shardflow as sf

soundfile = pytest.importorskip("soundfile")

# (extension, soundfile format, subtype): what libsndfile in soundfile's wheel writes here.
FORMATS = [
    ("wav", "WAV", "PCM_16"),
    ("wav", "WAV", "FLOAT"),
    ("flac", "FLAC", "PCM_24"),
    ("ogg", "OGG", "VORBIS"),
    ("ogg", "OGG", "OPUS"),
    ("mp3", "MP3", "MPEG_LAYER_III"),
    ("aiff", "AIFF", "PCM_16"),
]


def _signal(channels, samples, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 48000
    tones = [np.sin(2 * np.pi * (220 + 110 * c) * t) * 0.5 for c in range(channels)]
    return (np.stack(tones, axis=1) + rng.normal(0, 0.01, (samples, channels))).clip(-1, 1)


def _oracle(path):
    samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
    return samples.T, rate


def test_every_format_reads_as_soundfile_decodes_it(tmp_path):
    written = {}
    for i, (ext, fmt, subtype) in enumerate(FORMATS):
        rate = 48000 if subtype == "OPUS" else (8000, 16000, 22050, 32000, 44100)[i % 5]
        path = tmp_path / f"clip-{i}.{ext}"
        soundfile.write(
            path, _signal(1 + i % 2, 2400 + 100 * i, i), rate, format=fmt, subtype=subtype
        )
        written[str(path)] = _oracle(path)
    rows = sf.read_audio(str(tmp_path), include_paths=True).take_all()
    assert sorted(r["path"] for r in rows) == sorted(written)
    for row in rows:
        samples, rate = written[row["path"]]
        assert row["sample_rate"] == rate
        assert row["amplitude"].dtype == np.float32
        np.testing.assert_array_equal(row["amplitude"], samples)


def test_schema_and_count_without_decoding(tmp_path):
    for i in range(3):
        soundfile.write(tmp_path / f"{i}.wav", _signal(2, 800), 8000)
    ds = sf.read_audio(str(tmp_path))
    assert ds.count() == 3
    table = ds.to_arrow()
    assert table.column_names == ["amplitude", "sample_rate"]
    assert str(table.schema.field("sample_rate").type) == "int64"
    assert table.column("amplitude").type.shape == [2, 800]


@settings(max_examples=12, deadline=None)
@given(
    channels=st.integers(1, 4),
    samples=st.integers(1, 3000),
    rate=st.sampled_from([8000, 11025, 22050, 44100, 96000]),
    seed=st.integers(0, 2**16),
)
def test_flac_round_trip_is_exact(tmp_path_factory, channels, samples, rate, seed):
    rng = np.random.default_rng(seed)
    pcm = rng.integers(-32768, 32767, (samples, channels)) / 32768
    path = tmp_path_factory.mktemp("flac") / "x.flac"
    soundfile.write(path, pcm, rate, subtype="PCM_16")
    [row] = sf.read_audio(str(path)).take_all()
    assert row["sample_rate"] == rate
    np.testing.assert_array_equal(row["amplitude"], pcm.T.astype(np.float32))


def test_reads_from_s3(s3_store):
    buffer = io.BytesIO()
    soundfile.write(buffer, _signal(2, 1000), 22050, format="FLAC")
    s3_store.write_bytes("a/clip.flac", buffer.getvalue())
    rows = sf.read_audio(s3_store.path("a"), **s3_store.options()).take_all()
    buffer.seek(0)
    samples, rate = soundfile.read(buffer, dtype="float32", always_2d=True)
    assert [r["sample_rate"] for r in rows] == [rate]
    np.testing.assert_array_equal(rows[0]["amplitude"], samples.T)


def test_corrupt_file_names_the_file_and_the_reason(tmp_path):
    soundfile.write(tmp_path / "good.wav", _signal(1, 100), 8000)
    (tmp_path / "broken.flac").write_bytes(b"fLaC but nothing more")
    with pytest.raises(ValueError, match=r"broken\.flac.*cannot decode it as audio"):
        sf.read_audio(str(tmp_path)).take_all()
    rows = sf.read_audio(str(tmp_path), on_bad_file="skip").take_all()
    assert len(rows) == 1


def test_arguments_are_checked(tmp_path):
    with pytest.raises(FileNotFoundError):
        sf.read_audio(str(tmp_path / "missing.wav"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="extensions"):
        sf.read_audio(str(tmp_path))
    with pytest.raises(TypeError):
        sf.read_audio(str(tmp_path), sample_rate=16000)


def test_connector_is_registered():
    from shardflow.sdk.registry import get_registry

    spec = get_registry().get("audio")
    assert spec.datasource.__name__ == "AudioDatasource" and spec.datasink is None
