"""B9: batch inference: 5,000 JPEGs -> resize -> preprocess -> a CNN on two actors -> Parquet.

The pipeline is examples/batch_inference.py's ``build_pipeline``, run unchanged on shardflow
and on Ray Data: ``read_images(size=(224, 224), mode="RGB", include_paths=True)`` ->
``map_batches(preprocess, batch_size=64)`` (normalized float32, channels first) ->
``map_batches(Predictor, concurrency=2, batch_size=64)`` (TinyCNN, three strided convolutions,
loaded once per actor) -> ``write_parquet``. Ray Data's actors ask for ``num_cpus=0.5``: with
the default of one CPU each, two actors take both CPUs and its read tasks never run (Ray
issue 44687). The bare baseline does the same decode, resize, normalization and inference
with Pillow and torch on two threads, and writes one Parquet file.

The input (generated once into ``benchmarks/data/``) is 5,000 x scale RGB JPEGs of 256x256
pixels and the model's weights. Each child also samples the proportional set size (PSS) of
its whole process tree (its Ray, actors and workers included) and reports the peak as
``peak_memory_mib`` in its result (``run.py --json``). The check: every system labels every
image, with the same labels.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from benchdata import ensure_input, fresh_output_dir, input_dir, read_manifest, remove
from registry import RAY_DATA, SHARDFLOW_LOCAL, SHARDFLOW_RAY, Benchmark, Target

BASE_IMAGES = 5_000
BARE = "pillow-torch-2threads"
RAY_DATA_ACTOR_CPUS = 0.5
FORMAT_VERSION = 1
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _example() -> Any:
    """examples/batch_inference.py, imported (it imports torch)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import batch_inference

    return batch_inference


def num_images(scale: float) -> int:
    return max(1, int(BASE_IMAGES * scale))


def _input_name(scale: float) -> str:
    return f"b9_batch_inference_{num_images(scale)}"


def _generate(folder: str, scale: float) -> dict[str, Any]:
    example = _example()
    example.make_images(folder, num_images(scale))
    return {"expected": {"rows": num_images(scale)}}


def prepare(scale: float) -> dict[str, Any]:
    """The JPEGs (in ``files/``) and the model's weights, generated unless already there."""
    spec = {"images": num_images(scale), "version": FORMAT_VERSION}
    manifest = ensure_input(_input_name(scale), spec, lambda folder: _generate(folder, scale))
    weights = os.path.join(input_dir(_input_name(scale)), "tiny_cnn_v2.pt")
    if not os.path.exists(weights):
        _example().save_weights(weights + ".tmp")
        os.replace(weights + ".tmp", weights)
    return manifest


def _check(results: dict[str, Any], scale: float) -> str | None:
    manifest = read_manifest(_input_name(scale))
    want = manifest["expected"]["rows"] if manifest else num_images(scale)
    wrong = {s: r["rows"] for s, r in results.items() if r["rows"] != want}
    if wrong:
        return f"B9: every system must label {want} images; got {wrong}"
    labels = {s: r["labels"] for s, r in results.items()}
    if len({tuple(sorted(v.items())) for v in labels.values()}) > 1:
        return f"B9: every system must give the same labels; counts per label {labels}"
    return None


BENCHMARKS = [
    Benchmark(
        name="B9",
        title="batch inference: 5,000 x scale JPEGs -> resize 224x224 -> preprocess -> "
        "TinyCNN on 2 actors -> Parquet",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, SHARDFLOW_RAY, RAY_DATA, BARE),
        rows=num_images,
        check=_check,
        prepare=prepare,
        targets=(
            Target(
                "B9: shardflow-local >= 1.5x Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 1.5
            ),
            Target(
                "B9: shardflow-local within 1.25x of the bare Pillow+torch loop",
                SHARDFLOW_LOCAL,
                BARE,
                1.25,
                kind="within",
            ),
        ),
    ),
]


class PeakMemory:
    """Samples the PSS of this process and all its descendants in a thread; ``peak`` in bytes."""

    def __init__(self, interval_s: float = 0.1):
        import psutil

        self._psutil = psutil
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        me = self._psutil.Process()
        total = 0
        for proc in [me] + me.children(recursive=True):
            try:
                total += proc.memory_full_info().pss
            except (self._psutil.Error, OSError):
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._sample())


def summarize_output(out: str) -> dict[str, Any]:
    """Rows and the count of each label in the predictions under ``out``."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    table = pads.dataset(out, format="parquet").to_table(columns=["label"])
    counts = pc.value_counts(table.column("label").combine_chunks())
    labels = {str(c["values"]): int(c["counts"]) for c in counts.to_pylist()}
    return {"rows": table.num_rows, "labels": dict(sorted(labels.items()))}


def _ship(module: Any) -> None:
    """Pickle the example's functions and classes by value: Ray's workers cannot import it
    (Ray pickles with its own copy of cloudpickle)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    if "ray" in sys.modules:
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(module)


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child), time it and its memory, read it back."""
    prepare(scale)
    folder = input_dir(_input_name(scale))
    images, weights = os.path.join(folder, "files"), os.path.join(folder, "tiny_cnn_v2.pt")
    out = fresh_output_dir(f"b9-{system}")
    example = _example()  # torch and the model's code are imported before the clock
    try:
        with PeakMemory() as memory:
            if system == BARE:
                start = time.perf_counter()
                example.bare_loop(images, weights, out, threads=2)
            elif system == RAY_DATA:
                from systems import start_ray_data

                ray = start_ray_data()
                _ship(example)
                start = time.perf_counter()
                example.build_pipeline(
                    ray.data, images, weights, actor_args={"num_cpus": RAY_DATA_ACTOR_CPUS}
                ).write_parquet(out)
            else:
                from systems import start_shardflow

                sf = start_shardflow(system)
                _ship(example)
                start = time.perf_counter()
                example.build_pipeline(sf, images, weights).write_parquet(out)
            seconds = time.perf_counter() - start
            done = time.time()
        result = summarize_output(out)
    finally:
        remove(out)
    result["peak_memory_mib"] = round(memory.peak / 2**20)  # not compared by the check
    return {"seconds": seconds, "result": result, "t_result": done}
