"""B15-WDS, B15-TFR, B15-AVRO: read WebDataset shards, TFRecords and Avro files into a checksum.

Each input is generated once into ``benchmarks/data/`` (reused while its size matches), 8
files at every scale:

- **B15-WDS**: 8,000 samples x scale in 8 tar shards: a 64x64 RGB JPEG (smooth colour fields
  with noise, about 3 KB), a ``.cls`` label and a ``.json`` member. Every system decodes the
  JPEGs to pixel arrays and the labels to integers; the checksum is the sample count, the sum
  of the labels and the sum of every pixel value.
- **B15-TFR**: 200,000 ``tf.train.Example`` records x scale in 8 TFRecord files: ``id`` and
  ``label`` (one int64 each), ``score`` (one float), ``tokens`` (16 int64) and ``text`` (8-24
  bytes). Checksum: the record count, the sums of ``id`` and ``label`` and the number of
  tokens.
- **B15-AVRO**: 400,000 records x scale in 8 deflate-compressed Avro files with the same
  fields (``label`` an Avro ``int``, ``score`` a ``double``, ``text`` a ``string``); the same
  checksum.

Systems: shardflow and Ray Data run ``read_webdataset`` / ``read_tfrecords`` / ``read_avro``
on the folder and ``iter_batches(batch_size=None)`` into the checksum on the driver (numpy
batches for WebDataset, pyarrow ones otherwise). The reference libraries' own readers, one
thread, no engine:

- ``webdataset-loop``: ``webdataset.WebDataset(shards).decode("rgb8")``, sample by sample;
- ``protobuf-loop``: each file's records split by their headers, both CRC-32Cs checked
  (google-crc32c), each record parsed with protobuf into an ``Example`` message and its
  features gathered into columns of one Arrow table per file (what read_tfrecords does,
  written as a plain loop);
- ``tf-data``: TensorFlow's ``tf.data.TFRecordDataset(files).batch(4096)`` with
  ``tf.io.parse_example`` (C++ parsing; no target, for reference);
- ``fastavro-loop``: ``pyarrow.Table.from_pylist(list(fastavro.reader(f)))`` per file.

Before the clock starts, every system reads a tiny file of the same format once (imports of
Pillow, protobuf, fastavro or TensorFlow, in Ray's workers too, are not measured). Targets:
shardflow-local at least Ray Data's throughput, and within 1.3x of the bare library loop.
"""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
import time
from typing import Any

from benchdata import ensure_input, files_dir, read_manifest
from registry import RAY_DATA, SHARDFLOW_LOCAL, SHARDFLOW_RAY, Benchmark, Target

WEBDATASET_LOOP = "webdataset-loop"
PROTOBUF_LOOP = "protobuf-loop"
TF_DATA = "tf-data"
FASTAVRO_LOOP = "fastavro-loop"

NUM_FILES = 8
SEED = 13
FORMAT_VERSION = 1
WDS, TFR, AVRO = "wds", "tfr", "avro"
BASE_ROWS = {WDS: 8_000, TFR: 200_000, AVRO: 400_000}
TOKENS = 16
IMAGE_SIDE = 64
AVRO_SCHEMA = {
    "type": "record",
    "name": "Example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "label", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "tokens", "type": {"type": "array", "items": "long"}},
        {"name": "text", "type": "string"},
    ],
}


def num_rows(fmt: str, scale: float) -> int:
    return max(NUM_FILES * 10, int(BASE_ROWS[fmt] * scale))


def _input_name(fmt: str, scale: float) -> str:
    return f"b15_{fmt}_{num_rows(fmt, scale)}rows_{NUM_FILES}files"


# -- input --------------------------------------------------------------------------------------


