"""B17: the audio, video and Lance connectors against Ray Data and the libraries' own loops.

- **B17-AUDIO**: 200 x scale FLAC files of 10 s of mono 16 kHz audio. Every system decodes
  every file to float32 samples and sums them: shardflow and Ray Data with
  ``read_audio(folder).iter_batches(batch_size=None)``, the bare loop with
  ``soundfile.read(path, dtype="float32", always_2d=True)`` per file, in one thread.
- **B17-VIDEO**: 8 x scale MP4 files (H.264, 320x240, 24 fps, 10 s each). Every system decodes
  every frame to an RGB array and counts the frames and sums their indices: shardflow with
  ``read_videos`` (PyAV), Ray Data with ``read_videos`` (decord), the bare loop with PyAV's
  ``container.decode(video=0)`` and ``frame.to_ndarray(format="rgb24")`` per file, in one
  thread.
- **B17-LANCE**: a Lance dataset of 4M x scale rows in 32 fragments (``id`` int64, ``value``
  float64 in [0, 1), ``label`` string, ``vec`` 16 float32): every system reads ``id``,
  ``value`` and ``vec`` of the rows with ``value < 0.25`` into one Arrow table in the driver:
  shardflow and Ray Data with ``read_lance(uri, columns=..., filter=...)``, the bare loop with
  pylance's ``dataset.to_table(columns=..., filter=...)``.

The time covers the read (imports, Ray's start-up and generating the input come first). The
results (counts and sums) must agree between systems.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchdata import ensure_input, files_dir, read_manifest
from registry import RAY_DATA, SHARDFLOW_LOCAL, SHARDFLOW_RAY, Benchmark, Target, Unavailable

SOUNDFILE_LOOP = "soundfile-loop"
PYAV_LOOP = "pyav-loop"
LANCE_SCAN = "lance-scan"
SEED = 17
FORMAT_VERSION = 1

AUDIO_FILES, AUDIO_SECONDS, AUDIO_RATE = 200, 10, 16000
VIDEO_FILES, VIDEO_FRAMES, VIDEO_SIZE = 8, 240, (240, 320)
LANCE_ROWS, LANCE_FRAGMENTS = 4_000_000, 32
LANCE_FILTER = "value < 0.25"
LANCE_COLUMNS = ["id", "value", "vec"]


def audio_files(scale: float) -> int:
    return max(2, int(AUDIO_FILES * scale))


def video_files(scale: float) -> int:
    return max(2, int(VIDEO_FILES * scale))


def lance_rows(scale: float) -> int:
    return max(LANCE_FRAGMENTS * 1000, int(LANCE_ROWS * scale))


def _audio_input(scale: float) -> str:
    return f"b17_audio_{audio_files(scale)}files"


def _video_input(scale: float) -> str:
    return f"b17_video_{video_files(scale)}files"


def _lance_input(scale: float) -> str:
    return f"b17_lance_{lance_rows(scale)}rows"


def _make_audio(folder: str, scale: float) -> dict[str, Any]:
    import numpy as np
    import soundfile

    rng = np.random.default_rng(SEED)
    samples = AUDIO_SECONDS * AUDIO_RATE
    t = np.arange(samples) / AUDIO_RATE
    for i in range(audio_files(scale)):
        tone = 0.3 * np.sin(2 * np.pi * (200 + i) * t) + rng.normal(0, 0.05, samples)
        soundfile.write(os.path.join(folder, f"clip-{i:04d}.flac"), tone, AUDIO_RATE)
    return {}


def _make_video(folder: str, scale: float) -> dict[str, Any]:
    import av
    import numpy as np

    rng = np.random.default_rng(SEED)
    height, width = VIDEO_SIZE
    for i in range(video_files(scale)):
        with av.open(os.path.join(folder, f"clip-{i:03d}.mp4"), "w") as container:
            stream = container.add_stream("libx264", rate=24, options={"g": "48"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            base = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
            for f in range(VIDEO_FRAMES):
                image = np.roll(base, 4 * f, axis=1)
                container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
            container.mux(stream.encode())
    return {}


def _make_lance(folder: str, scale: float) -> dict[str, Any]:
    import lance
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(SEED)
    n = lance_rows(scale)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16)
    table = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "value": rng.random(n),
            "label": pa.array([f"label-{i % 1000}" for i in range(n)]),
            "vec": vec,
        }
    )
    lance.write_dataset(table, os.path.join(folder, "data.lance"), max_rows_per_file=n // 32)
    kept = table.filter(pc.less(table["value"], 0.25))
    return {"expected": {"rows": kept.num_rows, "id_sum": int(pc.sum(kept["id"]).as_py())}}


def _prepare(kind: str) -> Any:
    makers = {"audio": (_audio_input, _make_audio), "video": (_video_input, _make_video)}
    makers["lance"] = (_lance_input, _make_lance)
    name_of, make = makers[kind]

    def prepare(scale: float) -> dict[str, Any]:
        spec = {"kind": kind, "scale": scale, "seed": SEED, "version": FORMAT_VERSION}
        return ensure_input(name_of(scale), spec, lambda folder: make(folder, scale))

    return prepare


def _agree(label: str) -> Any:
    def check(results: dict[str, Any], scale: float) -> str | None:
        if label == "B17-LANCE":
            manifest = read_manifest(_lance_input(scale)) or {}
            want = manifest.get("expected")
            wrong = {s: r for s, r in results.items() if r != want}
            return f"{label}: every system must read {want}; got {wrong}" if wrong else None
        values = list(results.values())
        first = values[0] if values else None
        for got in results.values():
            for key, value in got.items():
                expected = first[key]
                close = abs(value - expected) <= 1e-3 * max(1.0, abs(expected))
                if (value != expected) if isinstance(value, int) else not close:
                    return f"{label}: results differ: {results}"
        return None

    return check


BENCHMARKS = [
    Benchmark(
        name="B17-AUDIO",
        title="read_audio(200 x 10 s FLAC files) -> every sample decoded and summed",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, SOUNDFILE_LOOP),
        rows=audio_files,
        check=_agree("B17-AUDIO"),
        prepare=_prepare("audio"),
        targets=(
            Target(
                "B17-AUDIO: shardflow-local >= Ray Data's throughput",
                SHARDFLOW_LOCAL,
                RAY_DATA,
                1.0,
            ),
            Target(
                "B17-AUDIO: shardflow-local within 1.3x of the bare soundfile loop",
                SHARDFLOW_LOCAL,
                SOUNDFILE_LOOP,
                1.3,
                kind="within",
            ),
        ),
    ),
    Benchmark(
        name="B17-VIDEO",
        title="read_videos(8 x 240-frame 320x240 H.264 MP4s) -> every frame decoded to RGB",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PYAV_LOOP),
        rows=lambda scale: video_files(scale) * VIDEO_FRAMES,
        check=_agree("B17-VIDEO"),
        prepare=_prepare("video"),
        targets=(
            Target(
                "B17-VIDEO: shardflow-local >= Ray Data's throughput",
                SHARDFLOW_LOCAL,
                RAY_DATA,
                1.0,
            ),
            Target(
                "B17-VIDEO: shardflow-local within 1.3x of the bare PyAV loop",
                SHARDFLOW_LOCAL,
                PYAV_LOOP,
                1.3,
                kind="within",
            ),
        ),
    ),
    Benchmark(
        name="B17-LANCE",
        title=f"read_lance(4M rows, 32 fragments, 3 columns, {LANCE_FILTER!r}) -> one Arrow table",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, LANCE_SCAN),
        rows=lance_rows,
        check=_agree("B17-LANCE"),
        prepare=_prepare("lance"),
        targets=(
            Target(
                "B17-LANCE: shardflow-local >= Ray Data's throughput",
                SHARDFLOW_LOCAL,
                RAY_DATA,
                1.0,
            ),
            Target(
                "B17-LANCE: shardflow-local within 1.3x of pylance's own scan",
                SHARDFLOW_LOCAL,
                LANCE_SCAN,
                1.3,
                kind="within",
            ),
        ),
    ),
]


def _files(name: str) -> list[str]:
    folder = files_dir(name)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder))


def _engine(system: str) -> Any:
    if system == RAY_DATA:
        from systems import start_ray_data

        return start_ray_data().data
    from systems import start_shardflow

    return start_shardflow(system)


def _audio(system: str, scale: float) -> tuple[float, dict[str, Any]]:
    import numpy as np
    import soundfile

    files = _files(_audio_input(scale))
    samples, total = 0, 0.0
    if system == SOUNDFILE_LOOP:
        start = time.perf_counter()
        for path in files:
            data, _ = soundfile.read(path, dtype="float32", always_2d=True)
            samples += data.size
            total += float(np.sum(data, dtype=np.float64))
        return start, {"files": len(files), "samples": samples, "sum": total}
    m = _engine(system)
    start = time.perf_counter()
    count = 0
    for batch in m.read_audio(files_dir(_audio_input(scale))).iter_batches(batch_size=None):
        for amplitude in batch["amplitude"]:
            samples += amplitude.size
            total += float(np.sum(amplitude, dtype=np.float64))
        count += len(batch["sample_rate"])
    return start, {"files": count, "samples": samples, "sum": total}


def _video(system: str, scale: float) -> tuple[float, dict[str, Any]]:
    files = _files(_video_input(scale))
    frames = index_sum = 0
    if system == PYAV_LOOP:
        import av

        start = time.perf_counter()
        for path in files:
            with av.open(path) as container:
                for i, frame in enumerate(container.decode(video=0)):
                    frame.to_ndarray(format="rgb24")
                    frames += 1
                    index_sum += i
        return start, {"frames": frames, "index_sum": index_sum}
    if system == RAY_DATA:
        try:
            import decord  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"Ray Data's read_videos needs decord: {exc}") from None
    m = _engine(system)
    start = time.perf_counter()
    ds = m.read_videos(files_dir(_video_input(scale)))
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        frames += batch.num_rows
        index_sum += sum(batch.column("frame_index").to_pylist())
    return start, {"frames": frames, "index_sum": index_sum}


def _lance(system: str, scale: float) -> tuple[float, dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    uri = os.path.join(files_dir(_lance_input(scale)), "data.lance")
    if system == LANCE_SCAN:
        import lance

        start = time.perf_counter()
        table = lance.dataset(uri).to_table(columns=LANCE_COLUMNS, filter=LANCE_FILTER)
    else:
        m = _engine(system)
        start = time.perf_counter()
        ds = m.read_lance(uri, columns=LANCE_COLUMNS, filter=LANCE_FILTER)
        if system == RAY_DATA:
            import ray

            table = pa.concat_tables(ray.get(ds.to_arrow_refs()))
        else:
            table = ds.to_arrow()
    return start, {"rows": table.num_rows, "id_sum": int(pc.sum(table["id"]).as_py())}


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run one B17 benchmark on ``system`` (in the child), time it, and report its result."""
    kind = bench.name.split("-", 1)[1].lower()
    _prepare(kind)(scale)
    if kind == "audio":
        import soundfile  # noqa: F401  (imported before the clock on every system)

        start, result = _audio(system, scale)
    elif kind == "video":
        import av  # noqa: F401

        start, result = _video(system, scale)
    else:
        import lance  # noqa: F401

        start, result = _lance(system, scale)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "result": result, "t_result": time.time()}
