"""Batch inference end to end: JPEGs -> preprocess -> a PyTorch CNN in an actor pool -> Parquet.

    python examples/batch_inference.py                    # 2,000 images, local backend
    python examples/batch_inference.py --images 5000 --backend ray
    python examples/batch_inference.py --source webdataset   # the JPEGs in WebDataset shards

The script writes a folder of JPEGs and the weights of a small CNN, then runs the pipeline of
Ray Data's batch-inference guide with shardflow: ``read_images`` decodes and resizes in tasks,
``map_batches(preprocess)`` normalizes, ``map_batches(Predictor, concurrency=2)`` runs the
model in two long-lived actors that each load it once, and ``write_parquet`` stores one
prediction per image. It uses CUDA when torch sees a GPU (each actor gets its own, or half a
device when there is one), and the CPU otherwise. It prints the throughput.

Then it trains a simulated model (10 ms per step) for two epochs on the images, decoded once
and kept in memory, through ``iter_torch_batches``, and prints how much of the loop's time was
spent waiting for data: batches are prepared ahead of it in a background thread.

With ``--source webdataset`` the JPEGs are first packed into WebDataset tar shards (with
``write_webdataset``, one sample per image: ``<name>.jpg``), and the pipeline reads the shards
with ``read_webdataset`` and a decoder that turns each sample's JPEG into a resized array, as a
training cluster reading shards from object storage would.

The pipeline is written against the module it is given (``build_pipeline(sf, ...)``), so
benchmarks/b9_batch_inference.py runs the very same code on Ray Data.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

IMAGE_SIDE = 256  # the JPEGs written
SIZE = (224, 224)  # what the model sees (height, width)
NUM_CLASSES = 10
BATCH_SIZE = 64
ACTORS = 2
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)


class TinyCNN(torch.nn.Module):
    """A small image classifier: three strided convolutions, pooling, a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2, padding=1),
            torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
            torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(64, 128, 3, stride=2, padding=1),
            torch.nn.ReLU(inplace=True),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(128, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def save_weights(path: str, seed: int = 0) -> str:
    """Initialize the model with ``seed`` and save its weights (our "checkpoint": the model is
    not trained, so its labels are arbitrary; what matters here is moving the data)."""
    torch.manual_seed(seed)
    torch.save(TinyCNN().state_dict(), path)
    return path


def make_images(folder: str, count: int, seed: int = 0, threads: int = 2) -> str:
    """Write ``count`` JPEGs: smooth random colour fields that compress like photographs."""
    from PIL import Image

    os.makedirs(folder, exist_ok=True)

    def one(index: int) -> None:
        path = os.path.join(folder, f"img-{index:05d}.jpg")
        if os.path.exists(path):
            return
        rng = np.random.default_rng([seed, index])
        coarse = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((IMAGE_SIDE, IMAGE_SIDE), Image.BICUBIC))
        noisy = np.clip(field + rng.normal(0, 6, field.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(path + ".tmp", format="JPEG", quality=90)
        os.replace(path + ".tmp", path)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(count)))
    return folder


