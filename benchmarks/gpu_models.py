"""What the GPU benchmark (B18) and its checks run: a ResNet-50 made of torch layers, its
predictor, the CPU preprocessing and the same preprocessing as a GPU stage.

The ResNet has random weights (seeded, saved once): what B18 measures is how well a pipeline
keeps a real CNN's GPU busy, not what the model predicts. Nothing here imports shardflow or
Ray, so the same classes run on both and in the bare torch loop.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import torch

SIZE = (224, 224)
NUM_CLASSES = 1000
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)


class Bottleneck(torch.nn.Module):
    """ResNet's 1x1 -> 3x3 -> 1x1 block with a shortcut (projected when the shape changes)."""

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        outputs = width * 4
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(inputs, width, 1, bias=False),
            torch.nn.BatchNorm2d(width),
            torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False),
            torch.nn.BatchNorm2d(width),
            torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(width, outputs, 1, bias=False),
            torch.nn.BatchNorm2d(outputs),
        )
        self.shortcut: torch.nn.Module = torch.nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = torch.nn.Sequential(
                torch.nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False),
                torch.nn.BatchNorm2d(outputs),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet50(torch.nn.Module):
    """ResNet-50 (3, 4, 6, 3 bottleneck blocks; about 25.6 million parameters)."""

    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        layers: list[torch.nn.Module] = [
            torch.nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            torch.nn.BatchNorm2d(64),
            torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(3, stride=2, padding=1),
        ]
        inputs = 64
        for blocks, width, stride in ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)):
            for index in range(blocks):
                layers.append(Bottleneck(inputs, width, stride if index == 0 else 1))
                inputs = width * 4
        layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(inputs, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def save_weights(path: str, seed: int = 0) -> str:
    """Initialize a ResNet-50 with ``seed`` and save its weights to ``path`` (atomically)."""
    if not os.path.exists(path):
        torch.manual_seed(seed)
        torch.save(ResNet50().state_dict(), path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


def preprocess(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """uint8 images (N, H, W, C) -> normalized float32 (N, C, H, W); keeps the paths."""
    pixels = batch["image"]
    images = np.empty((len(pixels), pixels.shape[3]) + pixels.shape[1:3], dtype=np.float32)
    images[...] = pixels.transpose(0, 3, 1, 2)
    images *= 1 / 255.0
    images -= MEAN
    images /= STD
    return {"image": images, "path": batch["path"]}


class GpuPreprocess:
    """``preprocess`` on the GPU: uint8 batches go to CUDA, are normalized there and come back
    as float32 (seed 002's ``preprocess_images_gpu``)."""

    def __init__(self, device: str = "cuda") -> None:
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.device = torch.device(device)
        self.mean = torch.as_tensor(MEAN, device=self.device)
        self.std = torch.as_tensor(STD, device=self.device)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pixels = torch.as_tensor(batch["image"]).to(self.device, non_blocking=True)
        images = pixels.permute(0, 3, 1, 2).float().div_(255.0).sub_(self.mean).div_(self.std)
        return {"image": images.contiguous().cpu().numpy(), "path": batch["path"]}


class Predictor:
    """Loads the ResNet once per actor, then labels batch after batch on ``device``.

    Each output row also says what the actor saw: ``CUDA_VISIBLE_DEVICES`` and how many
    devices torch counts, so a check can prove each actor got only its own.
    """

    def __init__(self, weights: str, device: str = "cuda", pin_memory: bool = False) -> None:
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.device = torch.device(device)
        torch.backends.cudnn.benchmark = True
        model = ResNet50()
        model.load_state_dict(torch.load(weights, map_location="cpu"))
        self.model = model.to(self.device).eval()
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        self.count = torch.cuda.device_count() if self.device.type == "cuda" else 0
        self.pin_memory = pin_memory and self.device.type == "cuda"

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        images = torch.as_tensor(batch["image"])
        if self.pin_memory:
            images = images.pin_memory()
        images = images.to(self.device, non_blocking=True)
        if images.dtype == torch.uint8:  # raw pixels: normalize here, on the device
            mean = torch.as_tensor(MEAN, device=self.device)
            std = torch.as_tensor(STD, device=self.device)
            images = images.permute(0, 3, 1, 2).float().div_(255.0).sub_(mean).div_(std)
        with torch.inference_mode():
            score, label = torch.softmax(self.model(images), dim=1).max(dim=1)
        rows = len(batch["path"])
        return {
            "path": batch["path"],
            "label": label.cpu().numpy(),
            "score": score.cpu().numpy(),
            "visible_devices": np.array([self.visible] * rows),
            "device_count": np.full(rows, self.count, dtype=np.int64),
        }
