"""GPUs of the local backend: which devices exist, and which actor holds which.

Devices are the ones declared with ``sf.init(num_gpus=n)`` (logical devices ``0..n-1``, so
GPU scheduling can be tried on a machine without one), or else the ones this process may use:
those listed in ``CUDA_VISIBLE_DEVICES``, or every NVIDIA device the driver reports. An actor
asking for ``num_gpus=k`` (a whole number) gets k devices of its own; an actor asking for a
fraction shares one device with others whose fractions add up to at most 1. The actor's
process sees only its devices, through ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import glob
import math
import os
import threading

_EPS = 1e-9


def visible_devices(declared: int | None = None) -> list[str]:
    """Device ids this process may hand out: declared ones, else the machine's."""
    if declared is not None:
        return [str(i) for i in range(declared)]
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [d.strip() for d in env.split(",") if d.strip()]
        return [] if ids in (["-1"], ["NoDevFiles"]) else ids
    return [str(i) for i in range(len(glob.glob("/proc/driver/nvidia/gpus/*")))]


def actors_that_fit(num_devices: int, num_gpus: float) -> float:
    """How many actors asking for ``num_gpus`` each the devices can hold at once."""
    if num_gpus <= 0:
        return math.inf
    if num_gpus >= 1:
        return num_devices // int(num_gpus)
    return num_devices * math.floor(1 / num_gpus + _EPS)


class GpuAllocator:
    """Hands out devices to actors; one per set of devices, shared by every execution."""

    _instances: dict[tuple[str, ...], GpuAllocator] = {}
    _instances_lock = threading.Lock()

    def __init__(self, devices: list[str]):
        self.devices = list(devices)
        self._free = dict.fromkeys(self.devices, 1.0)
        self._lock = threading.Lock()

    @classmethod
    def for_devices(cls, devices: list[str]) -> GpuAllocator:
        key = tuple(devices)
        with cls._instances_lock:
            if key not in cls._instances:
                cls._instances[key] = GpuAllocator(devices)
            return cls._instances[key]

    def acquire(self, num_gpus: float) -> list[tuple[str, float]] | None:
        """(device, share) pairs for one actor, or None when not enough is free now."""
        with self._lock:
            if num_gpus >= 1:
                whole = [d for d in self.devices if self._free[d] >= 1 - _EPS]
                if len(whole) < int(num_gpus):
                    return None
                taken = [(d, 1.0) for d in whole[: int(num_gpus)]]
            else:
                # The fullest device that still fits, so fractions pack onto few devices.
                fits = [d for d in self.devices if self._free[d] >= num_gpus - _EPS]
                if not fits:
                    return None
                device = min(fits, key=lambda d: self._free[d])
                taken = [(device, num_gpus)]
            for device, share in taken:
                self._free[device] -= share
            return taken

    def release(self, taken: list[tuple[str, float]]) -> None:
        with self._lock:
            for device, share in taken:
                self._free[device] = min(1.0, self._free[device] + share)

    def free(self) -> dict[str, float]:
        with self._lock:
            return dict(self._free)
