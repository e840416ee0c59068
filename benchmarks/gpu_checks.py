"""Checks of shardflow's GPU stages on a CUDA machine (run by hand where a GPU is present).

    python benchmarks/gpu_checks.py --images 2000 --json gpu_checks.json

1. examples/batch_inference.py's pipeline (read_images -> preprocess -> the TinyCNN Predictor
   in actors -> Parquet) on the CPU, then on CUDA with one actor of ``num_gpus=1`` and with
   two actors of ``num_gpus=0.5`` sharing the device: per image, the CUDA runs' labels and
   scores must equal the CPU run's (TF32 is turned off for the comparison), and every actor
   must see only its device (``CUDA_VISIBLE_DEVICES`` and torch's device count, reported by
   the actor itself).
2. The GPU preprocessing stage (benchmarks/gpu_models.py's ``GpuPreprocess``) against the
   CPU's ``preprocess`` on the same batch: the largest difference must stay below 1e-5.

Prints a line per check and exits 1 when one fails. B18 (benchmarks/run.py --only B18)
measures the throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


class SeeingPredictor:
    """The example's Predictor, plus what its actor sees: its pid, ``CUDA_VISIBLE_DEVICES``
    and how many devices torch counts."""

    def __init__(self, weights: str, device: str) -> None:
        import batch_inference
        import torch

        self.inner = batch_inference.Predictor(weights, device)
        self.pid = os.getpid()
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        self.count = torch.cuda.device_count() if device == "cuda" else 0

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        out = self.inner(batch)
        rows = len(out["path"])
        out["pid"] = np.full(rows, self.pid, dtype=np.int64)
        out["visible"] = np.array([self.visible] * rows)
        out["device_count"] = np.full(rows, self.count, dtype=np.int64)
        return out


def run_pipeline(sf: Any, images: str, weights: str, device: str, actors: int) -> Any:
    """The example's pipeline with ``SeeingPredictor``; returns its rows as pandas, by path."""
    import batch_inference as ex

    num_gpus = ex.gpus_per_actor(device, actors)
    ds = sf.read_images(images, size=ex.SIZE, mode="RGB", include_paths=True)
    ds = ds.map_batches(ex.preprocess, batch_size=ex.BATCH_SIZE)
    ds = ds.map_batches(
        SeeingPredictor,
        fn_constructor_kwargs={"weights": weights, "device": device},
        batch_size=ex.BATCH_SIZE,
        concurrency=actors,
        **({"num_gpus": num_gpus} if num_gpus else {}),
    )
    start = time.perf_counter()
    frame = ds.to_pandas()
    seconds = time.perf_counter() - start
    return frame.sort_values("path").reset_index(drop=True), seconds


def check_inference(sf: Any, images: str, weights: str, report: dict[str, Any]) -> bool:
    import numpy as np

    cpu, cpu_s = run_pipeline(sf, images, weights, "cpu", 2)
    report["cpu"] = {"rows": len(cpu), "seconds": round(cpu_s, 2)}
    ok = True
    for actors in (1, 2):
        gpu, gpu_s = run_pipeline(sf, images, weights, "cuda", actors)
        same_paths = gpu["path"].tolist() == cpu["path"].tolist()
        labels_differ = int((gpu["label"].to_numpy() != cpu["label"].to_numpy()).sum())
        score_diff = float(np.abs(gpu["score"].to_numpy() - cpu["score"].to_numpy()).max())
        views = sorted(
            {(int(p), v, int(c)) for p, v, c in gpu[["pid", "visible", "device_count"]].values}
        )
        fine = (
            same_paths
            and labels_differ == 0
            and score_diff < 1e-4
            and len({p for p, _, _ in views}) == actors
            and all(c == 1 and v not in ("", "<unset>") for _, v, c in views)
        )
        ok &= fine
        report[f"cuda_actors_{actors}"] = {
            "num_gpus_each": 1.0 / actors,
            "rows": len(gpu),
            "seconds": round(gpu_s, 2),
            "labels_differing_from_cpu": labels_differ,
            "max_score_difference": score_diff,
            "actors_seen (pid, CUDA_VISIBLE_DEVICES, device_count)": views,
            "ok": fine,
        }
        print(
            f"[{'ok' if fine else 'FAIL'}] CUDA, {actors} actor(s): {report[f'cuda_actors_{actors}']}"
        )
    return ok


def check_gpu_preprocess(sf: Any, images: str, report: dict[str, Any]) -> bool:
    import batch_inference as ex
    import gpu_models
    import numpy as np

    batch = sf.read_images(images, size=ex.SIZE, mode="RGB", include_paths=True).take_batch(256)
    cpu = gpu_models.preprocess(batch)["image"]
    stage = gpu_models.GpuPreprocess("cuda")
    gpu = stage(batch)["image"]
    diff = float(np.abs(cpu - gpu).max())
    fine = gpu.dtype == np.float32 and gpu.shape == cpu.shape and diff < 1e-5
    report["gpu_preprocess"] = {"shape": list(gpu.shape), "max_difference": diff, "ok": fine}
    print(f"[{'ok' if fine else 'FAIL'}] GPU preprocessing: {report['gpu_preprocess']}")
    return fine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", default=None, help="write the report here")
    args = parser.parse_args(argv)
    # Exact comparisons with the CPU: no TF32 in cuDNN and cuBLAS (inherited by actors).
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [HERE, EXAMPLES] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    sys.path[:0] = [HERE, EXAMPLES]
    import batch_inference as ex
    import torch

    import shardflow as sf

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="shardflow-gpu-checks-")
    images = ex.make_images(
        os.path.join(workdir, "images"), args.images, threads=os.cpu_count() or 2
    )
    weights = ex.save_weights(os.path.join(workdir, "tiny_cnn.pt"))
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "images": args.images}
    ok = check_inference(sf, images, weights, report)
    ok &= check_gpu_preprocess(sf, images, report)
    report["ok"] = ok
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