def _jpeg(rng: Any) -> tuple[bytes, int]:
    """A smooth random colour field with noise as a JPEG, and the sum of its decoded pixels."""
    import numpy as np
    from PIL import Image

    coarse = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((IMAGE_SIDE, IMAGE_SIDE), Image.BICUBIC))
    noisy = np.clip(field + rng.normal(0, 4, field.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(noisy).save(out, format="JPEG", quality=90)
    data = out.getvalue()
    with Image.open(io.BytesIO(data)) as decoded:
        return data, int(np.asarray(decoded).sum(dtype=np.int64))


def _generate_wds(folder: str, scale: float) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(SEED)
    n = num_rows(WDS, scale)
    expected = {"rows": 0, "label_sum": 0, "pixel_sum": 0}
    bounds = np.linspace(0, n, NUM_FILES + 1).astype(int)
    for f in range(NUM_FILES):
        with tarfile.open(os.path.join(folder, f"shard-{f:03d}.tar"), "w") as tar:
            for i in range(int(bounds[f]), int(bounds[f + 1])):
                image, pixels = _jpeg(rng)
                label = int(rng.integers(0, 1000))
                members = [
                    ("cls", str(label).encode()),
                    ("jpg", image),
                    ("json", json.dumps({"id": i, "caption": f"sample {i}"}).encode()),
                ]
                for suffix, data in members:
                    info = tarfile.TarInfo(f"sample{i:08d}.{suffix}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                expected["rows"] += 1
                expected["label_sum"] += label
                expected["pixel_sum"] += pixels
    return {"expected": expected}


def _records(fmt: str, scale: float) -> Any:
    """``(file index, rows of that file, checksum facts)`` of the TFRecord and Avro inputs."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    n = num_rows(fmt, scale)
    bounds = np.linspace(0, n, NUM_FILES + 1).astype(int)
    for f in range(NUM_FILES):
        lo, hi = int(bounds[f]), int(bounds[f + 1])
        labels = rng.integers(0, 1000, hi - lo)
        tokens = rng.integers(0, 50_000, (hi - lo, TOKENS))
        scores = rng.random(hi - lo)
        lengths = rng.integers(8, 25, hi - lo)
        rows = [
            {
                "id": i,
                "label": int(labels[i - lo]),
                "score": float(scores[i - lo]),
                "tokens": tokens[i - lo].tolist(),
                "text": "x" * int(lengths[i - lo]),
            }
            for i in range(lo, hi)
        ]
        facts = {
            "rows": hi - lo,
            "id_sum": (lo + hi - 1) * (hi - lo) // 2,
            "label_sum": int(labels.sum()),
            "tokens": TOKENS * (hi - lo),
        }
        yield f, rows, facts


def _generate_tfr(folder: str, scale: float) -> dict[str, Any]:
    from shardflow.connectors.tfrecords.example_proto import example_class
    from shardflow.connectors.tfrecords.framing import frame_record

    expected = dict.fromkeys(("rows", "id_sum", "label_sum", "tokens"), 0)
    for f, rows, facts in _records(TFR, scale):
        with open(os.path.join(folder, f"part-{f:03d}.tfrecords"), "wb") as out:
            for row in rows:
                example = example_class()()
                features = example.features.feature
                features["id"].int64_list.value.append(row["id"])
                features["label"].int64_list.value.append(row["label"])
                features["score"].float_list.value.append(row["score"])
                features["tokens"].int64_list.value.extend(row["tokens"])
                features["text"].bytes_list.value.append(row["text"].encode())
                out.write(frame_record(example.SerializeToString()))
        for key, value in facts.items():
            expected[key] += value
    return {"expected": expected}


def _generate_avro(folder: str, scale: float) -> dict[str, Any]:
    import fastavro

    schema = fastavro.parse_schema(AVRO_SCHEMA)
    expected = dict.fromkeys(("rows", "id_sum", "label_sum", "tokens"), 0)
    for f, rows, facts in _records(AVRO, scale):
        with open(os.path.join(folder, f"part-{f:03d}.avro"), "wb") as out:
            fastavro.writer(out, schema, rows, codec="deflate")
        for key, value in facts.items():
            expected[key] += value
    return {"expected": expected}


_GENERATORS = {WDS: _generate_wds, TFR: _generate_tfr, AVRO: _generate_avro}


def prepare_format(fmt: str, scale: float) -> dict[str, Any]:
    spec = {"format": fmt, "rows": num_rows(fmt, scale), "files": NUM_FILES, "seed": SEED}
    spec["version"] = FORMAT_VERSION
    return ensure_input(
        _input_name(fmt, scale), spec, lambda folder: _GENERATORS[fmt](folder, scale)
    )


def _tiny_input(fmt: str, scale: float) -> str:
    """A folder of a few small files of ``fmt``, read once before the clock so that imports
    (in Ray Data's worker processes too: several files make several tasks) are not timed."""
    name = f"{_input_name(fmt, scale)}_warmup"
    first = sorted(os.listdir(files_dir(_input_name(fmt, scale))))[0]
    source = os.path.join(files_dir(_input_name(fmt, scale)), first)

    def write_one(path: str) -> None:
        if fmt == WDS:
            with tarfile.open(source) as full, tarfile.open(path, "w") as out:
                for info in full.getmembers()[:3]:
                    out.addfile(info, full.extractfile(info))
        elif fmt == TFR:
            with open(source, "rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                f.seek(0)
                record = f.read(16 + length)
            with open(path, "wb") as out:
                out.write(record)
        else:
            import fastavro

            with open(source, "rb") as f:
                one = [next(iter(fastavro.reader(f)))]
            with open(path, "wb") as out:
                fastavro.writer(out, fastavro.parse_schema(AVRO_SCHEMA), one)

    def generate(folder: str) -> dict[str, Any]:
        for i in range(4):
            write_one(os.path.join(folder, f"{i}-{first}"))
        return {}

    ensure_input(name, {"from": _input_name(fmt, scale), "version": FORMAT_VERSION + 1}, generate)
    return files_dir(name)


# -- the systems ----------------------------------------------------------------------------------


def _empty(fmt: str) -> dict[str, int]:
    if fmt == WDS:
        return dict.fromkeys(("rows", "label_sum", "pixel_sum"), 0)
    return dict.fromkeys(("rows", "id_sum", "label_sum", "tokens"), 0)


def _add_arrow(sums: dict[str, int], batch: Any) -> None:
    """Add a pyarrow batch (TFRecords, Avro) to the checksum."""
    import pyarrow.compute as pc

    sums["rows"] += batch.num_rows
    sums["id_sum"] += int(pc.sum(batch["id"]).as_py() or 0)
    sums["label_sum"] += int(pc.sum(batch["label"]).as_py() or 0)
    sums["tokens"] += int(pc.sum(pc.list_value_length(batch["tokens"])).as_py() or 0)


def _add_images(sums: dict[str, int], labels: Any, pixels: Any) -> None:
    import numpy as np

    sums["rows"] += len(labels)
    sums["label_sum"] += int(np.sum(labels, dtype=np.int64))
    sums["pixel_sum"] += int(np.sum(pixels, dtype=np.int64))


def _engine(module: Any, fmt: str, source: str) -> dict[str, int]:
    """shardflow and Ray Data: the same calls on either module."""
    sums = _empty(fmt)
    if fmt == WDS:
        ds = module.read_webdataset(source)
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            _add_images(sums, batch["cls"], batch["jpg"])
        return sums
    ds = module.read_tfrecords(source) if fmt == TFR else module.read_avro(source)
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        _add_arrow(sums, batch)
    return sums


def _files(source: str) -> list[str]:
    return [os.path.join(source, name) for name in sorted(os.listdir(source))]


def _webdataset_loop(source: str) -> dict[str, int]:
    from systems import import_engine

    wds = import_engine("webdataset")
    sums = _empty(WDS)
    for sample in wds.WebDataset(_files(source), shardshuffle=False).decode("rgb8"):
        _add_images(sums, [sample["cls"]], sample["jpg"])
    return sums


def _protobuf_loop(source: str) -> dict[str, int]:
    import google_crc32c
    import pyarrow as pa

    from shardflow.connectors.tfrecords.example_proto import example_class

    parse = example_class().FromString
    crc = google_crc32c.value

    def masked(data: bytes) -> int:
        value = crc(data)
        return (((value >> 15) | (value << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    sums = _empty(TFR)
    for path in _files(source):
        with open(path, "rb") as f:
            data = f.read()
        columns: dict[str, list[Any]] = {}
        position = 0
        while position < len(data):
            length, length_crc = struct.unpack_from("<QI", data, position)
            record = data[position + 12 : position + 12 + length]
            (data_crc,) = struct.unpack_from("<I", data, position + 12 + length)
            if masked(data[position : position + 8]) != length_crc or masked(record) != data_crc:
                raise ValueError(f"{path}: corrupt record at {position}")
            position += 16 + length
            features = parse(record).features.feature
            for name in features:
                feature = features[name]
                values = getattr(feature, feature.WhichOneof("kind")).value
                columns.setdefault(name, []).append(values[0] if len(values) == 1 else list(values))
        _add_arrow(sums, pa.table(columns))
    return sums


def _tf_data(source: str) -> dict[str, int]:
    from systems import import_engine

    tf = import_engine("tensorflow")
    spec = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "score": tf.io.FixedLenFeature([], tf.float32),
        "tokens": tf.io.VarLenFeature(tf.int64),
        "text": tf.io.FixedLenFeature([], tf.string),
    }
    dataset = tf.data.TFRecordDataset(_files(source)).batch(4096)
    dataset = dataset.map(lambda records: tf.io.parse_example(records, spec))
    sums = _empty(TFR)
    for batch in dataset:
        sums["rows"] += int(batch["id"].shape[0])
        sums["id_sum"] += int(tf.reduce_sum(batch["id"]))
        sums["label_sum"] += int(tf.reduce_sum(batch["label"]))
        sums["tokens"] += int(batch["tokens"].values.shape[0])
    return sums


def _fastavro_loop(source: str) -> dict[str, int]:
    import fastavro
    import pyarrow as pa

    sums = _empty(AVRO)
    for path in _files(source):
        with open(path, "rb") as f:
            _add_arrow(sums, pa.Table.from_pylist(list(fastavro.reader(f))))
    return sums


LOOPS = {
    WEBDATASET_LOOP: _webdataset_loop,
    PROTOBUF_LOOP: _protobuf_loop,
    TF_DATA: _tf_data,
    FASTAVRO_LOOP: _fastavro_loop,
}


# -- the benchmarks ---------------------------------------------------------------------------------


def _checker(fmt: str) -> Any:
    def check(results: dict[str, Any], scale: float) -> str | None:
        manifest = read_manifest(_input_name(fmt, scale))
        if manifest is None:
            return f"B15-{fmt}: the input's manifest is missing; cannot check the results"
        want = manifest["expected"]
        wrong = {system: got for system, got in results.items() if got != want}
        return f"B15-{fmt}: every system must compute {want}; got {wrong}" if wrong else None

    return check


def _benchmark(name: str, fmt: str, title: str, loops: tuple[str, ...]) -> Benchmark:
    loop = loops[0]
    return Benchmark(
        name=name,
        title=title,
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, *loops),
        rows=lambda scale: num_rows(fmt, scale),
        check=_checker(fmt),
        prepare=lambda scale: prepare_format(fmt, scale),
        targets=(
            Target(
                f"{name}: shardflow-local >= Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 1.0
            ),
            Target(
                f"{name}: shardflow-local within 1.3x of the bare {loop}",
                SHARDFLOW_LOCAL,
                loop,
                1.3,
                kind="within",
            ),
        ),
        peers=loops,
    )


BENCHMARKS = [
    _benchmark(
        "B15-WDS",
        WDS,
        "read_webdataset(8k JPEG samples x scale, 8 shards) -> decoded pixels and labels",
        (WEBDATASET_LOOP,),
    ),
    _benchmark(
        "B15-TFR",
        TFR,
        "read_tfrecords(200k Examples x scale, 8 files) -> checksum",
        (PROTOBUF_LOOP, TF_DATA),
    ),
    _benchmark(
        "B15-AVRO", AVRO, "read_avro(400k records x scale, 8 files) -> checksum", (FASTAVRO_LOOP,)
    ),
]
_FORMATS = {"B15-WDS": WDS, "B15-TFR": TFR, "B15-AVRO": AVRO}


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Read the input on ``system`` (in the child) and return the timed checksum."""
    fmt = _FORMATS[bench.name]
    prepare_format(fmt, scale)
    source = files_dir(_input_name(fmt, scale))
    tiny = _tiny_input(fmt, scale)
    import pyarrow as pa

    _add_arrow(_empty(TFR), pa.table({"id": [1], "label": [1], "tokens": [[1]]}))  # warm pyarrow
    if system in LOOPS:
        LOOPS[system](tiny)
        start = time.perf_counter()
        result = LOOPS[system](source)
    else:
        if system == RAY_DATA:
            from systems import start_ray_data

            module = start_ray_data().data
        else:
            from systems import start_shardflow

            module = start_shardflow(system)
        _engine(module, fmt, tiny)
        start = time.perf_counter()
        result = _engine(module, fmt, source)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "result": result, "t_result": time.time()}
