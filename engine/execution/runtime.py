"""Which backend runs executions: ``init`` chooses, ``current_backend`` builds it lazily."""

from __future__ import annotations

import os
import threading
from typing import Any

from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.backends.base import Backend

_lock = threading.Lock()
_backends: dict = {}


def _forget_backends_in_child() -> None:
    """A forked child (a PyTorch DataLoader worker, say) builds backends of its own: the
    parent's thread pools and worker processes did not come along."""
    global _lock, _backends
    _lock = threading.Lock()
    _backends = {}


os.register_at_fork(after_in_child=_forget_backends_in_child)


def init(backend: str = "local", address: str | None = None, **ray_init_kwargs: Any) -> None:
    """Choose the backend for this process's executions.

    Nothing starts unless asked: without ``init`` shardflow runs embedded (``"local"``).
    With ``backend="ray"`` it joins the Ray cluster at ``address``, or starts a local Ray
    that listens on 127.0.0.1 only when ``address`` is None and Ray is not running.

    On the local backend, ``num_gpus=n`` declares n logical GPUs (device ids ``0..n-1``)
    that actors and tasks asking for GPUs are given, each seeing only its own devices in
    ``CUDA_VISIBLE_DEVICES``; ``num_cpus`` sets the worker slots.

    Args:
        backend: ``"local"`` or ``"ray"``.
        address: Address of an existing Ray cluster (``"auto"`` to find one), or None.
        ray_init_kwargs: Passed to ``ray.init`` when Ray is started here (e.g. ``num_cpus``,
            ``num_gpus``); for the local backend only ``num_cpus`` and ``num_gpus``.

    Examples:
        >>> import shardflow as sf
        >>> sf.init(backend="local")
        >>> sf.init(num_gpus=2)  # two logical GPUs, e.g. to test GPU scheduling on a laptop
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}.")
    context = DataContext.get_current()
    if backend == "local":
        local = {
            k: ray_init_kwargs.pop(k) for k in ("num_cpus", "num_gpus") if k in ray_init_kwargs
        }
        if address is not None or ray_init_kwargs:
            raise ValueError(
                "address and Ray options apply only to backend='ray'; the local backend takes "
                f"num_cpus and num_gpus (got {sorted(ray_init_kwargs) or ['address']})."
            )
        for name, minimum in (("num_cpus", 1), ("num_gpus", 0)):
            value = local.get(name)
            bad = isinstance(value, bool) or not isinstance(value, int) or value < minimum
            if value is not None and bad:
                raise ValueError(f"init: {name} must be an int >= {minimum}, got {value!r}.")
        for name, value in local.items():
            setattr(context, name, value)
    if backend == "ray":
        from shardflow.engine.execution.backends.ray_backend import ensure_ray

        ensure_ray(address, **ray_init_kwargs)
        with _lock:
            _backends.pop("ray", None)
    context.backend = backend


def current_backend(context: DataContext | None = None) -> Backend:
    """The backend named by the context, created on first use."""
    context = context or DataContext.get_current()
    name = context.backend
    with _lock:
        if name == "local":
            key = ("local", context.effective_num_cpus(), context.num_gpus)
            backend = _backends.get(key)
            if backend is None:
                from shardflow.engine.execution.backends.local import LocalBackend

                backend = LocalBackend(context.effective_num_cpus(), context.num_gpus)
                _backends[key] = backend
            return backend
        if name == "ray":
            backend = _backends.get("ray")
            if backend is None:
                from shardflow.engine.execution.backends.ray_backend import RayBackend

                backend = RayBackend()
                _backends["ray"] = backend
            return backend
    raise ValueError(f"Unknown backend {name!r}; use 'local' or 'ray'.")
