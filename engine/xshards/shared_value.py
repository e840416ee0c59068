"""SharedValue: a read-only value shipped once per worker process, not once per task.

In the driver a SharedValue holds its value. When a task that uses it is sent to a worker,
only a small handle travels with the task; the value itself is stored once:

- on Ray, in the object store (one ``ray.put``); a worker process fetches it with its first
  task and keeps it for the next ones (numpy arrays stay zero-copy views of the store);
- on the local backend, in one file of shared memory (``/dev/shm`` where there is room,
  else the temporary folder) written with pickle protocol 5: a worker process maps the file
  and unpickles it once, and numpy arrays in the value are read-only views of the mapping,
  so all workers share one copy in memory;
- tasks in threads of the driver use the value itself.

``unpersist()`` deletes the stored copy and tells workers (with their next task) to drop
theirs; the driver keeps the value, and a later use stores it again, as Spark's broadcast.
"""

from __future__ import annotations

import mmap
import os
import pickle
import struct
import tempfile
import threading
import uuid
import weakref
from collections import deque
from typing import Any

from shardflow.engine.execution.private_dirs import create_private_file, make_private_dir
from shardflow.sdk.optional import require

_DIR_PREFIX = "shardflow-shared-"
_TRAILER = struct.Struct("<Q")
_ALIGN = 64

_cache_lock = threading.Lock()
_cache: dict[str, Any] = {}  # values loaded by this process, by key
_LOADS: dict[str, int] = {}  # how often this process loaded each key (once, by design)
_released: deque[str] = deque(maxlen=64)  # keys unpersisted lately in this driver
_folder: str | None = None
_folder_lock = threading.Lock()


class SharedValue:
    """A large read-only input given to every worker once (Orca's ``SharedValue``, Spark's
    broadcast), for use as an argument of ``transform_shard`` (or of any Dataset function).

    Tasks carry a small handle; the value is stored once and each worker process loads it
    once, with its first task that reads ``.value``. In worker processes numpy arrays inside
    the value are read-only views of the one stored copy (as values from Ray's object store
    are); tasks in the driver's threads see the value itself.

    Args:
        value: Any picklable object.

    Examples:
        >>> import numpy as np
        >>> from shardflow.xshards import SharedValue, XShards
        >>> table = SharedValue(np.arange(1000))
        >>> shards = XShards.partition(np.array([1, 2, 3, 4]), num_shards=2)
        >>> shards.transform_shard(lambda x, t: t.value[x], table).collect()
        [array([1, 2]), array([3, 4])]
    """

    def __init__(self, value: Any):
        self._key = uuid.uuid4().hex
        self._version = 0
        self._value = value
        self._has_value = True
        self._source: tuple[str, Any] | None = None
        self._lock = threading.Lock()
        self._stored: dict[str, Any] = {"file": None, "ray": None}
        self._finalizer = weakref.finalize(self, _drop_stored, self._stored)

    @property
    def value(self) -> Any:
        """The value (in a worker, loaded on first use and kept for later tasks)."""
        if self._has_value:
            return self._value
        return _load(self._cache_key, self._source)

    def unpersist(self) -> None:
        """Delete the stored copy and let workers drop theirs.

        The value stays usable: a later task stores it again.
        """
        if not self._has_value:  # a worker's handle: forget this process's copy
            with _cache_lock:
                _cache.pop(self._cache_key, None)
            return
        with self._lock:
            _released.append(self._cache_key)
            _drop_stored(self._stored)
            self._version += 1

    @property
    def _cache_key(self) -> str:
        return f"{self._key}:{self._version}"

    def _store(self) -> tuple[str, Any]:
        """Where tasks find the value: stored once per version, on first need."""
        from shardflow.engine.api.context import DataContext

        with self._lock:
            if DataContext.get_current().backend == "ray" and _ray_running():
                if self._stored["ray"] is None:
                    ray = require("ray", "ray", "SharedValue on the Ray backend")

                    self._stored["ray"] = ray.put(self._value)
                return ("ray", self._stored["ray"])
            if self._stored["file"] is None:
                self._stored["file"] = _write_file(self._value)
            return ("file", self._stored["file"])

    def __reduce__(self) -> tuple:
        source = self._store() if self._has_value else self._source
        return (_restore, (self._key, self._version, source, tuple(_released)))

    def __repr__(self) -> str:
        where = "value in hand" if self._has_value else f"stored as {self._source[0]}"
        return f"SharedValue({where})"


