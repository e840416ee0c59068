"""B18: batch inference on a GPU: JPEGs -> decode, resize, normalize on CPU workers ->
ResNet-50 on one CUDA device -> Parquet.

The same pipeline on shardflow and on Ray Data: ``read_images(size=(224, 224), mode="RGB",
include_paths=True)`` -> ``map_batches(preprocess, batch_size=64)`` (normalized float32,
channels first) -> ``map_batches(Predictor, concurrency=1, num_gpus=1, batch_size=256)`` (a
ResNet-50 of torch layers with random weights, benchmarks/gpu_models.py) -> ``write_parquet``.
The bare ceiling is the torch loop users write by hand: a ``DataLoader`` whose workers
decode, resize and normalize a batch each (``pin_memory=True``), the model in the main
process, one Parquet file at the end. ``shardflow-gpu-preprocess`` is the same pipeline
with the normalization moved to the GPU (a ``GpuPreprocess`` actor with ``num_gpus=0.5``
beside the predictor's 0.5): uint8 pixels cross the process boundaries instead of float32.

Every child samples the GPU's utilization with ``nvidia-smi`` every 100 ms while it runs
the pipeline and reports the mean (``gpu_busy_percent``) and the device's name in its
result (``run.py --json``). Without CUDA every system says unavailable: the row skips.
``SHARDFLOW_B18_DEVICE=cpu`` runs it on the CPU instead, at a tiny scale, to try the code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

from benchdata import ensure_input, fresh_output_dir, input_dir, remove
from registry import RAY_DATA, SHARDFLOW_LOCAL, Benchmark, Target, Unavailable

BASE_IMAGES = 20_000
BARE = "torch-dataloader"
GPU_PREPROCESS = "shardflow-gpu-preprocess"
PREPROCESS_BATCH = 64
MODEL_BATCH = 256
FORMAT_VERSION = 1
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def num_images(scale: float) -> int:
    return max(1, int(BASE_IMAGES * scale))


def _input_name(scale: float) -> str:
    return f"b18_gpu_inference_{num_images(scale)}"


def _device() -> str:
    wanted = os.environ.get("SHARDFLOW_B18_DEVICE", "cuda")
    if wanted == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise Unavailable("no CUDA device")
    return wanted


def prepare(scale: float) -> dict[str, Any]:
    """The JPEGs (256x256, as B9's) and the ResNet's weights, generated unless there
    (nothing without CUDA: every system is unavailable then)."""
    try:
        _device()
    except Unavailable:
        return {}
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    import batch_inference
    import gpu_models

    spec = {"images": num_images(scale), "version": FORMAT_VERSION}
    manifest = ensure_input(
        _input_name(scale),
        spec,
        lambda folder: (
            batch_inference.make_images(folder, num_images(scale), threads=os.cpu_count() or 2)
            and {"expected": {"rows": num_images(scale)}}
        ),
    )
    gpu_models.save_weights(os.path.join(input_dir(_input_name(scale)), "resnet50.pt"))
    return manifest


def _check(results: dict[str, Any], scale: float) -> str | None:
    want = num_images(scale)
    wrong = {s: r["rows"] for s, r in results.items() if r["rows"] != want}
    if wrong:
        return f"B18: every system must label {want} images; got {wrong}"
    # cuDNN may pick other algorithms for other batch shapes: a near tie can flip a label.
    systems = list(results)
    for other in systems[1:]:
        a, b = results[systems[0]]["labels"], results[other]["labels"]
        moved = sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b)) // 2
        if moved > max(2, want // 500):
            return f"B18: {systems[0]} and {other} disagree on {moved} labels"
    return None


BENCHMARKS = [
    Benchmark(
        name="B18",
        title="GPU batch inference: 20,000 x scale JPEGs -> resize 224x224, normalize (CPU) -> "
        "ResNet-50 on 1 CUDA device -> Parquet",
        family=__name__,
        systems=(SHARDFLOW_LOCAL, GPU_PREPROCESS, RAY_DATA, BARE),
        rows=num_images,
        check=_check,
        prepare=prepare,
        targets=(
            Target("B18: shardflow-local >= Ray Data's throughput", SHARDFLOW_LOCAL, RAY_DATA, 1.0),
            Target(
                "B18: shardflow-local within 1.2x of the bare torch DataLoader loop",
                SHARDFLOW_LOCAL,
                BARE,
                1.2,
                kind="within",
            ),
        ),
    ),
]


class GpuSampler:
    """Samples the GPU's utilization (percent) with nvidia-smi every ``interval_ms``."""

    def __init__(self, interval_ms: int = 100) -> None:
        self.samples: list[int] = []
        self.name = ""
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._interval_ms = interval_ms

    def __enter__(self) -> GpuSampler:
        try:
            self._proc = subprocess.Popen(
                [
                    "nvidia-smi",
                    "--query-gpu=name,utilization.gpu",
                    "--format=csv,noheader,nounits",
                    f"--loop-ms={self._interval_ms}",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:
            return self  # no nvidia-smi (the CPU trial): no samples
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            name, _, value = line.rpartition(",")
            if value.strip().isdigit():
                self.name = name.strip()
                self.samples.append(int(value))

    def __exit__(self, *exc: Any) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def busy_percent(self) -> float | None:
        return round(sum(self.samples) / len(self.samples), 1) if self.samples else None


def _summarize(out: str) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    table = pads.dataset(out, format="parquet").to_table(columns=["label"])
    counts = pc.value_counts(table.column("label").combine_chunks()).to_pylist()
    return {
        "rows": table.num_rows,
        "labels": dict(sorted((str(c["values"]), int(c["counts"])) for c in counts)),
    }


def pipeline(m: Any, images: str, weights: str, device: str, gpu_preprocess: bool = False) -> Any:
    """The B18 pipeline on module ``m`` (``shardflow`` or ``ray.data``)."""
    import gpu_models

    gpus = {"num_gpus": 0.5 if gpu_preprocess else 1} if device == "cuda" else {}
    ds = m.read_images(images, size=gpu_models.SIZE, mode="RGB", include_paths=True)
    if gpu_preprocess:
        ds = ds.map_batches(
            gpu_models.GpuPreprocess,
            fn_constructor_kwargs={"device": device},
            batch_size=PREPROCESS_BATCH,
            concurrency=1,
            **gpus,
        )
    else:
        ds = ds.map_batches(gpu_models.preprocess, batch_size=PREPROCESS_BATCH)
    return ds.map_batches(
        gpu_models.Predictor,
        fn_constructor_kwargs={"weights": weights, "device": device},
        batch_size=MODEL_BATCH,
        concurrency=1,
        **gpus,
    )


def bare_loop(images: str, weights: str, out: str, device: str) -> float:
    """A torch DataLoader whose workers each decode, resize and normalize one batch."""
    import gpu_models
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    names = sorted(os.path.join(images, n) for n in os.listdir(images) if n.endswith(".jpg"))
    batches = [names[i : i + MODEL_BATCH] for i in range(0, len(names), MODEL_BATCH)]
    loader = torch.utils.data.DataLoader(
        _BatchFiles(batches),
        batch_size=None,
        num_workers=max(1, (os.cpu_count() or 2) - 2),
        pin_memory=device == "cuda",
        prefetch_factor=4,
        multiprocessing_context="spawn",
    )
    predictor = gpu_models.Predictor(weights, device)
    results = []
    start, first = time.perf_counter(), None
    for batch in loader:
        first = first if first is not None else time.perf_counter() - start
        images_on = batch["image"].to(predictor.device, non_blocking=True)
        with torch.inference_mode():
            score, label = torch.softmax(predictor.model(images_on), dim=1).max(dim=1)
        results.append((batch["path"], label.cpu().numpy(), score.cpu().numpy()))
    table = pa.table(
        {
            "path": np.concatenate([np.asarray(r[0]) for r in results]),
            "label": np.concatenate([r[1] for r in results]),
            "score": np.concatenate([r[2] for r in results]),
        }
    )
    os.makedirs(out, exist_ok=True)
    pq.write_table(table, os.path.join(out, "predictions.parquet"))
    return first or 0.0


class _BatchFiles:
    """A map-style dataset whose item ``i`` is batch ``i``, decoded and normalized."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict[str, Any]:
        import gpu_models
        import numpy as np
        import torch
        from PIL import Image

        pixels = []
        for path in self.batches[index]:
            with Image.open(path) as image:
                resized = image.convert("RGB").resize(gpu_models.SIZE[::-1], Image.BILINEAR)
                pixels.append(np.asarray(resized))
        batch = gpu_models.preprocess({"image": np.stack(pixels), "path": np.array([])})
        return {"image": torch.from_numpy(batch["image"]), "path": self.batches[index]}


def _importable_by_workers() -> None:
    """Workers (Ray's and shardflow's, both spawned) import gpu_models from this folder:
    torch's modules cannot be pickled by value."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def run(bench: Benchmark, system: str, scale: float) -> dict[str, Any]:
    """Run the pipeline on ``system`` (in the child) with the GPU sampled; read it back."""
    device = _device()
    prepare(scale)
    folder = input_dir(_input_name(scale))
    images, weights = os.path.join(folder, "files"), os.path.join(folder, "resnet50.pt")
    out = fresh_output_dir(f"b18-{system}")
    _importable_by_workers()
    import torch  # noqa: F401  (imported before the clock, as every system needs it)

    try:
        if system == BARE:
            with GpuSampler() as gpu:
                start = time.perf_counter()
                first_batch_s = bare_loop(images, weights, out, device)
                seconds = time.perf_counter() - start
        elif system == RAY_DATA:
            from systems import loopback_env

            loopback_env()
            import ray

            ray.init(
                num_cpus=os.cpu_count(),
                num_gpus=1 if device == "cuda" else 0,
                include_dashboard=False,
            )
            import ray.data

            ray.data.DataContext.get_current().enable_progress_bars = False
            with GpuSampler() as gpu:
                start = time.perf_counter()
                pipeline(ray.data, images, weights, device).write_parquet(out)
                seconds = time.perf_counter() - start
        else:
            from systems import start_shardflow

            sf = start_shardflow(SHARDFLOW_LOCAL)
            with GpuSampler() as gpu:
                start = time.perf_counter()
                pipeline(sf, images, weights, device, system == GPU_PREPROCESS).write_parquet(out)
                seconds = time.perf_counter() - start
        done = time.time()
        result = _summarize(out)
    finally:
        remove(out)
    result["gpu_busy_percent"] = gpu.busy_percent  # not compared by the check
    result["device"] = gpu.name or device
    if system == BARE:
        result["first_batch_s"] = round(first_batch_s, 2)  # the workers' start-up
    print(f"B18 {system}: GPU busy {gpu.busy_percent}% on {result['device']}", file=sys.stderr)
    return {"seconds": seconds, "result": result, "t_result": done}
