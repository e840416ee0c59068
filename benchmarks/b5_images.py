"""B5: images: read 5,000 JPEGs -> decode and resize to 64x64 -> write Parquet.

The input (generated once into ``benchmarks/data/``, reused while its size matches) is
5,000 x scale RGB JPEGs of 256x256 pixels: smooth random colour fields with mild noise, so
they compress like photographs (~15-20 KB each). shardflow and Ray Data both run
``read_images(folder, size=(64, 64), mode="RGB").write_parquet(out)``; each decodes with
Pillow and resizes with ``Image.resize(..., BILINEAR)``. The bare baseline does the same
decode and resize with Pillow on two threads, stacks the arrays into one fixed-shape tensor
column and writes it with ``pyarrow.parquet.write_table``. The time covers the pipeline
only. Afterwards the child reads its output back and reports the row count and the sum of
every pixel value: every system must report the same numbers, with as many rows as images.
"""

from __future__ import annotations

import os
import time
from typing import Any

from benchdata import ensure_input, files_dir, fresh_output_dir, read_manifest, remove
from registry import (
    PILLOW_2THREADS,
    RAY_DATA,
    SHARDFLOW_LOCAL,
    SHARDFLOW_RAY,
    Benchmark,
    Target,
)

BASE_IMAGES = 5_000
SIDE = 256
SIZE = (64, 64)  # (height, width), as read_images takes it
MODE = "RGB"
JPEG_QUALITY = 90
NUM_THREADS = 2
SEED = 5
FORMAT_VERSION = 1


def num_images(scale: float) -> int:
    return max(1, int(BASE_IMAGES * scale))


def _input_name(scale: float) -> str:
    return f"b5_images_{num_images(scale)}x{SIDE}px"


def _spec(scale: float) -> dict[str, Any]:
    return {
        "images": num_images(scale),
        "side": SIDE,
        "quality": JPEG_QUALITY,
        "seed": SEED,
        "version": FORMAT_VERSION,
    }


def _make_image(index: int) -> Any:
    """A smooth random colour field with mild noise (compresses like a photograph)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng([SEED, index])
    coarse = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((SIDE, SIDE), Image.Resampling.BICUBIC))
    noise = rng.normal(0, 6, field.shape)
    return Image.fromarray(np.clip(field + noise, 0, 255).astype(np.uint8))


def _generate(folder: str, scale: float) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    def one(index: int) -> int:
        path = os.path.join(folder, f"img-{index:05d}.jpg")
        _make_image(index).save(path, format="JPEG", quality=JPEG_QUALITY)
        return os.path.getsize(path)

    with ThreadPoolExecutor(max_workers=NUM_THREADS) as pool:
        sizes = list(pool.map(one, range(num_images(scale))))
    return {"expected": {"rows": len(sizes)}, "bytes_on_disk": sum(sizes)}


def prepare(scale: float) -> dict[str, Any]:
    """Generate the input for ``scale`` unless a matching one is already there."""
    return ensure_input(_input_name(scale), _spec(scale), lambda folder: _generate(folder, scale))


def _check(results: dict[str, Any], scale: float) -> str | None:
    manifest = read_manifest(_input_name(scale))
    if manifest is None:
        return "B5: the input's manifest is missing; cannot check the results"
    want_rows = manifest["expected"]["rows"]
    wrong_rows = {s: r["rows"] for s, r in results.items() if r["rows"] != want_rows}
    if wrong_rows:
        return f"B5: every system must write {want_rows} rows; got {wrong_rows}"
    sums = {s: r["pixel_sum"] for s, r in results.items()}
    if len(set(sums.values())) > 1:
        return f"B5: every system must write the same pixels; sums of pixel values {sums}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B5",
        title="read_images(5,000 x scale JPEGs 256x256, size=(64, 64)) -> write_parquet",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, PILLOW_2THREADS),
        rows=num_images,
        check=_check,
        prepare=prepare,
        targets=(
            Target(
                "B5: shardflow-local >= 2x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 2.0
            ),
            Target(
                "B5: shardflow-local within 1.25x of the bare Pillow loop",
                SHARDFLOW_LOCAL,
                PILLOW_2THREADS,
                1.25,
                kind="within",
            ),
        ),
    ),
]


def _pillow_loop(source: str, out: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    height, width = SIZE

    def one(name: str) -> Any:
        with Image.open(os.path.join(source, name)) as image:
            image = image.convert(MODE) if image.mode != MODE else image
            return np.asarray(image.resize((width, height), resample=Image.Resampling.BILINEAR))

    names = sorted(os.listdir(source))
    with ThreadPoolExecutor(max_workers=NUM_THREADS) as pool:
        pixels = np.stack(list(pool.map(one, names)))
    os.makedirs(out)
    table = pa.table({"image": pa.FixedShapeTensorArray.from_numpy_ndarray(pixels)})
    pq.write_table(table, os.path.join(out, "images.parquet"), compression="snappy")


def _leaf_values(array: Any) -> Any:
    """The primitive values under a (chunk of a) tensor column, whatever its nesting."""
    import pyarrow as pa

    while True:
        if isinstance(array, pa.ExtensionArray):
            array = array.storage
        elif (
            pa.types.is_list(array.type)
            or pa.types.is_large_list(array.type)
            or pa.types.is_fixed_size_list(array.type)
        ):
            array = array.flatten()
        else:
            return array


def summarize_output(out: str) -> dict[str, int]:
    """Row count and sum of every pixel value of the ``image`` column under ``out``."""
    import numpy as np
    import pyarrow.dataset as pads

    column = pads.dataset(out, format="parquet").to_table(columns=["image"])["image"]
    pixel_sum = 0
    for chunk in column.chunks:
        values = _leaf_values(chunk).to_numpy(zero_copy_only=False)
        pixel_sum += int(values.sum(dtype=np.int64))
    return {"rows": len(column), "pixel_sum": pixel_sum}


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child), time it, and read the output back."""
    prepare(scale)
    source = files_dir(_input_name(scale))
    out = fresh_output_dir(f"b5-{system}")
    from PIL import Image  # noqa: F401  (every system imports Pillow before the clock)

    try:
        if system == PILLOW_2THREADS:
            import numpy  # noqa: F401
            import pyarrow.parquet  # noqa: F401

            start = time.perf_counter()
            _pillow_loop(source, out)
        elif system == RAY_DATA:
            from systems import start_ray_data

            ray = start_ray_data()
            start = time.perf_counter()
            ray.data.read_images(source, size=SIZE, mode=MODE).write_parquet(out)
        else:
            from systems import start_shardflow

            sf = start_shardflow(system)
            start = time.perf_counter()
            sf.read_images(source, size=SIZE, mode=MODE).write_parquet(out)
        seconds = time.perf_counter() - start
        done = time.time()
        result = summarize_output(out)
    finally:
        remove(out)
    return {"seconds": seconds, "result": result, "t_result": done}