def _ray_running() -> bool:
    import sys

    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def _restore(
    key: str, version: int, source: tuple[str, Any], released: tuple[str, ...]
) -> SharedValue:
    """A worker's handle of a SharedValue; drops copies the driver has released."""
    if released:
        with _cache_lock:
            for old in released:
                _cache.pop(old, None)
    handle = SharedValue.__new__(SharedValue)
    handle._key, handle._version, handle._source = key, version, source
    handle._value, handle._has_value = None, False
    handle._lock = threading.Lock()
    handle._stored = {"file": None, "ray": None}
    return handle


def _load(cache_key: str, source: tuple[str, Any]) -> Any:
    with _cache_lock:
        if cache_key in _cache:
            return _cache[cache_key]
        kind, where = source
        if kind == "ray":
            ray = require("ray", "ray", "SharedValue on the Ray backend")

            value = ray.get(where)
        else:
            value = _read_file(where)
        _cache[cache_key] = value
        _LOADS[cache_key] = _LOADS.get(cache_key, 0) + 1
        return value


def loads_in_this_process() -> dict[str, int]:
    """How many times this process loaded each stored value, by ``key:version`` (for tests
    and diagnostics: once each, by design)."""
    with _cache_lock:
        return dict(_LOADS)


def cached_in_this_process() -> list:
    """The ``key:version`` of every value this process holds now."""
    with _cache_lock:
        return list(_cache)


# -- the local store: one file per value, mapped by workers -------------------------------


def _write_file(value: Any) -> str:
    """Write ``value`` with its buffers out of band, each aligned, and a footer of offsets."""
    import cloudpickle

    buffers: list = []
    main = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    size = len(main) + sum(len(r) + _ALIGN for r in raws)
    path = os.path.join(_shared_folder(size), uuid.uuid4().hex)
    spans = []
    create_private_file(path)  # mode 0600, never through a planted file
    with open(path, "wb") as f:
        f.write(main)
        position = len(main)
        for raw in raws:
            pad = -position % _ALIGN
            f.write(b"\0" * pad)
            position += pad
            f.write(raw)
            spans.append((position, raw.nbytes))
            position += raw.nbytes
        footer = pickle.dumps({"main": (0, len(main)), "buffers": spans})
        f.write(footer)
        f.write(_TRAILER.pack(len(footer)))
    return path


def _read_file(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError as exc:
        raise RuntimeError(
            "A SharedValue was unpersisted (or its driver ended) before this task read it; "
            "unpersist() only after the tasks that use it have run."
        ) from exc
    view = memoryview(mapped)
    (length,) = _TRAILER.unpack(view[-_TRAILER.size :])
    end = len(view) - _TRAILER.size
    footer = pickle.loads(view[end - length : end])
    start, size = footer["main"]
    buffers = [view[offset : offset + n] for offset, n in footer["buffers"]]
    return pickle.loads(view[start : start + size], buffers=buffers)


def _drop_stored(stored: dict[str, Any]) -> None:
    path = stored.get("file")
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass
    stored["file"] = None
    stored["ray"] = None


def _shared_folder(size: int) -> str:
    """This process's private folder for stored values (engine/execution/private_dirs.py:
    0700, removed at exit, swept after a kill): in /dev/shm when it has room."""
    global _folder
    with _folder_lock:
        if _folder is None or not os.path.isdir(_folder):
            base = tempfile.gettempdir()
            shm = "/dev/shm"
            if os.path.isdir(shm) and os.access(shm, os.W_OK):
                stats = os.statvfs(shm)
                if stats.f_bavail * stats.f_frsize > 2 * size:
                    base = shm
            _folder = make_private_dir(_DIR_PREFIX, base)
        return _folder
