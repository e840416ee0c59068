"""Where a Zarr store lives and how its chunks are read: an fsspec filesystem and the store's
root, opened through a mapping that lets a missing chunk be a fill value but never another
error (zarr-python 2's own fsspec store drops the chunks whose read raised, a throttled or
dropped request among them, and zarr then fills them with the fill value, silently)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from shardflow.sdk.file_reading import file_error
from shardflow.sdk.filesystems import display_path, redact, resolve_filesystem
from shardflow.sdk.local_disk import LocalDisk
from shardflow.sdk.optional import require
from shardflow.sdk.retry import RetryConfig, call_with_retry


def zarr_module() -> Any:
    """zarr-python 2, or an ImportError saying what to install."""
    zarr = require("zarr", "zarr", "Reading Zarr stores")
    if int(zarr.__version__.split(".")[0]) >= 3:
        raise ImportError(
            f"read_zarr reads Zarr v2 stores with zarr-python 2.x, but found "
            f"zarr=={zarr.__version__}. Install a compatible version with "
            "`pip install 'zarr<3'` (or `pip install 'shardflow[zarr]'`)."
        )
    return zarr


@dataclass(frozen=True)
class ZarrStore:
    """Where a store lives: an fsspec filesystem (picklable) and the store's root in it."""

    fs: Any
    root: str
    shown: str

    def mapper(self) -> Any:
        """The store as zarr reads it (see the module's docstring)."""
        return _strict_store_class()(self.fs.get_mapper(self.root))

    def open(self, array: str, retry: RetryConfig) -> Any:
        """The array at path ``array`` of the store, opened for reading."""
        with self.errors_named(array):
            return call_with_retry(
                lambda: zarr_module().open_array(store=self.mapper(), path=array, mode="r"),
                description=f"open {self.shown}/{array}",
                config=retry,
            )

    @contextmanager
    def errors_named(self, array: str) -> Iterator[None]:
        """Errors inside name the store and the array."""
        try:
            yield
        except Exception as exc:
            where = f"{self.shown} (array {array!r})" if array else self.shown
            raise file_error(exc, where, file_format="Zarr") from exc


def read_slices(
    store: ZarrStore, opened: Any, slices: tuple[tuple[int, int], ...], retry: RetryConfig
) -> np.ndarray:
    """``opened[slices]`` as a NumPy array in native byte order; transient storage errors
    (and ``DataContext.retried_io_errors``) are retried."""
    where = tuple(slice(a, b) for a, b in slices)
    with store.errors_named(opened.path):
        data = call_with_retry(
            lambda: np.asarray(opened[where]),
            description=f"read {store.shown}/{opened.path}",
            config=retry,
        )
    if not data.dtype.isnative:
        data = data.astype(data.dtype.newbyteorder("="))
    return data


def open_store(path: str, filesystem: Any, storage_options: dict[str, Any] | None) -> ZarrStore:
    """Where the store at ``path`` lives: a folder on any filesystem, or a ``.zip`` archive
    (the archive's root is the store's)."""
    if filesystem is None and path.endswith(".zip"):
        import fsspec

        zip_fs = fsspec.filesystem("zip", fo=path, target_options=storage_options or {})
        return ZarrStore(zip_fs, "", redact(path))
    fs, (root,) = resolve_filesystem([path], filesystem, storage_options)
    if isinstance(fs, LocalDisk):  # zarr needs a real fsspec mapper
        fs = fs.fsspec()
    from fsspec.implementations.zip import ZipFileSystem

    if isinstance(fs, ZipFileSystem) and path.endswith(".zip"):
        root = ""  # the archive given as filesystem= is the store
    return ZarrStore(fs, root.rstrip("/"), display_path(fs, root) if root else redact(path))


_STRICT_STORE: list[type] = []


def _strict_store_class() -> type:
    """zarr's store of a mapping (``KVStore``) whose ``getitems`` skips only the chunks that
    do not exist (zarr fills them with the fill value) and raises any other error; made on
    first use, as zarr is optional."""
    if not _STRICT_STORE:
        from zarr.storage import KVStore

        class StrictMappingStore(KVStore):  # type: ignore[misc, valid-type]
            def getitems(self, keys: Any, *, contexts: Mapping[str, Any]) -> dict[str, Any]:
                found = {}
                for key in keys:
                    try:  # fsspec's FSMap: KeyError only when the object does not exist
                        found[key] = self._mutable_mapping[key]
                    except KeyError:
                        continue
                return found

        _STRICT_STORE.append(StrictMappingStore)
    return _STRICT_STORE[0]