def make_shards(sf: Any, images: str, shards: str, per_shard: int = 500) -> str:
    """Pack the JPEGs of ``images`` into WebDataset shards of ``per_shard`` samples each:
    sample ``img-00042`` holds the member ``img-00042.jpg`` (the file's bytes, unchanged)."""
    if os.path.isdir(shards) and os.listdir(shards):
        return shards
    files = sf.read_binary_files(images, include_paths=True, file_extensions=["jpg"])
    samples = files.map(
        lambda row: {"__key__": os.path.basename(row["path"])[:-4], "jpg": row["bytes"]}
    )
    count = files.count()
    samples.repartition(max(1, -(-count // per_shard))).write_webdataset(shards)
    return shards


def decode_resized(sample: dict[str, Any]) -> dict[str, Any]:
    """WebDataset decoder: the sample's JPEG as an RGB array of ``SIZE``, its key as the path."""
    from PIL import Image

    with Image.open(io.BytesIO(sample["jpg"])) as image:
        pixels = image.convert("RGB").resize((SIZE[1], SIZE[0]), Image.BILINEAR)
        return {"image": np.asarray(pixels), "path": sample["__key__"]}


def preprocess(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """uint8 images (N, H, W, C) -> normalized float32 (N, C, H, W); keeps the paths."""
    pixels = batch["image"]
    images = np.empty((len(pixels), pixels.shape[3]) + pixels.shape[1:3], dtype=np.float32)
    images[...] = pixels.transpose(0, 3, 1, 2)  # one pass: convert and reorder
    images *= 1 / 255.0
    images -= MEAN
    images /= STD
    return {"image": images, "path": batch["path"]}


def pick_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def gpus_per_actor(device: str, actors: int = ACTORS) -> float | None:
    """A GPU each when there are enough; otherwise the actors share the devices."""
    if device != "cuda":
        return None
    count = torch.cuda.device_count()
    return 1.0 if count >= actors else round(count / actors, 2)


class Predictor:
    """Loads the model once per actor, then labels batch after batch."""

    def __init__(self, weights: str, device: str = "cpu"):
        # Batches are read-only views of the data; the model only reads them.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.device = torch.device(device)
        self.model = TinyCNN()
        self.model.load_state_dict(torch.load(weights, map_location="cpu"))
        self.model.to(self.device).eval()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        images = torch.as_tensor(batch["image"]).to(self.device, non_blocking=True)
        with torch.inference_mode():
            probabilities = torch.softmax(self.model(images), dim=1)
            score, label = probabilities.max(dim=1)
        return {"path": batch["path"], "label": label.cpu().numpy(), "score": score.cpu().numpy()}


def build_pipeline(
    m: Any,
    images: str,
    weights: str,
    *,
    device: str = "cpu",
    actor_args: dict[str, Any] | None = None,
    source: str = "images",
    actors: int = ACTORS,
) -> Any:
    """The pipeline on module ``m`` (``shardflow`` or ``ray.data``): predictions per image.

    ``images`` is a folder of JPEGs, or of WebDataset shards when ``source="webdataset"``.
    """
    num_gpus = gpus_per_actor(device, actors)
    if source == "webdataset":
        ds = m.read_webdataset(images, decoder=decode_resized)
    else:
        ds = m.read_images(images, size=SIZE, mode="RGB", include_paths=True)
    ds = ds.map_batches(preprocess, batch_size=BATCH_SIZE)
    return ds.map_batches(
        Predictor,
        fn_constructor_kwargs={"weights": weights, "device": device},
        batch_size=BATCH_SIZE,
        concurrency=actors,
        **({"num_gpus": num_gpus} if num_gpus else {}),
        **(actor_args or {}),
    )


def bare_loop(images: str, weights: str, out: str, threads: int = 2, device: str = "cpu") -> int:
    """The same work without a framework: Pillow and the model on ``threads`` threads."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    torch.set_num_threads(1)
    names = sorted(n for n in os.listdir(images) if n.endswith(".jpg"))
    chunks = [names[i : i + BATCH_SIZE] for i in range(0, len(names), BATCH_SIZE)]
    predictor = Predictor(weights, device)

    def run(chunk):
        pixels = []
        for name in chunk:
            with Image.open(os.path.join(images, name)) as image:
                image = image.convert("RGB").resize((SIZE[1], SIZE[0]), Image.BILINEAR)
                pixels.append(np.asarray(image))
        paths = np.array([os.path.join(images, n) for n in chunk])
        return predictor(preprocess({"image": np.stack(pixels), "path": paths}))

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(run, chunks))
    columns = ("path", "label", "score")
    table = pa.table({k: np.concatenate([r[k] for r in results]) for k in columns})
    os.makedirs(out, exist_ok=True)
    pq.write_table(table, os.path.join(out, "predictions.parquet"))
    return table.num_rows


def training_loop_wait_fraction(
    sf: Any, images: str, epochs: int = 2, step_s: float = 0.01
) -> tuple:
    """Train for ``step_s`` per batch on the images, decoded once and kept in memory, for
    ``epochs`` epochs; returns (steps, share of the loop's time spent waiting for data)."""
    ds = sf.read_images(images, size=(64, 64), mode="RGB").materialize()
    waited, steps, busy = 0.0, 0, 0.0
    for _ in range(epochs):
        batches = iter(
            ds.iter_torch_batches(
                batch_size=BATCH_SIZE, prefetch_batches=8, dtypes={"image": torch.uint8}
            )
        )
        next(batches)  # the epoch's start-up is not the loop's steady state
        start = time.perf_counter()
        while True:
            asked = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                break
            waited += time.perf_counter() - asked
            images_in = batch["image"].permute(0, 3, 1, 2).float()  # the step's own work
            time.sleep(step_s)  # stands for the forward and backward pass on images_in
            del images_in
            steps += 1
        busy += time.perf_counter() - start
    return steps, waited / max(busy, 1e-9)


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=2000, help="JPEGs to write and label")
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--workdir", default=None, help="folder for images, weights, output")
    parser.add_argument(
        "--source",
        choices=["images", "webdataset"],
        default="images",
        help="read the JPEG files, or WebDataset shards packed from them",
    )
    parser.add_argument(
        "--actors",
        type=int,
        default=ACTORS,
        help="model actors (on CUDA: a GPU each when there are enough, else shares of one)",
    )
    parser.add_argument(
        "--no-training", action="store_true", help="skip the simulated training loop"
    )
    args = parser.parse_args(argv)

    import shardflow as sf

    if args.backend == "ray":
        sf.init(backend="ray")
    workdir = args.workdir or tempfile.mkdtemp(prefix="shardflow-batch-inference-")
    images = make_images(os.path.join(workdir, f"images-{args.images}"), args.images)
    weights = save_weights(os.path.join(workdir, "tiny_cnn.pt"))
    out = os.path.join(workdir, f"predictions-{int(time.time() * 1000)}")
    device = pick_device()
    source = images
    if args.source == "webdataset":
        source = make_shards(sf, images, os.path.join(workdir, f"shards-{args.images}"))
    if args.actors < 1:
        parser.error(f"--actors must be >= 1, got {args.actors}")
    print(
        f"{args.images} images in {source}; model on {device} "
        f"({args.actors} actors, num_gpus={gpus_per_actor(device, args.actors)}); "
        f"backend {args.backend}"
    )

    start = time.perf_counter()
    pipeline = build_pipeline(
        sf, source, weights, device=device, source=args.source, actors=args.actors
    )
    pipeline.write_parquet(out)
    seconds = time.perf_counter() - start
    predictions = sf.read_parquet(out)
    rows = predictions.count()
    print(f"labelled {rows} images in {seconds:.2f} s: {rows / seconds:.0f} images/s")
    print(
        "labels:",
        dict(sorted((k, v) for k, v in predictions.groupby("label").count().to_pandas().values)),
    )

    if args.no_training:
        return
    steps, waiting = training_loop_wait_fraction(sf, images)
    print(
        f"training loop: {steps} steps of 10 ms over 2 epochs, {waiting:.1%} of the time "
        "waiting for data"
    )


if __name__ == "__main__":
    main()
